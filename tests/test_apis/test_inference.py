"""Inference with mmpretrain's Inferencer on this plugin's models, and
tools/infer.py."""

from pathlib import Path

import numpy as np
import pytest
import torch
from mmengine.logging import HistoryBuffer
from mmpretrain.apis import ImageClassificationInferencer
from mmpretrain.datasets.categories import IMAGENET_CATEGORIES
from PIL import Image

import t2t_plugin  # noqa: F401
import t2t_plugin.runtime.checkpoint as checkpoint_module
from t2t_plugin import compat
from t2t_plugin.apis import load_model
from t2t_plugin.datasets import ConvertImage
from t2t_plugin.runtime import (
    CheckpointError,
    read_checkpoint,
)

from ..helpers import (
    MEAN,
    ROOT,
    STD,
    load_tool,
    write_image,
    write_tiny_model,
)


def scores(model, image):
    """Softmax scores of mmpretrain's Inferencer, as a tensor."""
    inferencer = ImageClassificationInferencer(model)
    return torch.as_tensor(inferencer(image)[0]['pred_scores'])


def test_scores_equal_a_forward_pass_on_the_normalised_image(tmp_path):
    config, checkpoint, reference = write_tiny_model(
        tmp_path, pipeline=[dict(type='PackInputs')]
    )
    image = write_image(tmp_path / 'cat.png', size=(32, 32))
    model = load_model(config, str(checkpoint))
    result = ImageClassificationInferencer(model)(str(image))[0]

    rgb = torch.from_numpy(np.asarray(Image.open(image))).float()
    normalised = ((rgb - torch.tensor(MEAN)) / torch.tensor(STD)).permute(
        2, 0, 1
    )[None]
    with torch.no_grad():
        expected = reference.eval()(normalised).softmax(-1)[0]
    torch.testing.assert_close(
        torch.as_tensor(result['pred_scores']), expected, atol=1e-5, rtol=1e-5
    )
    best = int(expected.argmax())
    assert result['pred_label'] == best
    # the test dataset of the config names the classes
    assert (
        result['pred_class']
        == (
            'airplane',
            'automobile',
            'bird',
            'cat',
            'deer',
            'dog',
            'frog',
            'horse',
            'ship',
            'truck',
        )[best]
    )


@pytest.mark.parametrize('token_layer', ['performer', 'transformer'])
def test_files_and_arrays_of_all_kinds_give_the_same_scores(
    tmp_path, token_layer
):
    config, checkpoint, _ = write_tiny_model(tmp_path, token_layer=token_layer)
    image = write_image(tmp_path / 'photo.png')
    model = load_model(config, str(checkpoint))
    from_file = scores(model, str(image))
    bgr = np.asarray(Image.open(image).convert('RGB'))[..., ::-1].copy()
    torch.testing.assert_close(scores(model, bgr), from_file)
    # alpha is dropped, 16 bits are scaled to 8
    alpha = np.full(bgr.shape[:2] + (1,), 7, np.uint8)
    torch.testing.assert_close(
        scores(model, np.concatenate([bgr, alpha], -1)), from_file
    )
    deep = bgr.astype(np.uint16) * 257
    torch.testing.assert_close(scores(model, deep), from_file)
    assert from_file.shape == (10,)
    assert from_file.sum().item() == pytest.approx(1.0, abs=1e-5)


def test_16_bit_files_and_arrays_are_scaled_alike(tmp_path):
    config, checkpoint, _ = write_tiny_model(
        tmp_path, pipeline=[dict(type='ConvertImage'), dict(type='PackInputs')]
    )
    model = load_model(config, str(checkpoint))
    ramp = np.linspace(0, 65535, 32 * 32).reshape(32, 32).astype(np.uint16)
    deep = tmp_path / 'deep.png'
    Image.fromarray(ramp).save(deep)  # a 16-bit grey PNG
    assert Image.open(deep).mode.startswith('I')
    # as a PIL image handed over with np.asarray, and as a file
    from_pil = scores(model, np.asarray(Image.open(deep)))
    torch.testing.assert_close(
        scores(model, str(deep)), from_pil, atol=2e-3, rtol=0
    )
    grey = ConvertImage(channels=1).convert(ramp)
    assert grey.dtype == np.uint8
    assert np.abs(grey - ramp / 257).max() <= 0.5


def test_colour_images_reach_a_one_channel_model_as_grey(tmp_path):
    from mmcv import bgr2gray

    model = load_model(ROOT / 'configs/t2t-vit-mini_1xb64_digits.py')
    colour = write_image(tmp_path / 'digit.png', size=(8, 8))
    bgr = np.asarray(Image.open(colour))[..., ::-1].copy()
    grey = bgr2gray(bgr)
    torch.testing.assert_close(scores(model, str(colour)), scores(model, grey))
    torch.testing.assert_close(scores(model, bgr), scores(model, grey))


@pytest.mark.parametrize(
    'array,message',
    [
        (np.zeros((0, 5, 3), np.uint8), 'The image is empty'),
        (np.zeros((8, 8, 3), np.float32), 'must be uint8'),
        (np.zeros((8, 8, 2), np.uint8), r'got shape \(8, 8, 2\)'),
    ],
)
def test_bad_arrays_are_one_clear_error(tmp_path, array, message):
    config, checkpoint, _ = write_tiny_model(tmp_path)
    model = load_model(config, str(checkpoint))
    with pytest.raises(ValueError, match=message):
        scores(model, array)


def test_1000_classes_are_named_after_imagenet(tmp_path):
    config, checkpoint, _ = write_tiny_model(tmp_path, num_classes=1000)
    # a 1000-class model on a 10-class dataset config: ImageNet names win
    model = load_model(config, str(checkpoint))
    result = ImageClassificationInferencer(model)(
        str(write_image(tmp_path / 'x.png'))
    )[0]
    assert result['pred_class'] == IMAGENET_CATEGORIES[result['pred_label']]


def test_checkpoint_meta_names_the_classes(tmp_path):
    names = [f'digit {i}' for i in range(10)]
    config, checkpoint, _ = write_tiny_model(
        tmp_path, extra=dict(dataset_meta=dict(classes=names))
    )
    model = load_model(config, str(checkpoint))
    assert model._dataset_meta['classes'] == names


@pytest.mark.parametrize('torch_allow_list', [True, False])
def test_mmengine_training_checkpoints_load(
    tmp_path, monkeypatch, torch_allow_list
):
    # False: the reader's own restricted unpickler, as on torch < 2.4
    if torch_allow_list and not compat.HAS_ADD_SAFE_GLOBALS:
        pytest.skip('torch < 2.4 has no add_safe_globals')
    monkeypatch.setattr(
        checkpoint_module, 'HAS_ADD_SAFE_GLOBALS', torch_allow_list
    )
    config, slim, reference = write_tiny_model(tmp_path)
    # what mmengine's CheckpointHook writes beside the weights
    full = tmp_path / 'epoch_1.pth'
    torch.save(
        dict(
            meta=dict(epoch=1, seed=np.int64(0)),
            state_dict=reference.state_dict(),
            message_hub=dict(log_scalars=dict(loss=HistoryBuffer([1.0], [1]))),
        ),
        full,
    )
    model = load_model(config, str(full))
    weight = 'backbone.encoder.0.attn.qkv.weight'
    torch.testing.assert_close(
        model.state_dict()[weight], reference.state_dict()[weight]
    )


class Foreign:
    pass


def test_checkpoints_with_other_objects_are_refused(tmp_path):
    config, _, reference = write_tiny_model(tmp_path)
    bad = tmp_path / 'bad.pth'
    torch.save(dict(state_dict=reference.state_dict(), extra=Foreign()), bad)
    with pytest.raises(CheckpointError) as error:
        read_checkpoint(bad)
    message = str(error.value)
    assert 'Foreign' in message and 'safe loader refuses' in message
    assert 'not a complete PyTorch checkpoint' not in message
    assert '\n' not in message


def test_a_checkpoint_of_another_model_is_refused(tmp_path):
    config, _, _ = write_tiny_model(tmp_path)
    _, other, _ = write_tiny_model(tmp_path, token_layer='transformer')
    with pytest.raises(CheckpointError) as error:
        load_model(config, str(other))
    # the backbone's load hook, naming the file
    assert str(error.value) == (
        f'The checkpoint {other} has transformer T2T layers, this T2T-ViT '
        'has performer ones. Pick the matching arch: performer archs are '
        "'7'...'24', transformer ones 't-14', 't-19', 't-24'."
    )


@pytest.mark.parametrize(
    'content,message',
    [
        (torch.zeros(3), 'holds a Tensor, not a checkpoint dict'),
        ({'state_dict': [torch.zeros(3)]}, "'state_dict' of .* is a list"),
    ],
)
def test_checkpoints_that_are_not_dicts_are_refused(
    tmp_path, content, message
):
    config, _, _ = write_tiny_model(tmp_path)
    bad = tmp_path / 'bad.pth'
    torch.save(content, bad)
    with pytest.raises(CheckpointError, match=message):
        load_model(config, str(bad))


def test_infer_tool_prints_ranked_classes(tmp_path, capsys):
    infer = load_tool('tools/infer.py')
    config, checkpoint, _ = write_tiny_model(tmp_path)
    image = write_image(tmp_path / 'photo.png')
    assert (
        infer.main([str(image), str(config), str(checkpoint), '--topk', '2'])
        == 0
    )
    # mmengine's log of the weights loaded comes first, as in a terminal
    log, *lines = capsys.readouterr().out.strip().splitlines()
    assert ' - mmengine - INFO - T2TViT: ' in log
    assert lines[0] == f'{image}:'
    assert len(lines) == 3
    assert lines[1].lstrip().startswith('1.') and '(class ' in lines[1]
    # a folder: every image in it
    write_image(tmp_path / 'other.jpg', seed=1)
    assert (
        infer.main(
            [str(tmp_path), str(config), str(checkpoint), '--topk', '1']
        )
        == 0
    )
    _, *lines = capsys.readouterr().out.strip().splitlines()
    assert lines == [
        f'{tmp_path / "other.jpg"}:',
        lines[1],
        f'{image}:',
        lines[3],
    ]


def one_error_line(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith('error: '), err
    return err[0]


def test_infer_tool_mistakes_are_one_line(tmp_path, capsys):
    infer = load_tool('tools/infer.py')
    config, checkpoint, reference = write_tiny_model(tmp_path)
    image = write_image(tmp_path / 'photo.png')

    assert infer.main([str(config), str(config), str(checkpoint)]) == 1
    assert 'not an image' in one_error_line(capsys)

    empty = tmp_path / 'empty'
    empty.mkdir()
    assert infer.main([str(empty), str(config), str(checkpoint)]) == 1
    assert 'folder without image files' in one_error_line(capsys)

    broken = tmp_path / 'broken.py'
    broken.write_text('model = dict(\n')
    assert infer.main([str(image), str(broken), str(checkpoint)]) == 1
    assert 'SyntaxError' in one_error_line(capsys)

    state = reference.state_dict()
    state['head.layers.head.weight'][0, 0] = float('nan')
    diverged = tmp_path / 'diverged.pth'
    torch.save(dict(state_dict=state), diverged)
    assert infer.main([str(image), str(config), str(diverged)]) == 1
    assert 'holds NaN or infinite values' in one_error_line(capsys)


def test_infer_tool_refuses_inputs_above_the_token_budget(tmp_path, capsys):
    infer = load_tool('tools/infer.py')
    # no resize in the pipeline: a 256x128 image is 16x8 tokens
    config, checkpoint, _ = write_tiny_model(
        tmp_path, pipeline=[dict(type='PackInputs')]
    )
    image = write_image(tmp_path / 'wide.png', size=(256, 128))
    assert (
        infer.main(
            [str(image), str(config), str(checkpoint), '--max-tokens', '100']
        )
        == 1
    )
    assert '128 tokens, above the budget of 100' in one_error_line(capsys)
    assert (
        infer.main(
            [str(image), str(config), str(checkpoint), '--max-tokens', '128']
        )
        == 0
    )


def test_infer_tool_flags_non_finite_scores(tmp_path, capsys):
    infer = load_tool('tools/infer.py')
    config, checkpoint, reference = write_tiny_model(tmp_path)
    image = write_image(tmp_path / 'photo.png')
    state = reference.state_dict()
    # finite weights whose features overflow: logits inf - inf = NaN
    state['backbone.norm.weight'].fill_(3e38)
    huge = tmp_path / 'huge.pth'
    torch.save(dict(state_dict=state), huge)
    assert infer.main([str(image), str(config), str(huge)]) == 1
    assert 'NaN or infinite scores' in one_error_line(capsys)


class _WritesAFile:
    """A pickled object that would create a file when unpickled."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (Path.touch, (Path(self.path),))


@pytest.mark.parametrize('torch_allow_list', [True, False])
def test_checkpoint_with_code_is_refused(
    tmp_path, monkeypatch, torch_allow_list
):
    # False: the reader's own restricted unpickler, as on torch < 2.4
    if torch_allow_list and not compat.HAS_ADD_SAFE_GLOBALS:
        pytest.skip('torch < 2.4 has no add_safe_globals')
    monkeypatch.setattr(
        checkpoint_module, 'HAS_ADD_SAFE_GLOBALS', torch_allow_list
    )
    marker = tmp_path / 'ran'
    path = tmp_path / 'evil.pth'
    torch.save({'state_dict': {}, 'payload': _WritesAFile(marker)}, path)
    with pytest.raises(CheckpointError, match='GLOBAL pathlib'):
        read_checkpoint(str(path))
    assert not marker.exists()


def test_infer_tool_carries_on_past_bad_files_and_names_them(tmp_path, capsys):
    infer = load_tool('tools/infer.py')
    config, checkpoint, _ = write_tiny_model(tmp_path)
    folder = tmp_path / 'images'
    folder.mkdir()
    for index in range(12):
        write_image(folder / f'{index:02d}.png', seed=index)
    empty = folder / '01b.png'
    empty.write_bytes(b'')
    huge = write_image(folder / '99.png', (20000, 20000), content='header')

    code = infer.main(
        [str(folder), str(config), str(checkpoint), '--topk', '1']
    )

    captured = capsys.readouterr()
    assert code == 1
    printed = captured.out.strip().splitlines()
    assert [line for line in printed if line.endswith(':')] == [
        f'{folder / f"{index:02d}.png"}:' for index in range(12)
    ]
    assert captured.err.strip().splitlines() == [
        f'error: {empty} is empty (0 bytes); replace or remove it.',
        f'error: {huge}: more pixels than the {Image.MAX_IMAGE_PIXELS} that '
        'are decoded at most (PIL.Image.MAX_IMAGE_PIXELS); resize the image '
        'first.',
        'error: 2 of 14 images failed: 01b.png, 99.png',
    ]


def test_token_budget_is_read_from_the_file_header(tmp_path, capsys):
    """Without a resize in the pipeline, a 4000x2000 image is refused from
    its header (a PNG of 67 bytes that could not even be decoded)."""
    infer = load_tool('tools/infer.py')
    config, checkpoint, _ = write_tiny_model(
        tmp_path, pipeline=[dict(type='PackInputs')]
    )
    image = write_image(tmp_path / 'wide.png', (4000, 2000), content='header')
    # the tiny model's stride is 16: 250 x 125 tokens
    assert infer.main([str(image), str(config), str(checkpoint)]) == 1
    assert one_error_line(capsys) == (
        f'error: {image}: the test pipeline gives a 4000x2000 input, 31250 '
        'tokens, above the budget of 4096; resize the image, add a Resize '
        'to the test pipeline, or raise --max-tokens.'
    )


@pytest.mark.parametrize(
    'option, message',
    [
        (
            ['--max-tokens', '-5'],
            'argument --max-tokens: must be at least 1, got -5',
        ),
        (['--topk', '0'], 'argument --topk: must be at least 1, got 0'),
    ],
)
def test_infer_tool_option_values_are_checked(
    tmp_path, capsys, option, message
):
    infer = load_tool('tools/infer.py')
    image = write_image(tmp_path / 'photo.png')
    assert infer.main([str(image), 'any.py', *option]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f'infer.py: error: {message}'
    )


def error_lines(capsys) -> list[str]:
    """The tool's own lines on stderr (mmengine's logger may write there
    too)."""
    return [
        line
        for line in capsys.readouterr().err.splitlines()
        if line.startswith('error: ')
    ]


def test_offline_and_damaged_downloads_are_one_line(
    tmp_path, capsys, monkeypatch
):
    """A model name with its weights neither reachable nor cached says where
    to put the file; a damaged cached file is named."""
    import urllib.error

    from mmpretrain.apis import ModelHub

    infer = load_tool('tools/infer.py')
    image = write_image(tmp_path / 'photo.png')
    monkeypatch.setenv('TORCH_HOME', str(tmp_path / 'torch'))

    def offline(url, *args, **kwargs):
        raise urllib.error.URLError('Name or service not known')

    monkeypatch.setattr(torch.hub, 'download_url_to_file', offline)
    name = 't2t-vit-7_8xb64_in1k_t2tp'
    url = ModelHub.get(name).weights
    cached = tmp_path / 'torch' / 'hub' / 'checkpoints' / url.rsplit('/')[-1]
    assert infer.main([str(image), name]) == 1
    assert error_lines(capsys) == [
        f'error: Cannot download {url} (Name or service not known); '
        'download it where there is a network and place it at '
        f'{cached}.'
    ]
    cached.parent.mkdir(parents=True, exist_ok=True)
    cached.write_bytes(b'PK\x03\x04 cut short')
    assert infer.main([str(image), name]) == 1
    [line] = error_lines(capsys)
    assert line.startswith(f'error: Cannot read checkpoint {cached}: '), line
    assert line.endswith(
        f'a damaged download of {url}: delete {cached} to download it again.'
    ), line


def test_infer_tool_walks_class_folders_and_scores_each_class(
    tmp_path, capsys
):
    infer = load_tool('tools/infer.py')
    names = [f'c{index}' for index in range(10)]
    config, checkpoint, _ = write_tiny_model(
        tmp_path, extra=dict(dataset_meta=dict(classes=names))
    )
    val = tmp_path / 'val'
    images = {}
    for folder, seeds in (('c3', (0, 1, 2)), ('c7', (3, 4))):
        (val / folder).mkdir(parents=True)
        for seed in seeds:
            images[write_image(val / folder / f'{seed}.png', seed=seed)] = (
                folder
            )
    (val / 'c3' / 'anim.gif').write_bytes(b'GIF89a')
    # the reference: mmpretrain's inferencer on each image
    model = load_model(config, str(checkpoint))
    top1 = {
        image: names[int(scores(model, str(image)).argmax())]
        for image in images
    }
    capsys.readouterr()

    assert infer.main([str(val), str(config), str(checkpoint)]) == 0
    # the table and the images it got wrong, no line per image
    default = [
        line
        for line in capsys.readouterr().out.splitlines()
        if ' - mmengine - ' not in line  # the loader's count of weights
    ]
    assert (
        infer.main([str(val), str(config), str(checkpoint), '--per-image'])
        == 0
    )
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [
        f'warning: 1 file(s) of {val} left out, not of an image kind read '
        'here (.jpg, .jpeg, .png, .bmp, .webp, .tif, .tiff): c3/anim.gif'
    ]
    out = captured.out.splitlines()
    assert [line for line in out if line.endswith('.png:')] == [
        f'{image}:' for image in sorted(images)
    ]
    hits = {
        folder: sum(top1[i] == folder for i in images if images[i] == folder)
        for folder in ('c3', 'c7')
    }
    total = sum(hits.values())
    table = [
        f'Top-1 accuracy by class folder of {val}:',
        f'  c3: {hits["c3"]} of 3 ({hits["c3"] / 3:.2%})',
        f'  c7: {hits["c7"]} of 2 ({hits["c7"] / 2:.2%})',
        f'  all: {total} of 5 ({total / 5:.2%})',
    ]
    in_order = [i for i in sorted(images) if top1[i] != images[i]]
    # in turn from each class folder: c3's first, c7's first, c3's second...
    wrong = sorted(
        in_order,
        key=lambda image: (
            [i for i in in_order if images[i] == images[image]].index(image),
            images[image],
        ),
    )
    misclassified = [
        f'Misclassified: {len(wrong)} image(s), {len(wrong)} shown '
        '(--per-image lists every prediction):',
        *(
            f'  {image}: {top1[image]} (class {names.index(top1[image])})'
            for image in wrong
        ),
    ]
    assert default == table + (misclassified if wrong else [])
    assert out[-len(default) :] == default

    (val / 'cat').mkdir()
    write_image(val / 'cat' / 'x.png')
    assert infer.main([str(val), str(config), str(checkpoint)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        f'No accuracy: {val} has class folders, but the model does not '
        'know them: cat are not among its 10 class names.'
    )
