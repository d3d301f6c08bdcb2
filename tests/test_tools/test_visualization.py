"""Token maps, class-token attention, and the PNG tools that draw them."""

import os
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from t2t_plugin.analysis import cls_attention_maps, collect_token_maps
from t2t_plugin.cli.model_loading import load_model, preprocess_image

from ..helpers import load_tool, write_image, write_tiny_model

vis_features = load_tool('tools/visualization/vis_features.py')
vis_attention = load_tool('tools/visualization/vis_attention.py')


@pytest.fixture
def tiny(tmp_path):
    config, checkpoint, _ = write_tiny_model(tmp_path)
    images = tmp_path / 'images'
    images.mkdir()
    for seed, name in enumerate(('a.png', 'b.jpg')):
        write_image(images / name, seed=seed)
    return config, checkpoint, images


def _plain_cls_attention(attn, x):
    """softmax(q k^T * head_dims^-0.5) of the cls row, written out."""
    batch, length, _ = x.shape
    qkv = (x @ attn.qkv.weight.t()).reshape(
        batch, length, 3, attn.num_heads, -1
    )
    q, k = qkv[:, :, 0].transpose(1, 2), qkv[:, :, 1].transpose(1, 2)
    scores = (q[:, :, :1] @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5
    return scores.softmax(-1)[:, :, 0]


def test_cls_attention_is_the_softmax_row(tiny):
    config, checkpoint, images = tiny
    model = load_model(config, str(checkpoint))
    inputs, _ = preprocess_image(model, images / 'a.png')
    block_inputs = {}
    hooks = [
        layer.attn.register_forward_hook(
            lambda module, args, out, i=i: block_inputs.__setitem__(i, args[0])
        )
        for i, layer in enumerate(model.backbone.encoder)
    ]
    maps = cls_attention_maps(model.backbone, inputs, [0, -1])
    for hook in hooks:
        hook.remove()
    assert sorted(maps) == [0, 1]
    for index, heads in maps.items():
        assert heads.shape == (1, 2, 2, 2)  # 32 px at stride 16
        row = _plain_cls_attention(
            model.backbone.encoder[index].attn, block_inputs[index]
        )
        torch.testing.assert_close(
            heads.flatten(2), row[:, :, 1:], atol=1e-6, rtol=1e-5
        )
        assert (heads.flatten(2).sum(-1) < 1).all()


def test_token_maps_have_the_strides_of_the_t2t_module(tiny):
    config, checkpoint, images = tiny
    model = load_model(config, str(checkpoint))
    inputs, picture = preprocess_image(model, images / 'a.png')
    assert picture.shape == (32, 32, 3) and picture.dtype == np.uint8
    maps = collect_token_maps(model.backbone, inputs, [1])
    shapes = {name: tuple(value.shape) for name, value in maps.items()}
    assert shapes == {
        't2t_layer1': (1, 16, 8, 8),
        't2t_layer2': (1, 16, 4, 4),
        't2t_tokens': (1, 32, 2, 2),
        'block1': (1, 32, 2, 2),
    }
    # block 1 is the last one: the backbone's output before its final norm
    with torch.no_grad():
        model.backbone.out_type = 'featmap'
        model.backbone.final_norm = False
        model.backbone.norm = torch.nn.Identity()
        torch.testing.assert_close(maps['block1'], model.backbone(inputs)[0])


def _png(path):
    image = Image.open(path)
    pixels = np.asarray(image.convert('RGB'))
    assert pixels.std() > 0  # something is drawn
    return image.size


def test_vis_features_writes_a_grid_per_map_and_image(tiny, tmp_path, capsys):
    config, checkpoint, images = tiny
    out_dir = tmp_path / 'features'
    assert (
        vis_features.main(
            [
                str(images),
                str(config),
                str(checkpoint),
                '--blocks',
                '0',
                '--out-dir',
                str(out_dir),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out.split()
    assert sorted(printed) == sorted(str(p) for p in out_dir.iterdir())
    assert len(printed) == 2 * 4
    # 64 px panels, 4 px gaps, 16 px labels, a 22 px title: 16 channels
    # make a 4x4 grid, 32 channels a 6x6 one (the last row holds 2)
    assert _png(out_dir / 'a_t2t_layer1.png') == (276, 362)
    assert _png(out_dir / 'b_t2t_layer2.png') == (276, 362)
    assert _png(out_dir / 'a_t2t_tokens.png') == (412, 530)
    assert _png(out_dir / 'b_block0.png') == (412, 530)


def test_vis_attention_overlays_the_chosen_blocks(tiny, tmp_path, capsys):
    config, checkpoint, images = tiny
    out_dir = tmp_path / 'attention'
    assert (
        vis_attention.main(
            [
                str(images / 'a.png'),
                str(config),
                str(checkpoint),
                '--out-dir',
                str(out_dir),
            ]
        )
        == 0
    )
    path = out_dir / 'a_attention.png'
    assert capsys.readouterr().out.split() == [str(path)]
    # the 32 px input, then blocks 0 and 1 (first, middle and last of two)
    assert _png(path) == (3 * 32 + 4 * 4, 22 + 16 + 32 + 2 * 4)

    assert (
        vis_attention.main(
            [
                str(images / 'b.jpg'),
                str(config),
                str(checkpoint),
                '--blocks',
                '1',
                '--per-head',
                '--out-dir',
                str(out_dir),
            ]
        )
        == 0
    )
    # rows: the input; block 1 as the head mean and its two heads
    assert _png(out_dir / 'b_attention.png') == (
        3 * 32 + 4 * 4,
        22 + 2 * 48 + 3 * 4,
    )


def test_tools_report_user_mistakes_in_one_line(tiny, capsys):
    config, checkpoint, images = tiny
    for tool, argv in (
        (vis_attention, ['--blocks', '5']),
        (vis_features, ['--blocks', '-3']),
    ):
        assert (
            tool.main([str(images), str(config), str(checkpoint)] + argv) == 1
        )
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and 'Block' in err[0]


@pytest.mark.parametrize('tool', [vis_attention, vis_features])
def test_tools_skip_unreadable_images_and_refuse_a_file_as_out_dir(
    tiny, tmp_path, capsys, tool
):
    config, checkpoint, images = tiny
    broken = images / 'broken.jpg'
    broken.write_bytes(b'\xff\xd8 a truncated download')
    out_dir = tmp_path / 'out'
    assert (
        tool.main(
            [
                str(images),
                str(config),
                str(checkpoint),
                '--blocks',
                '0',
                '--out-dir',
                str(out_dir),
            ]
        )
        == 1
    )
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 2 and err[0].startswith(f'error: {broken} ')
    assert err[1] == 'error: 1 of 3 images failed: broken.jpg'
    # the readable images around it are drawn
    written = {Path(line).name.split('_')[0] for line in captured.out.split()}
    assert written == {'a', 'b'}

    not_a_folder = tmp_path / 'notes.txt'
    not_a_folder.write_text('')
    # checked before the model is read: a missing checkpoint is not reached
    for folder, reason in (
        (not_a_folder, 'a file'),
        (not_a_folder / 'below', 'Not a directory'),
    ):
        assert (
            tool.main(
                [
                    str(images / 'a.png'),
                    str(config),
                    str(tmp_path / 'missing.pth'),
                    '--out-dir',
                    str(folder),
                ]
            )
            == 1
        )
        assert capsys.readouterr().err.strip().splitlines() == [
            f'error: --out-dir {folder} cannot take files ({reason}); give '
            'a writable folder.'
        ]


@pytest.mark.skipif(
    os.geteuid() == 0, reason='root writes into read-only folders'
)
def test_a_read_only_out_dir_is_refused_before_the_work(
    tiny, tmp_path, capsys
):
    config, checkpoint, images = tiny
    folder = tmp_path / 'read-only'
    folder.mkdir()
    folder.chmod(0o555)
    code = vis_features.main(
        [str(images), str(config), str(checkpoint), '--out-dir', str(folder)]
    )
    folder.chmod(0o755)
    assert code == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        f'error: --out-dir {folder} cannot take files (Permission denied); '
        'give a writable folder.'
    ]
