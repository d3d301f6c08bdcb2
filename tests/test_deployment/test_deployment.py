"""ONNX export, and the exported files in onnxruntime and OpenVINO.

Every check compares a runtime with the PyTorch model it was exported from,
in float32, to 1e-4, at the size of the capture and at another batch and
(non-square) size. No timing is asserted.
"""

import json

import numpy as np
import pytest
import torch
from mmengine.config import Config

from t2t_plugin.deployment import (
    RuntimeSession,
    build_exportable,
    compare,
    export_onnx,
    quantize_int8,
    sample_images,
)

from ..helpers import ROOT, load_tool
from ..reference import randomise_norms_and_biases

ort = pytest.importorskip('onnxruntime')
pytest.importorskip('onnxscript')

ATOL = 1e-4
TINY = dict(embed_dims=32, num_layers=2, num_heads=2, feedforward_channels=64)


def _classifier_cfg(token_layer, img_size=32):
    return Config(
        dict(
            model=dict(
                type='ImageClassifier',
                backbone=dict(
                    type='T2TViT',
                    arch=dict(TINY, token_layer=token_layer),
                    img_size=img_size,
                ),
                head=dict(type='T2TClsHead', num_classes=5, in_channels=32),
            ),
            data_preprocessor=dict(
                mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375]
            ),
        )
    )


def _pyramid_cfg():
    # the neck list of configs/det/*: the pyramid, then mmdet's FPN
    return Config(
        dict(
            model=dict(
                type='RetinaNet',
                backbone=dict(
                    type='mmpretrain.T2TViT',
                    arch=dict(TINY, token_layer='transformer'),
                    img_size=64,
                    out_type='featmap',
                    out_t2t_maps=True,
                    out_indices=(-1,),
                ),
                neck=[
                    dict(
                        type='mmpretrain.T2TFeaturePyramid',
                        in_channels=(64, 64, 32),
                        out_channels=(8, 16, 24, 32),
                    ),
                    dict(type='FPN', in_channels=[8, 16, 24, 32]),
                ],
            )
        )
    )


def _default_torch_init(module):
    """PyTorch's own initialisation of the linear layers: larger weights
    than ``init_weights`` gives, so that the performer's exponentials span
    many orders of magnitude and its ``+ 1e-8`` matters."""
    for layer in module.modules():
        if isinstance(layer, torch.nn.Linear):
            layer.reset_parameters()
    return randomise_norms_and_biases(module)


def _inputs(model, batch, size):
    return {
        'random': torch.randn(batch, model.in_channels, *size),
        'real': sample_images(
            batch, size, model.in_channels, model.mean, model.std
        ),
    }


@pytest.fixture(scope='module')
def exported(tmp_path_factory):
    """One exported tiny classifier per T2T family, made on first use."""
    files = {}

    def get(token_layer):
        if token_layer not in files:
            model = build_exportable(_classifier_cfg(token_layer), None)
            _default_torch_init(model.module)
            folder = tmp_path_factory.mktemp(token_layer)
            files[token_layer] = (
                model,
                export_onnx(model, folder / 'model.onnx'),
            )
        return files[token_layer]

    return get


@pytest.mark.parametrize(
    'token_layer', ['performer', 'transformer', 'convolution']
)
def test_classifier_matches_pytorch_in_onnxruntime(token_layer, exported):
    model, path = exported(token_layer)
    session = RuntimeSession(path, 'onnxruntime')
    for batch, size in ((2, (32, 32)), (1, (48, 32)), (3, (16, 64))):
        diffs = compare(model.module, session, _inputs(model, batch, size))
        assert max(diffs.values()) < ATOL, (batch, size, diffs)
    # the exported module is the classifier's own tensor path
    images = torch.randn(2, 3, 32, 32)
    logits = session(images)[0]
    assert logits.shape == (2, 5)
    with torch.no_grad():
        classifier_logits = model.module.head(model.module.backbone(images))
    np.testing.assert_allclose(logits, classifier_logits.numpy(), atol=ATOL)


def test_scores_output_is_softmax(tmp_path):
    model = build_exportable(_classifier_cfg('transformer'), None, 'scores')
    path = export_onnx(model, tmp_path / 'scores.onnx', dynamic_size=False)
    scores = RuntimeSession(path)(torch.randn(3, 3, 32, 32))[0]
    np.testing.assert_allclose(scores.sum(1), np.ones(3), atol=1e-6)
    assert (scores > 0).all()


def test_pyramid_backbone_levels_match_pytorch(tmp_path):
    cfg = _pyramid_cfg()
    reference = build_exportable(cfg, None)
    randomise_norms_and_biases(reference.module)
    # a detector checkpoint: backbone.* and neck.0.* (FPN keys ignored)
    state = {
        **{
            f'backbone.{k}': v
            for k, v in reference.module.backbone.state_dict().items()
        },
        **{
            f'neck.0.{k}': v
            for k, v in reference.module.pyramid.state_dict().items()
        },
        'neck.1.lateral_convs.0.conv.weight': torch.zeros(1),
    }
    torch.save({'state_dict': state}, tmp_path / 'det.pth')
    model = build_exportable(cfg, tmp_path / 'det.pth')
    assert model.output_names == ['level0', 'level1', 'level2', 'level3']
    path = export_onnx(model, tmp_path / 'pyramid.onnx')
    session = RuntimeSession(path)
    for batch, size in ((2, (64, 64)), (1, (64, 96))):
        images = _inputs(model, batch, size)
        outputs = session(images['real'])
        expected = [
            (batch, c, size[0] // s, size[1] // s)
            for c, s in zip((8, 16, 24, 32), (4, 8, 16, 32))
        ]
        assert [o.shape for o in outputs] == expected
        with torch.no_grad():
            reference_levels = reference.module(images['real'])
        for got, want in zip(outputs, reference_levels):
            np.testing.assert_allclose(got, want.numpy(), atol=ATOL)
        assert max(compare(model.module, session, images).values()) < ATOL


def test_openvino_matches_pytorch(exported):
    pytest.importorskip('openvino')
    model, path = exported('performer')
    session = RuntimeSession(path, 'openvino')
    for batch, size in ((2, (32, 32)), (3, (48, 16))):
        diffs = compare(model.module, session, _inputs(model, batch, size))
        assert max(diffs.values()) < ATOL, (batch, size, diffs)


def test_int8_quantisation_writes_a_runnable_file(exported, tmp_path):
    model, path = exported('transformer')
    int8 = quantize_int8(path, tmp_path / 'model.int8.onnx')
    import onnx

    ops = {node.op_type for node in onnx.load(str(int8)).graph.node}
    assert {'DynamicQuantizeLinear', 'MatMulInteger'} <= ops
    session = RuntimeSession(int8, 'onnxruntime', 'int8')
    images = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        logits = model.module(images).numpy()
    quantised = session(images)[0]
    assert quantised.shape == logits.shape
    # int8 weights: close to, but not equal to, fp32
    assert 0 < np.abs(quantised - logits).max() < 0.1 * np.abs(logits).max()


@pytest.fixture(scope='module')
def tool():
    return load_tool('tools/deployment/pytorch2onnx.py')


@pytest.fixture(scope='module')
def digits_checkpoint(tmp_path_factory):
    from mmpretrain.apis import get_model

    model = get_model(str(ROOT / 'configs' / 't2t-vit-mini_1xb64_digits.py'))
    path = tmp_path_factory.mktemp('ckpt') / 'digits.pth'
    torch.save({'state_dict': model.state_dict()}, path)
    return path


def test_tool_exports_and_verifies(tool, digits_checkpoint, tmp_path, capsys):
    out = tmp_path / 'digits.onnx'
    code = tool.main(
        [
            str(ROOT / 'configs' / 't2t-vit-mini_1xb64_digits.py'),
            str(digits_checkpoint),
            str(out),
            '--verify',
            '--openvino',
        ]
        if _has('openvino')
        else [
            str(ROOT / 'configs' / 't2t-vit-mini_1xb64_digits.py'),
            str(digits_checkpoint),
            str(out),
            '--verify',
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert 'dynamic axes: batch, height, width (H, W multiples of 2)' in (
        printed
    )
    diffs = [
        float(line.rsplit(' ', 1)[1])
        for line in printed.splitlines()
        if 'max abs diff' in line
    ]
    assert len(diffs) == (6 if _has('openvino') else 3)
    assert max(diffs) < ATOL
    assert out.stat().st_size > 0


def _has(module):
    try:
        __import__(module)
    except ImportError:
        return False
    return True


@pytest.mark.parametrize(
    'case,message',
    [
        ('missing_checkpoint', 'Checkpoint /nonexistent.pth does not exist.'),
        ('bad_size', 'must be multiples of 2'),
        (
            'not_t2t',
            'Only T2T-ViT models export here; the config builds a '
            "'ResNet' backbone.",
        ),
    ],
)
def test_tool_errors_are_one_line(
    tool, digits_checkpoint, tmp_path, capsys, case, message
):
    config = str(ROOT / 'configs' / 't2t-vit-mini_1xb64_digits.py')
    checkpoint = str(digits_checkpoint)
    extra = []
    if case == 'missing_checkpoint':
        checkpoint = '/nonexistent.pth'
    elif case == 'bad_size':
        extra = ['--shape', '9', '8']
    else:
        config = tmp_path / 'resnet.py'
        config.write_text(
            'model = '
            + json.dumps(
                dict(
                    type='ImageClassifier',
                    backbone=dict(type='ResNet', depth=18),
                    head=dict(
                        type='LinearClsHead', num_classes=2, in_channels=512
                    ),
                )
            )
        )
        config = str(config)
    code = tool.main([config, checkpoint, str(tmp_path / 'x.onnx'), *extra])
    captured = capsys.readouterr()
    assert code == 2
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith('pytorch2onnx.py: error: ')
    assert message in lines[0]
    assert not (tmp_path / 'x.onnx').exists()
