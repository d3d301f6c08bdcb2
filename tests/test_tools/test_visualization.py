"""Token maps, class-token attention, and the PNG tools that draw them."""

import os
from pathlib import Path

import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmpretrain.registry import MODELS
from PIL import Image

from t2t_plugin.analysis import (
    attention_pool_maps,
    cls_attention_maps,
    collect_token_maps,
)
from t2t_plugin.analysis.figures import text_width
from t2t_plugin.apis import load_model, preprocess_image

from ..helpers import ROOT, load_tool, write_image, write_tiny_model

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
    # the 32 px input scaled up 7 times to 224 px, then blocks 0 and 1
    # (first, middle and last of two)
    assert _png(path) == (3 * 224 + 4 * 4, 22 + 16 + 224 + 2 * 4)

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
        3 * 224 + 4 * 4,
        22 + 2 * (16 + 224) + 3 * 4,
    )


def test_tools_report_user_mistakes_in_one_line(
    tiny, tmp_path, capsys, monkeypatch
):
    config, checkpoint, images = tiny
    # read from the config: the checkpoint is never read
    monkeypatch.setattr(
        't2t_plugin.cli.image_tools.load_model',
        lambda *_: pytest.fail('the weights were read'),
    )
    for tool, argv in (
        (vis_attention, ['--blocks', '5']),
        (vis_features, ['--blocks', '-3']),
    ):
        assert (
            tool.main([str(images), str(config), str(checkpoint)] + argv) == 1
        )
        assert capsys.readouterr().err.strip().splitlines() == [
            f'error: Block {argv[1]} does not exist: the backbone has 2 '
            'encoder blocks (0..1, or negative from the end).'
        ]


@pytest.mark.parametrize('tool', [vis_attention, vis_features])
@pytest.mark.parametrize(
    'mistake, line',
    [
        (
            ['CHECKPOINT=missing.pth'],
            'Checkpoint not found: expected {tmp}/missing.pth '
            '(see docs/training.md#training).',
        ),
        (
            ['--cfg-options', 'model.backbone.arch=t-15'],
            "model.backbone.arch: Unknown T2T-ViT arch 't-15'; choose one "
            'of 7, 10, 12, 14, 19, 24, 14-wide, 14-resnext, t-14, t-19, t-24 '
            '(also as t2t-vit-NAME, any case, NAME@384 at 384 px) or pass '
            'a dict.',
        ),
        (
            ['--cfg-options', 'model.head.pol=attention'],
            "model.head.pol: T2TClsHead takes no argument 'pol'; did you "
            "mean 'pool'?",
        ),
    ],
)
def test_config_mistakes_leave_no_out_dir(
    tiny, tmp_path, capsys, tool, mistake, line
):
    """A missing checkpoint, an unknown arch or a misspelt key of the
    model: one line, before --out-dir is made."""
    config, checkpoint, images = tiny
    # the scope our configs name, where the model's classes are looked up
    config.write_text(f"{config.read_text()}default_scope = 'mmpretrain'\n")
    if mistake[0].startswith('CHECKPOINT='):
        checkpoint, mistake = tmp_path / 'missing.pth', []
    out_dir = tmp_path / 'out'
    argv = [str(images), str(config), str(checkpoint), '--out-dir', out_dir]
    assert tool.main([*map(str, argv), *mistake]) == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        'error: ' + line.format(tmp=tmp_path)
    ]
    assert not out_dir.exists()


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
    # checked before the model is read
    for folder in (not_a_folder, not_a_folder / 'below'):
        assert (
            tool.main(
                [
                    str(images / 'a.png'),
                    str(config),
                    str(checkpoint),
                    '--out-dir',
                    str(folder),
                ]
            )
            == 1
        )
        assert capsys.readouterr().err.strip().splitlines() == [
            f'error: --out-dir {folder}: {not_a_folder} is a file, not a '
            'folder.'
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
        f'error: --out-dir {folder}: {folder} is not writable; choose a '
        'folder you can write to.'
    ]


def test_an_out_dir_in_the_image_folder_is_refused(tiny, capsys):
    """Drawn there, a PNG is an image of the next run, which can replace
    it: refused before the work; the images are left as they were."""
    config, checkpoint, images = tiny
    before = {p: p.read_bytes() for p in images.iterdir()}
    for out_dir, end in (
        (
            images,
            'is the image folder, an input of this command; give '
            'another path.',
        ),
        (
            images / 'vis',
            f'lies in the image folder {images}, an input of '
            'this command; give a path outside it.',
        ),
    ):
        code = vis_features.main(
            [
                str(images),
                str(config),
                str(checkpoint),
                '--out-dir',
                str(out_dir),
            ]
        )
        assert code == 1
        assert capsys.readouterr().err.strip().splitlines() == [
            f'error: --out-dir {out_dir} {end}'
        ]
    assert {p: p.read_bytes() for p in images.iterdir()} == before


LITE = ROOT / 'configs/t2t-vit-lite_1xb64_custom-32px.py'
DEMO = ROOT / 'configs/t2t-vit-mini_1xb64_digits.py'


def random_checkpoint(config, folder):
    """A checkpoint of ``config``'s model with random weights."""
    model = MODELS.build(Config.fromfile(str(config)).model)
    with torch.no_grad():
        for param in model.parameters():
            param.normal_(0, 0.2)
    path = Path(folder) / f'{Path(config).stem}.pth'
    torch.save(dict(state_dict=model.state_dict()), path)
    return path


def test_pooling_weights_are_the_heads_softmax_over_tokens(tmp_path):
    checkpoint = random_checkpoint(LITE, tmp_path)
    model = load_model(str(LITE), str(checkpoint))
    inputs, _ = preprocess_image(model, write_image(tmp_path / 'a.png'))
    maps = attention_pool_maps(model, inputs)
    assert maps.shape == (1, 8, 8)  # 32 px at stride 4
    with torch.no_grad():
        tokens = model.backbone(inputs)[-1]  # (1, 64, 128), no class token
        pool = model.head.attention_pool
        scores = (tokens @ pool.weight.t() + pool.bias)[..., 0]
        expected = scores.exp() / scores.exp().sum(1, keepdim=True)
    torch.testing.assert_close(maps.flatten(1), expected, atol=1e-6, rtol=0)
    assert abs(maps.sum().item() - 1) < 1e-5


@pytest.mark.parametrize('config, side', [(LITE, 32), (DEMO, 8)])
def test_vis_attention_draws_small_inputs_readably(
    tmp_path, capsys, config, side
):
    """The 32 px recipe without a class token: its pooling weights; the
    8 px demo: its class token. Panels at least 224 px, titles whole."""
    checkpoint = random_checkpoint(config, tmp_path)
    images = tmp_path / 'images'
    for folder in ('cat', 'dog'):  # one file name in two class folders
        (images / folder).mkdir(parents=True)
        write_image(images / folder / '001.png', (side, side), len(folder))
    out_dir = tmp_path / 'out'
    argv = [str(images), str(config), str(checkpoint), '--out-dir']
    assert vis_attention.main([*argv, str(out_dir)]) == 0
    # after mmengine's log of the weights loaded
    printed = capsys.readouterr().out.splitlines()[-2:]
    paths = [
        out_dir / 'cat_001_attention.png',
        out_dir / 'dog_001_attention.png',
    ]
    assert printed == [str(p) for p in paths]
    panel = 224  # 32 px x 7, 8 px x 28
    assert panel % side == 0
    if config == LITE:
        title = '001.png: weights of the attention-pooling head'
        panels = 2  # the input and the pooling weights
    else:
        title = '001.png: class-token attention'
        panels = 1 + 3  # the input, blocks 0, 2 and 3 of the demo's 4
    width = max(panels * panel + (panels + 1) * 4, text_width(title) + 8)
    for path in paths:
        assert _png(path) == (width, 22 + 16 + panel + 2 * 4)


def test_vis_attention_refuses_what_it_cannot_draw_before_loading(
    tmp_path, capsys
):
    """Read from the config: the checkpoint (an empty file) is never
    read."""
    image = write_image(tmp_path / 'a.png')
    empty = tmp_path / 'empty.pth'
    empty.touch()
    assert (
        vis_attention.main(
            [str(image), str(LITE), str(empty), '--blocks', '0']
        )
        == 1
    )
    assert capsys.readouterr().err.strip().splitlines() == [
        f'error: {LITE}: --blocks and --per-head draw the class token, '
        'which this backbone does not have; leave them out to draw the '
        "weights of the head's attention pooling."
    ]
    pooled_by_mean = tmp_path / 'mean.py'
    pooled_by_mean.write_text(
        f"_base_ = ['{LITE}']\n"
        "model = dict(backbone=dict(out_type='avg_featmap'), "
        "head=dict(pool='token'))\n"
    )
    assert (
        vis_attention.main([str(image), str(pooled_by_mean), str(empty)]) == 1
    )
    assert capsys.readouterr().err.strip().splitlines() == [
        f'error: {pooled_by_mean}: the backbone has no class token '
        '(with_cls_token=False) and the head does not pool with attention '
        "(pool='attention'): there is no attention to draw."
    ]


@pytest.mark.parametrize('tool', [vis_attention, vis_features])
def test_tools_keep_to_the_token_budget_and_name_other_files(
    tmp_path, capsys, tool
):
    """The demo's pipeline keeps the image size: a 9000x9000 image is
    refused from its header; a .gif is named, not silently skipped."""
    checkpoint = random_checkpoint(DEMO, tmp_path)
    images = tmp_path / 'images'
    images.mkdir()
    write_image(images / 'a.png', size=(8, 8))
    huge = write_image(images / 'huge.png', (9000, 9000), content='header')
    (images / 'anim.gif').write_bytes(b'GIF89a')
    out_dir = tmp_path / 'out'
    code = tool.main(
        [str(images), str(DEMO), str(checkpoint), '--out-dir', str(out_dir)]
    )
    captured = capsys.readouterr()
    assert code == 1
    # 9000 / 2 = 4500 tokens a side at the demo's stride 2
    assert captured.err.strip().splitlines() == [
        f'warning: 1 file(s) of {images} left out, not of an image kind '
        'read here (.jpg, .jpeg, .png, .bmp, .webp, .tif, .tiff): anim.gif',
        f'error: {huge}: the test pipeline gives a 9000x9000 input, '
        '20250000 tokens, above the budget of 4096; resize the image, add '
        'a Resize to the test pipeline, or raise --max-tokens.',
        'error: 1 of 2 images failed: huge.png',
    ]
    drawn = [line for line in captured.out.splitlines() if '.png' in line]
    assert drawn and all(Path(p).name.startswith('a_') for p in drawn)


def test_figures_are_as_wide_as_their_title_and_labels(tmp_path):
    from t2t_plugin.analysis.figures import save_panel_grid, upscale

    panel = np.zeros((8, 8, 3), np.uint8)
    assert upscale(panel).shape == (224, 224, 3)  # 28 times, pixels kept
    assert upscale(panel[:, :4]).shape == (448, 224, 3)  # the short side
    assert upscale(np.zeros((300, 500, 3), np.uint8)).shape == (300, 500, 3)
    title = 'a title far wider than the one small panel below it'
    label = 'a long label'
    path = save_panel_grid([[(label, panel)]], tmp_path / 'f.png', title)
    assert Image.open(path).size == (text_width(title) + 8, 22 + 16 + 8 + 8)
    path = save_panel_grid([[(label, panel), ('b', panel)]], path)
    # each column as wide as the widest label, 4 px gaps
    assert Image.open(path).size == (3 * 4 + 2 * text_width(label), 16 + 8 + 8)
