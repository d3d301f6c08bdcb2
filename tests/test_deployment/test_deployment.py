"""ONNX export, and the exported files in onnxruntime and OpenVINO.

Every check compares a runtime with the PyTorch model it was exported from,
in float32, to 1e-4, at the size of the capture and at another batch and
(non-square) size. No timing is asserted.
"""

import contextlib
import ctypes
import gc
import io
import json
import shutil

import numpy as np
import pytest
import torch
from mmengine.config import Config

from t2t_plugin.deployment import (
    RuntimeSession,
    build_exportable,
    compare,
    export_onnx,
    external_data_file,
    onnx_export,
    quantize_int8,
    sample_images,
)
from t2t_plugin.runtime import CheckpointError, read_checkpoint

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


@pytest.mark.slow
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


def test_checkpoint_is_read_once_by_the_reader(tmp_path, monkeypatch):
    cfg = _classifier_cfg('transformer')
    reference = build_exportable(cfg, None)
    randomise_norms_and_biases(reference.module)
    meta = dict(dataset_meta=dict(classes=list('abcde')))
    checkpoint = tmp_path / 'cls.pth'
    state_dict = reference.module.state_dict()
    torch.save(dict(state_dict=state_dict, meta=meta), checkpoint)
    reads = []

    def counted(path, *args, **kwargs):
        reads.append(str(path))
        return read_checkpoint(path, *args, **kwargs)

    monkeypatch.setattr(onnx_export, 'read_checkpoint', counted)
    model = build_exportable(cfg, checkpoint)
    assert reads == [str(checkpoint)]
    assert model.classes == list('abcde')
    for key, value in model.module.state_dict().items():
        torch.testing.assert_close(value, state_dict[key], rtol=0, atol=0)

    missing = tmp_path / 'missing.pth'
    with pytest.raises(CheckpointError) as raised:
        build_exportable(cfg, missing)
    assert str(raised.value) == (
        f'Checkpoint not found: expected {missing} '
        '(see docs/training.md#training).'
    )
    assert reads == [str(checkpoint), str(missing)]


@pytest.mark.slow
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
            for k, v in reference.module.neck.state_dict().items()
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


def _alternate_signal_stack() -> tuple[int, int]:
    """Address and size of this thread's alternate signal stack."""

    class Stack(ctypes.Structure):
        _fields_ = [
            ('sp', ctypes.c_void_p),
            ('flags', ctypes.c_int),
            ('size', ctypes.c_size_t),
        ]

    stack = Stack()
    assert ctypes.CDLL(None).sigaltstack(None, ctypes.byref(stack)) == 0
    return stack.sp, stack.size


def test_openvino_sessions_keep_the_signal_stack(exported):
    """OpenVINO's CPU plugin points the thread's alternate signal stack at
    a buffer of its own, and an unloading plugin may leave it at a freed
    one: a later signal (a data-loader worker's SIGCHLD) then crashed the
    process. Sessions share one plugin, so the stack stays as the first
    session left it, whichever session is dropped first."""
    pytest.importorskip('openvino')
    _, path = exported('performer')
    first = RuntimeSession(path, 'openvino')
    stack = _alternate_signal_stack()
    second = RuntimeSession(path, 'openvino')
    assert _alternate_signal_stack() == stack
    del first
    gc.collect()
    assert _alternate_signal_stack() == stack
    del second
    gc.collect()
    assert _alternate_signal_stack() == stack


def _digits_classifier():
    """A one-layer T2T-ViT fitted for 120 steps to 1000 of scikit-learn's
    8x8 digits (about 80% top-1 on the other 797), and those 797 as a
    probe. A trained model has the margins a real deployment has; on a
    random one int8 noise decides between near-equal logits."""
    from sklearn.datasets import load_digits

    cfg = Config.fromfile(
        str(ROOT / 'configs' / 't2t-vit-mini_1xb64_digits.py')
    )
    cfg.model.backbone.arch = dict(
        TINY, token_layer='transformer', num_layers=1
    )
    cfg.model.backbone.t2t_cfg.token_dims = 16
    cfg.model.head.in_channels = TINY['embed_dims']
    model = build_exportable(cfg, None)
    digits = load_digits()
    images = torch.from_numpy(digits.images * (255 / 16)).float()[:, None]
    images = (images - model.mean[0]) / model.std[0]
    labels = torch.from_numpy(digits.target)
    net = model.module.train()
    optimizer = torch.optim.AdamW(net.parameters(), lr=3e-3)
    generator = torch.Generator().manual_seed(0)
    for _ in range(120):
        batch = torch.randint(0, 1000, (64,), generator=generator)
        loss = torch.nn.functional.cross_entropy(
            net(images[batch]), labels[batch]
        )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    net.eval()
    return model, images[1000:], labels[1000:].numpy()


@pytest.mark.slow
def test_int8_quantisation_keeps_the_top_1_of_a_trained_model(tmp_path):
    """int8 is judged by what a user reads from it, the predicted class: the
    logits themselves move by up to 0.06 (0.03 with VNNI), depending on the
    CPU's integer kernels."""
    model, probe, labels = _digits_classifier()
    path = export_onnx(model, tmp_path / 'model.onnx')
    int8 = quantize_int8(path, tmp_path / 'model.int8.onnx')
    import onnx

    ops = {node.op_type for node in onnx.load(str(int8)).graph.node}
    assert {'DynamicQuantizeLinear', 'MatMulInteger'} <= ops
    with torch.no_grad():
        fp32 = model.module(probe).numpy().argmax(1)
    logits = RuntimeSession(int8, 'onnxruntime', 'int8')(probe)[0]
    assert logits.shape == (797, 10)
    quantised = logits.argmax(1)
    fp32_accuracy = (fp32 == labels).mean()
    assert fp32_accuracy > 0.6  # the probe is a real task for the model
    assert (quantised == fp32).mean() >= 0.95
    assert abs((quantised == labels).mean() - fp32_accuracy) <= 0.02


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


def _export_over_stale_weights(tool, out, checkpoint, *extra) -> tuple:
    """The tool run on the digits demo into ``out`` (a new folder's
    ``digits.onnx``) where an earlier export with external data left
    ``digits.onnx.data``: its exit code and what it printed."""
    config = str(ROOT / 'configs' / 't2t-vit-mini_1xb64_digits.py')
    # weights of an earlier export with external data must not linger
    out.parent.mkdir()
    out.with_name('digits.onnx.data').write_bytes(b'stale')
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = tool.main([config, str(checkpoint), str(out), *extra])
    return code, printed.getvalue()


@pytest.fixture(scope='module')
def verified_export(tool, digits_checkpoint, tmp_path_factory):
    """The digits demo exported once by the tool with --verify (and
    --openvino): ``(out, exit code, stdout)``. Tests only read it."""
    out = tmp_path_factory.mktemp('verified') / 'export' / 'digits.onnx'
    runtimes = ['--verify'] + ['--openvino'] * _has('openvino')
    code, printed = _export_over_stale_weights(
        tool, out, digits_checkpoint, *runtimes
    )
    return out, code, printed


@pytest.mark.slow
def test_tool_exports_and_verifies(verified_export):
    out, code, printed = verified_export
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


def test_tool_takes_cfg_options_and_writes_the_input_in_metadata(
    tool, tmp_path, capsys
):
    """A checkpoint of 4 named classes: with the config's 10 classes the
    tool names the option, with it the file's metadata gives the
    checkpoint's classes and the config's input."""
    import onnx
    from mmpretrain.apis import get_model

    from t2t_plugin.runtime import load_config

    config = str(ROOT / 'configs' / 't2t-vit-mini_1xb64_digits.py')
    names = ['ant', 'bee', 'cat', 'dog']
    option = ['--cfg-options', 'model.head.num_classes=4']
    checkpoint = tmp_path / 'four.pth'
    model = get_model(load_config(config, {'model.head.num_classes': 4}))
    torch.save(
        {
            'state_dict': model.state_dict(),
            'meta': {'dataset_meta': {'classes': names}},
        },
        checkpoint,
    )
    out = tmp_path / 'four.onnx'
    assert tool.main([config, str(checkpoint), str(out)]) == 2
    assert capsys.readouterr().err.strip() == (
        f'pytorch2onnx.py: error: The checkpoint {checkpoint} classifies 4 '
        "classes, this model's head 10 (num_classes); give the tool the "
        'config its run saved in the work dir or add --cfg-options '
        'model.head.num_classes=4.'
    )
    assert not out.exists()
    assert tool.main([config, str(checkpoint), str(out), *option]) == 0
    meta = {p.key: p.value for p in onnx.load(str(out)).metadata_props}
    preprocessor = Config.fromfile(config).data_preprocessor
    assert json.loads(meta['classes']) == names
    assert json.loads(meta['mean']) == preprocessor.mean
    assert json.loads(meta['std']) == preprocessor.std
    assert json.loads(meta['input_size']) == [8, 8]
    assert meta['channel_order'] == 'L'


@pytest.mark.parametrize('above_limit', [False, True])
def test_tool_writes_one_file_that_loads_from_another_folder(
    tool,
    digits_checkpoint,
    verified_export,
    tmp_path,
    monkeypatch,
    above_limit,
):
    """Below torch's limit for a self-contained file the .onnx holds its
    weights (the module's export with --verify, whose checks print other
    lines); above it (a limit of 0 bytes here) they go beside it and both
    paths are printed."""
    from torch.onnx._internal.exporter import _onnx_program

    if above_limit:  # fails when a torch release renames the limit
        monkeypatch.setattr(_onnx_program, '_LARGE_MODEL_THRESHOLD', 0)
        out = tmp_path / 'export' / 'digits.onnx'
        code, printed = _export_over_stale_weights(
            tool, out, digits_checkpoint
        )
    else:
        out, code, printed = verified_export
    assert code == 0, printed
    printed = [
        line for line in printed.splitlines() if line.startswith('Wrote')
    ]
    data = out.with_name('digits.onnx.data')
    beside = (
        f' and its weights {data} (too large for one file: keep the two '
        'together)'
        if above_limit
        else ''
    )
    assert len(printed) == 1
    assert printed[0].startswith(f'Wrote {out}{beside}: opset 18, ')
    written = sorted(p.name for p in out.parent.iterdir())
    assert written == ['digits.onnx'] + ['digits.onnx.data'] * above_limit
    assert external_data_file(out) == (data if above_limit else None)

    moved = tmp_path / 'elsewhere'
    moved.mkdir()
    for name in written:  # the .onnx alone, or with its weights
        shutil.copy(out.parent / name, moved / name)
    if above_limit:  # the module's export is left to the other tests
        shutil.rmtree(out.parent)
    session = RuntimeSession(moved / 'digits.onnx', 'onnxruntime')
    config = str(ROOT / 'configs' / 't2t-vit-mini_1xb64_digits.py')
    model = build_exportable(config, digits_checkpoint)
    images = sample_images(
        2, model.input_size, model.in_channels, model.mean, model.std
    )
    diffs = compare(model.module, session, {'real': images})
    assert diffs['real'] < ATOL


def _has(module):
    try:
        __import__(module)
    except ImportError:
        return False
    return True


@pytest.mark.parametrize(
    'case,message',
    [
        (
            'missing_checkpoint',
            'Checkpoint not found: expected /nonexistent.pth (see '
            'docs/training.md#training).',
        ),
        (
            'bad_size',
            'T2T-ViT cannot tile a 9x8 input: its soft splits (kernels '
            '(3, 3, 3), strides (1, 1, 2), paddings (1, 1, 1)) need both '
            'sides to be multiples of 2. Resize or pad the image, e.g. to '
            '10x8.',
        ),
        ('out_is_folder', 'is a folder; give a file name.'),
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
    elif case == 'out_is_folder':
        (tmp_path / 'x.onnx').mkdir()
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
    assert not (tmp_path / 'x.onnx').is_file()


@pytest.mark.parametrize('size', [(9, 9), (7, 8)])
def test_untileable_sizes_are_refused_at_export_and_at_run_time(
    tool, exported, tmp_path, capsys, size
):
    """The graph computes numbers for any size; the session refuses what
    the model refuses, with the model's own message."""
    model, path = exported('performer')
    with pytest.raises(ValueError) as error, torch.no_grad():
        model.module(torch.zeros(1, 3, *size))
    message = str(error.value)
    assert message.startswith(f'T2T-ViT cannot tile a {size[0]}x{size[1]}')
    for runtime in ('onnxruntime', 'openvino'):
        if not _has(runtime):
            continue
        session = RuntimeSession(path, runtime)
        with pytest.raises(ValueError) as error:
            session(np.zeros((1, 3, *size), np.float32))
        assert str(error.value) == message
        with pytest.raises(ValueError) as error:
            session(np.zeros((1, 1, 32, 32), np.float32))
        assert str(error.value) == (
            'T2T-ViT expects images of shape (B, 3, H, W), got (1, 1, 32, 32).'
        )
    int8 = RuntimeSession(
        quantize_int8(path, tmp_path / 'model.int8.onnx'), precision='int8'
    )
    with pytest.raises(ValueError) as error:
        int8(np.zeros((1, 3, *size), np.float32))
    assert str(error.value) == message

    config = tmp_path / 'tiny.py'
    _classifier_cfg('performer').dump(str(config))
    checkpoint = tmp_path / 'tiny.pth'
    torch.save(
        {
            'state_dict': {
                f'backbone.{k}': v
                for k, v in model.module.backbone.state_dict().items()
            }
            | {
                f'head.{k}': v
                for k, v in model.module.head.state_dict().items()
            }
        },
        checkpoint,
    )
    out = tmp_path / 'x.onnx'
    code = tool.main(
        [str(config), str(checkpoint), str(out), '--shape', *map(str, size)]
    )
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.strip().splitlines() == [
        f'pytorch2onnx.py: error: {message}'
    ]
    assert not out.exists()


def test_tool_never_writes_over_its_inputs(
    tool, digits_checkpoint, tmp_path, capsys
):
    """OUT that is the checkpoint or the config (links resolved) is
    refused even with --force; an existing file that is not an ONNX model
    only with --force. The inputs are left as they were."""
    config = tmp_path / 'digits.py'
    demo = ROOT / 'configs' / 't2t-vit-mini_1xb64_digits.py'
    config.write_text(f'_base_ = [{str(demo)!r}]\n')
    checkpoint = tmp_path / 'digits.pth'
    shutil.copy(digits_checkpoint, checkpoint)
    link = tmp_path / 'link.pth'
    link.symlink_to(checkpoint)
    notes = tmp_path / 'notes.txt'
    notes.write_text('mine')
    before = {p: p.read_bytes() for p in (config, checkpoint, notes)}
    an_input = ', an input of this command; give another path.'
    cases = [
        (checkpoint, [], f' is the checkpoint{an_input}'),
        (link, ['--force'], f' is the checkpoint{an_input}'),
        (config, ['--force'], f' is the config{an_input}'),
        (
            notes,
            [],
            ' exists and is not an ONNX model; give a new name, or --force '
            'to replace it.',
        ),
        (notes / 'x.onnx', [], f': {notes} is a file, not a folder.'),
    ]
    for out, extra, message in cases:
        code = tool.main([str(config), str(checkpoint), str(out), *extra])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2
        assert err == [f'pytorch2onnx.py: error: The output {out}{message}']
    assert {p: p.read_bytes() for p in before} == before
    assert (
        tool.main([str(config), str(checkpoint), str(notes), '--force']) == 0
    )
    assert onnx_export.is_onnx_model(notes)
    assert checkpoint.read_bytes() == before[checkpoint]


KILLED_EXPORT = """
import os, signal, sys
import torch
from t2t_plugin.deployment import build_exportable, export_onnx

def half_then_killed(module, args, path, **kwargs):
    with open(path, 'wb') as f:
        f.write(b'half an export')
        f.flush()
    os.kill(os.getpid(), signal.SIGKILL)

torch.onnx.export = half_then_killed
export_onnx(build_exportable(sys.argv[1], None), sys.argv[2])
"""


def test_an_interrupted_export_leaves_the_earlier_one(tmp_path, monkeypatch):
    """A process killed (SIGKILL) while it writes, or an export that fails
    halfway: the earlier OUT.onnx and OUT.onnx.data are as they were."""
    import signal
    import subprocess
    import sys

    from ..helpers import tool_env

    out = tmp_path / 'digits.onnx'
    earlier = {
        out: b'an earlier export',
        out.with_name('digits.onnx.data'): b'its weights',
    }
    for path, data in earlier.items():
        path.write_bytes(data)
    config = str(ROOT / 'configs' / 't2t-vit-mini_1xb64_digits.py')
    killed = subprocess.run(
        [sys.executable, '-c', KILLED_EXPORT, config, str(out)],
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert {p: p.read_bytes() for p in earlier} == earlier
    (staging,) = (p for p in tmp_path.iterdir() if p.is_dir())
    assert (staging / 'digits.onnx').read_bytes() == b'half an export'

    def fails_halfway(module, args, path, **kwargs):
        with open(path, 'wb') as f:
            f.write(b'half an export')
        raise RuntimeError('disk went away')

    monkeypatch.setattr(torch.onnx, 'export', fails_halfway)
    model = build_exportable(config, None)
    with pytest.raises(ValueError, match='disk went away'):
        export_onnx(model, out)
    assert {p: p.read_bytes() for p in earlier} == earlier
    # the temporary folders, of the killed export too, are gone
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        'digits.onnx',
        'digits.onnx.data',
    ]
