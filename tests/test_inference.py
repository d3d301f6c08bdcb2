"""Single-image inference: the Python API and tools/infer.py."""
from pathlib import Path

import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.logging import HistoryBuffer
from mmpretrain.datasets.categories import IMAGENET_CATEGORIES
from mmpretrain.registry import MODELS
from PIL import Image

import t2t_plugin  # noqa: F401
from t2t_plugin import compat
from t2t_plugin.apis import inference_model, init_model

from .tool_loading import load_tool

MEAN = (123.675, 116.28, 103.53)
STD = (58.395, 57.12, 57.375)

TINY_CONFIG = """
model = dict(
    type='ImageClassifier',
    backbone=dict(
        type='T2TViT',
        arch=dict(token_layer='{token_layer}', embed_dims=32, num_layers=2,
                  num_heads=2, feedforward_channels=64),
        img_size=32,
        t2t_cfg=dict(token_dims=16)),
    head=dict(type='T2TClsHead', num_classes={num_classes}, in_channels=32))
data_preprocessor = dict(
    num_classes={num_classes}, mean={mean}, std={std}, to_rgb=True)
test_pipeline = {pipeline}
test_dataloader = dict(
    batch_size=1,
    dataset=dict(type='CIFAR10', data_root='data/cifar10',
                 pipeline=test_pipeline))
"""
RESIZE_PIPELINE = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=36, edge='short'),
    dict(type='CenterCrop', crop_size=32),
    dict(type='PackInputs'),
]


def write_tiny_model(folder, num_classes=10, token_layer='performer',
                     pipeline=None, extra=None):
    """A tiny config and a randomly initialised checkpoint of it."""
    config = Path(folder) / f'tiny_{token_layer}_{num_classes}.py'
    config.write_text(
        TINY_CONFIG.format(
            token_layer=token_layer,
            num_classes=num_classes,
            mean=list(MEAN),
            std=list(STD),
            pipeline=pipeline or RESIZE_PIPELINE))
    model = MODELS.build(Config.fromfile(str(config)).model)
    with torch.no_grad():
        for name, param in model.named_parameters():
            # weights large enough that the classes are told apart
            param.normal_(0, 0.3 if 'head' in name else 0.1)
    checkpoint = config.with_suffix('.pth')
    torch.save(dict(state_dict=model.state_dict(), meta=extra or {}),
               checkpoint)
    return config, checkpoint, model


def write_image(path, size=(50, 40), seed=0):
    """A smooth colour picture (width, height) with some structure."""
    rng = np.random.default_rng(seed)
    width, height = size
    ys, xs = np.mgrid[0:height, 0:width]
    channels = [
        127 + 120 * np.sin(xs / rng.uniform(3, 9) + ys / rng.uniform(3, 9))
        for _ in range(3)
    ]
    Image.fromarray(np.stack(channels, -1).astype(np.uint8)).save(path)
    return Path(path)


def test_scores_equal_a_forward_pass_on_the_normalised_image(tmp_path):
    config, checkpoint, reference = write_tiny_model(
        tmp_path, pipeline=[dict(type='PackInputs')])
    image = write_image(tmp_path / 'cat.png', size=(32, 32))
    model = init_model(config, checkpoint)
    result = inference_model(model, image, topk=3)

    rgb = torch.from_numpy(np.asarray(Image.open(image))).float()
    normalised = ((rgb - torch.tensor(MEAN)) / torch.tensor(STD)).permute(
        2, 0, 1)[None]
    with torch.no_grad():
        expected = reference.eval()(normalised).softmax(-1)[0]
    torch.testing.assert_close(result['pred_scores'], expected, atol=1e-5,
                               rtol=1e-5)
    ranked = expected.argsort(descending=True)[:3].tolist()
    assert [entry['label'] for entry in result['topk']] == ranked
    assert result['pred_label'] == ranked[0]
    # the test dataset of the config names the classes
    assert result['pred_class'] == ('airplane', 'automobile', 'bird', 'cat',
                                    'deer', 'dog', 'frog', 'horse', 'ship',
                                    'truck')[ranked[0]]


@pytest.mark.parametrize('token_layer', ['performer', 'transformer'])
def test_inputs_of_all_kinds_give_the_same_scores(tmp_path, token_layer):
    config, checkpoint, _ = write_tiny_model(tmp_path,
                                             token_layer=token_layer)
    image = write_image(tmp_path / 'photo.jpg')
    model = init_model(config, checkpoint)
    from_file = inference_model(model, image)['pred_scores']
    pil = Image.open(image)
    from_pil = inference_model(model, pil)['pred_scores']
    bgr = np.asarray(pil.convert('RGB'))[..., ::-1]
    from_array = inference_model(model, bgr)['pred_scores']
    torch.testing.assert_close(from_pil, from_file)
    torch.testing.assert_close(from_array, from_file)
    assert from_file.shape == (10, )
    assert from_file.sum().item() == pytest.approx(1.0, abs=1e-5)


def test_1000_classes_are_named_after_imagenet(tmp_path):
    config, checkpoint, _ = write_tiny_model(tmp_path, num_classes=1000)
    # a 1000-class model on a 10-class dataset config: ImageNet names win
    model = init_model(config, checkpoint)
    result = inference_model(model, write_image(tmp_path / 'x.png'), topk=5)
    assert len(result['topk']) == 5
    for entry in result['topk']:
        assert entry['class_name'] == IMAGENET_CATEGORIES[entry['label']]
    scores = [entry['score'] for entry in result['topk']]
    assert scores == sorted(scores, reverse=True)


def test_checkpoint_meta_names_the_classes(tmp_path):
    names = [f'digit {i}' for i in range(10)]
    config, checkpoint, _ = write_tiny_model(
        tmp_path, extra=dict(dataset_meta=dict(classes=names)))
    model = init_model(config, checkpoint)
    assert model.dataset_meta['classes'] == names


@pytest.mark.skipif(
    not compat.HAS_ADD_SAFE_GLOBALS,
    reason='torch < 2.4 cannot read training checkpoints safely')
def test_mmengine_training_checkpoints_load(tmp_path):
    config, slim, reference = write_tiny_model(tmp_path)
    # what mmengine's CheckpointHook writes beside the weights
    full = tmp_path / 'epoch_1.pth'
    torch.save(
        dict(
            meta=dict(epoch=1, seed=np.int64(0)),
            state_dict=reference.state_dict(),
            message_hub=dict(
                log_scalars=dict(loss=HistoryBuffer([1.0], [1])))),
        full)
    model = init_model(config, full)
    weight = 'backbone.encoder.0.attn.qkv.weight'
    torch.testing.assert_close(model.state_dict()[weight],
                               reference.state_dict()[weight])


class Foreign:
    pass


def test_checkpoints_with_other_objects_are_refused(tmp_path):
    config, _, reference = write_tiny_model(tmp_path)
    bad = tmp_path / 'bad.pth'
    torch.save(dict(state_dict=reference.state_dict(), extra=Foreign()), bad)
    with pytest.raises(ValueError, match='Foreign'):
        init_model(config, bad)


def test_a_checkpoint_of_another_model_is_refused(tmp_path):
    config, _, _ = write_tiny_model(tmp_path)
    _, other, _ = write_tiny_model(tmp_path, token_layer='transformer')
    with pytest.raises(ValueError, match='does not fit the config'):
        init_model(config, other)


def test_infer_tool_prints_ranked_classes(tmp_path, capsys):
    infer = load_tool('tools/infer.py')
    config, checkpoint, _ = write_tiny_model(tmp_path)
    image = write_image(tmp_path / 'photo.png')
    assert infer.main([str(image), str(config), str(checkpoint), '--topk',
                       '2']) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == f'{image}:'
    assert len(lines) == 3
    assert lines[1].lstrip().startswith('1.') and '(class ' in lines[1]

    assert infer.main([str(config), str(config), str(checkpoint)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith('error: ')


def test_files_decode_as_the_dataset_pipeline_decodes_them(tmp_path):
    """EXIF orientation is applied, 16-bit images are scaled, not clipped."""
    from mmcv.transforms import LoadImageFromFile

    from t2t_plugin.apis.inference import read_image
    upright = write_image(tmp_path / 'upright.png', size=(50, 40))
    pixels = Image.open(upright)
    exif = Image.Exif()
    exif[0x0112] = 6  # Orientation: the camera was turned a quarter right
    rotated = tmp_path / 'rotated.jpg'
    pixels.save(rotated, exif=exif, quality=95, subsampling=0)
    decoded = read_image(rotated)
    assert decoded.shape == (50, 40, 3)
    loaded = LoadImageFromFile()(dict(img_path=str(rotated)))['img']
    np.testing.assert_array_equal(decoded, loaded)
    # the same picture turned by hand, up to JPEG losses
    rgb = decoded[..., ::-1].astype(int)
    turned = np.asarray(pixels.transpose(Image.Transpose.ROTATE_270))
    assert np.abs(rgb - turned).mean() < 3
    wrong_way = np.asarray(pixels.transpose(Image.Transpose.ROTATE_90))
    assert np.abs(rgb - wrong_way).mean() > 30
    # a PIL image of that file is turned upright as well
    assert read_image(Image.open(rotated)).shape == (50, 40, 3)

    ramp = np.linspace(0, 65535, 30 * 20).reshape(30, 20).astype(np.uint16)
    deep = tmp_path / 'deep.png'
    Image.fromarray(ramp).save(deep)  # a 16-bit grey PNG
    assert Image.open(deep).mode.startswith('I')
    expected = ramp / 257
    grey = read_image(deep, in_channels=1)
    assert grey.dtype == np.uint8 and grey.shape == (30, 20)
    assert np.abs(grey - expected).max() <= 1
    colour = read_image(deep)
    assert colour.shape == (30, 20, 3)
    assert np.abs(colour[..., 1] - expected).max() <= 1


def test_arrays_of_other_kinds_are_converted_or_refused(tmp_path):
    from t2t_plugin.apis.inference import read_image
    config, checkpoint, _ = write_tiny_model(tmp_path)
    model = init_model(config, checkpoint)
    bgr = np.asarray(Image.open(write_image(tmp_path / 'x.png')))[..., ::-1]
    alpha = np.full(bgr.shape[:2] + (1, ), 7, np.uint8)
    bgra = np.concatenate([bgr, alpha], axis=-1)
    torch.testing.assert_close(
        inference_model(model, bgra)['pred_scores'],
        inference_model(model, bgr.copy())['pred_scores'])
    grey = bgr[..., 0].copy()
    np.testing.assert_array_equal(read_image(grey), np.dstack([grey] * 3))
    with pytest.raises(ValueError, match='must be uint8'):
        inference_model(model, bgr / 255.)
    with pytest.raises(ValueError, match=r'got shape \(40, 50, 2\)'):
        inference_model(model, bgr[..., :2])
    junk = tmp_path / 'junk.png'
    junk.write_bytes(b'not a picture')
    with pytest.raises(ValueError, match='junk.png is not an image'):
        inference_model(model, junk)


@pytest.mark.parametrize('content,message', [
    (torch.zeros(3), 'holds a Tensor, not a checkpoint dict'),
    ({'state_dict': [torch.zeros(3)]}, "'state_dict' of .* is a list"),
])
def test_checkpoints_that_are_not_dicts_are_refused(tmp_path, content,
                                                    message):
    config, _, _ = write_tiny_model(tmp_path)
    bad = tmp_path / 'bad.pth'
    torch.save(content, bad)
    with pytest.raises(ValueError, match=message):
        init_model(config, bad)
