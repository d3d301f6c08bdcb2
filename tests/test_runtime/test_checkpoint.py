"""Weights and data files through every door: ours and the ecosystem's.

Each case goes through at least two entry points: mmpretrain's
``get_model`` (by name, path or URL), a Runner's ``load_from``, an mmdet
build with ``init_cfg=dict(type='Pretrained')``, mmengine's ``load`` /
``BaseDataset``. A crafted file writes a marker file if any of its code
runs; the marker must never appear. Nothing is downloaded: ``TORCH_HOME``
is a temporary folder whose hub cache stands in for the release site.
"""

import ast
import copy
import logging
import os
import pickle
import subprocess
import sys
import urllib.error
from collections import OrderedDict
from pathlib import Path

import pytest
import torch
from mmengine.config import Config
from mmengine.logging import MMLogger
from mmengine.runner import load_checkpoint
from mmpretrain import get_model
from mmpretrain.registry import MODELS

import t2t_plugin  # noqa: F401
from t2t_plugin.converters import official as official_module
from t2t_plugin.converters import official_to_plugin
from t2t_plugin.runtime import (
    CheckpointError,
    read_checkpoint,
)
from t2t_plugin.runtime.checkpoint import hub_cache_path

from ..helpers import DEMO, ROOT, plain_runner

RELEASE_URL = (
    'https://github.com/yitu-opensource/T2T-ViT/releases/download/main/'
    '81.5_T2T_ViT_14.pth.tar'
)
NAME = 't2t-vit-14_8xb64_in1k_t2tp'
# a tiny stand-in for the arch of NAME: the doors are the same, the build
# takes milliseconds
TINY_ARCH = dict(
    backbone=dict(
        arch=dict(_delete_=True, embed_dims=64, num_layers=1, num_heads=2)
    ),
    head=dict(in_channels=64),
)
FINE_TUNE = (
    'to fine-tune with a new head, start the backbone only: '
    "model.backbone.init_cfg=dict(type='Pretrained', checkpoint=FILE, "
    "prefix='backbone.') and no load_from"
)


class _RunsCode:
    """Unpickling this object runs ``touch MARKER``."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f'touch {self.marker}',))


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """An empty torch hub cache; any download attempt fails the test."""
    monkeypatch.setenv('TORCH_HOME', str(tmp_path / 'torch'))

    def no_download(url, dst, *args, **kwargs):
        raise AssertionError(f'tried to download {url}')

    monkeypatch.setattr(torch.hub, 'download_url_to_file', no_download)
    folder = tmp_path / 'torch' / 'hub' / 'checkpoints'
    folder.mkdir(parents=True)
    return folder


def _demo_runner(tmp_path, load_from):
    cfg = Config.fromfile(DEMO)
    cfg.work_dir = str(tmp_path / 'work')
    cfg.load_from = load_from
    cfg.resume = False
    return plain_runner(cfg)


# --- a crafted release in the hub cache ---------------------------------


def test_hub_cache_payload_never_runs(hub, tmp_path):
    marker = tmp_path / 'marker'
    cached = hub / '81.5_T2T_ViT_14.pth.tar'
    torch.save({'state_dict_ema': _RunsCode(marker)}, cached)
    assert hub_cache_path(RELEASE_URL) == str(cached)

    # mmpretrain's get_model, by name, with the index entry's weights
    with pytest.raises(CheckpointError) as error:
        get_model(NAME, pretrained=True, **copy.deepcopy(TINY_ARCH))
    assert str(error.value).startswith(
        f'Cannot read checkpoint {cached}: it holds Python objects that '
        "torch's safe loader refuses (GLOBAL posix.system)"
    )
    # a Runner's load_from of the release URL
    runner = _demo_runner(tmp_path, RELEASE_URL)
    with pytest.raises(CheckpointError, match='GLOBAL posix.system'):
        runner.load_or_resume()
    # mmengine's load_checkpoint, as the Pretrained initialiser calls it
    with pytest.raises(CheckpointError, match='GLOBAL posix.system'):
        load_checkpoint(torch.nn.Linear(1, 1), RELEASE_URL)
    assert not marker.exists()


def test_cached_release_loads_through_get_model_and_the_runner(hub, tmp_path):
    cfg = Config.fromfile(DEMO)
    model = MODELS.build(cfg.model)
    with torch.no_grad():
        for param in model.parameters():
            param.normal_(0, 0.1)
    cached = hub / '81.5_T2T_ViT_14.pth.tar'
    torch.save({'state_dict': model.state_dict()}, cached)

    loaded = get_model(DEMO, pretrained=RELEASE_URL)
    runner = _demo_runner(tmp_path, RELEASE_URL)
    runner.load_or_resume()
    for key, value in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key
        assert torch.equal(runner.model.state_dict()[key], value), key


def test_damaged_cached_download_names_the_file_to_delete(hub, tmp_path):
    cached = hub / '81.5_T2T_ViT_14.pth.tar'
    torch.save({'state_dict': {'w': torch.zeros(1000)}}, cached)
    cached.write_bytes(cached.read_bytes()[:300])
    expected = (
        f'Cannot read checkpoint {cached}: not a complete PyTorch '
        'checkpoint (RuntimeError: PytorchStreamReader failed reading zip '
        f'archive: failed finding central directory), a damaged download '
        f'of {RELEASE_URL}: delete {cached} to download it again.'
    )
    with pytest.raises(CheckpointError) as error:
        get_model(NAME, pretrained=True, **copy.deepcopy(TINY_ARCH))
    assert str(error.value) == expected
    runner = _demo_runner(tmp_path, RELEASE_URL)
    with pytest.raises(CheckpointError) as error:
        runner.load_or_resume()
    assert str(error.value) == expected


def test_offline_download_says_where_to_place_the_file(hub, monkeypatch):
    def offline(url, dst, *args, **kwargs):
        raise urllib.error.URLError('[Errno -2] Name or service not known')

    monkeypatch.setattr(torch.hub, 'download_url_to_file', offline)
    expected = (
        f'Cannot download {RELEASE_URL} ([Errno -2] Name or service not '
        'known); download it where there is a network and place it at '
        f'{hub / "81.5_T2T_ViT_14.pth.tar"}.'
    )
    with pytest.raises(CheckpointError) as error:
        get_model(NAME, pretrained=True, **copy.deepcopy(TINY_ARCH))
    assert str(error.value) == expected
    with pytest.raises(CheckpointError) as error:
        read_checkpoint(RELEASE_URL)
    assert str(error.value) == expected
    assert list(hub.iterdir()) == []


# --- weights that do not fit ---------------------------------------------


def _demo_classifier():
    model = MODELS.build(Config.fromfile(DEMO).model)
    with torch.no_grad():
        for param in model.parameters():
            param.normal_(0, 0.1)
    return model


def _bad_checkpoint(case):
    """A classifier checkpoint of the demo config, spoilt as ``case`` says;
    returns it and the message the load hooks give."""
    state = _demo_classifier().state_dict()
    if case == 'nan':
        state['backbone.encoder.0.attn.qkv.weight'][0, 0] = float('nan')
        message = (
            'The {checkpoint} holds NaN or infinite values in 1 weight(s) of '
            "T2TViT, e.g. 'backbone.encoder.0.attn.qkv.weight'; it comes "
            'from a run that diverged: take an earlier checkpoint.'
        )
    elif case == 'missing':
        del state['backbone.norm.weight']
        message = (
            'The {checkpoint} lacks 1 of the {n} weights of T2TViT (e.g. '
            "'backbone.norm.weight'): use the config the checkpoint was "
            'trained or converted for'
        )
    else:  # the checkpoint of another model
        state = {'conv1.weight': torch.zeros(8, 3, 3, 3)}
        message = (
            'The {checkpoint} holds none of the {n} weights of T2TViT '
            "(expected e.g. 'backbone.cls_token', 'backbone.pos_embed'; it "
            'has 0 entries here)'
        )
    return state, message


def _with_classes(num_classes):
    cfg = Config.fromfile(DEMO)
    cfg.model.head.num_classes = num_classes
    return cfg.model


BAD = ['nan', 'missing', 'no_keys_of_the_model']


@pytest.mark.parametrize('case', BAD)
def test_get_model_refuses_weights_that_do_not_fit(case, tmp_path):
    state, message = _bad_checkpoint(case)
    path = tmp_path / f'{case}.pth'
    torch.save({'state_dict': state}, path)
    n = len(_demo_classifier().backbone.state_dict())
    with pytest.raises(CheckpointError) as error:
        get_model(DEMO, pretrained=str(path))
    named = message.format(n=n, checkpoint=f'checkpoint {path}')
    assert str(error.value).startswith(named)
    assert '\n' not in str(error.value)
    # the same through a plain load_state_dict (the hooks are the models'),
    # which has no file to name
    with pytest.raises(CheckpointError) as error:
        _demo_classifier().load_state_dict(state, strict=False)
    assert str(error.value).startswith(
        message.format(n=n, checkpoint='checkpoint')
    )


def _mmdet_backbone(init_cfg):
    pytest.importorskip('mmdet.models')
    from mmdet.registry import MODELS as DET_MODELS
    from mmengine.registry import DefaultScope

    backbone = copy.deepcopy(Config.fromfile(DEMO).model.backbone)
    backbone.type = 'mmpretrain.T2TViT'
    backbone.out_type = 'featmap'
    backbone.init_cfg = init_cfg
    with DefaultScope.overwrite_default_scope('mmdet'):
        return DET_MODELS.build(backbone)


@pytest.mark.dense
@pytest.mark.parametrize('case', ['nan', 'missing', 'no_keys_of_the_model'])
def test_pretrained_init_in_mmdet_refuses_weights_that_do_not_fit(
    case, tmp_path
):
    state, message = _bad_checkpoint(case)
    path = tmp_path / f'{case}.pth'
    torch.save({'state_dict': state}, path)
    # as the det configs do: the backbone of a classifier checkpoint
    backbone = _mmdet_backbone(
        dict(type='Pretrained', checkpoint=str(path), prefix='backbone.')
    )
    n = len(backbone.state_dict())
    # loaded as a model of its own, the backbone names its keys bare
    message = message.format(n=n, checkpoint=f'checkpoint {path}')
    message = message.replace("'backbone.", "'")
    if case == 'no_keys_of_the_model':
        # with a prefix, mmengine finds none of the file's keys under it ...
        with pytest.raises(CheckpointError) as error:
            backbone.init_weights()
        assert str(error.value) == (
            f"Checkpoint {path} holds no weights under init_cfg's prefix "
            "'backbone.' (its 1 entries start with 'conv1'); it holds no "
            'T2TViT weights: give the checkpoint of a model with this '
            'T2TViT (a classifier, detector or segmentor, or the bare '
            'backbone).'
        )
        # ... without one, the backbone sees the whole file
        backbone = _mmdet_backbone(
            dict(type='Pretrained', checkpoint=str(path))
        )
        message = message.replace(
            '0 entries here', "1 entries here, e.g. 'conv1.weight'"
        )
    with pytest.raises(CheckpointError) as error:
        backbone.init_weights()
    assert str(error.value).startswith(message)


@pytest.mark.dense
def test_new_head_fine_tuning_loads_the_backbone_in_one_line(
    tmp_path, monkeypatch
):
    """The intended partial load: another head, the backbone only."""
    source = MODELS.build(_with_classes(3))
    with torch.no_grad():
        for param in source.parameters():
            param.normal_(0, 0.1)
    path = tmp_path / 'three_classes.pth'
    torch.save({'state_dict': source.state_dict()}, path)
    lines = []
    logger = MMLogger.get_current_instance()
    monkeypatch.setattr(
        logger, 'info', lambda line, *a, **k: lines.append(line)
    )
    init_cfg = dict(
        type='Pretrained', checkpoint=str(path), prefix='backbone.'
    )

    cfg = Config.fromfile(DEMO)
    cfg.model.backbone.init_cfg = init_cfg
    classifier = MODELS.build(cfg.model)  # 10 classes
    classifier.init_weights()
    backbone = _mmdet_backbone(init_cfg)
    backbone.init_weights()
    n = len(backbone.state_dict())
    report = f'T2TViT: {n} tensors loaded from the checkpoint, 0 left new.'
    assert lines.count(report) == 2
    for model in (classifier.backbone, backbone):
        for key, value in source.backbone.state_dict().items():
            assert torch.equal(model.state_dict()[key], value), key


FINE_TUNE_WARNING = (
    "The checkpoint {path} classifies 3 classes, this model's head 10 "
    '(num_classes): its classifier is not loaded and the head keeps its '
    'initialisation (a fine-tune to new classes).'
)
MMPRETRAIN_TRAIN = (
    Path(sys.modules['mmpretrain'].__file__).parent / '.mim/tools/train.py'
)


def _three_class_checkpoint(tmp_path):
    source = MODELS.build(_with_classes(3))
    with torch.no_grad():
        for param in source.parameters():
            param.normal_(0, 0.1)
    path = tmp_path / 'three_classes.pth'
    classes = ('ant', 'bee', 'cat')
    meta = {'dataset_meta': {'classes': classes}}
    torch.save({'state_dict': source.state_dict(), 'meta': meta}, path)
    return source, path


def test_get_model_fine_tunes_to_another_class_count_with_one_warning(
    tmp_path, monkeypatch
):
    """get_model(cfg, pretrained=FILE) of a 3-class checkpoint into a
    10-class head: the backbone loads, the classifier keeps its own
    initialisation, one warning line says so."""
    source, path = _three_class_checkpoint(tmp_path)
    lines = []
    monkeypatch.setattr(
        MMLogger.get_current_instance(),
        'log',
        lambda level, line, *a, **k: lines.append((level, line)),
    )
    torch.manual_seed(3)
    fresh = MODELS.build(Config.fromfile(DEMO).model)
    torch.manual_seed(3)
    tuned = get_model(DEMO, pretrained=str(path))
    warned = [line for level, line in lines if level >= logging.WARNING]
    assert warned == [FINE_TUNE_WARNING.format(path=path)]
    for key, value in source.backbone.state_dict().items():
        assert torch.equal(tuned.backbone.state_dict()[key], value), key
    for key, value in fresh.head.state_dict().items():
        assert torch.equal(tuned.head.state_dict()[key], value), key
    assert tuned.head.layers.head.weight.shape == (10, 64)
    # a plain load_state_dict has no file to name: one info line (as the
    # deep copy of mmengine's EMAHook, which the Runner loads first)
    lines.clear()
    fresh.load_state_dict(source.state_dict())
    assert lines == [(logging.INFO, FINE_TUNE_WARNING.replace(' {path}', ''))]


def test_a_whole_model_pretrained_init_fine_tunes_alike(tmp_path, monkeypatch):
    """model.init_cfg=dict(type='Pretrained', checkpoint=FILE) of the
    3-class checkpoint: the same single warning, the backbone loaded."""
    source, path = _three_class_checkpoint(tmp_path)
    lines = []
    monkeypatch.setattr(
        MMLogger.get_current_instance(),
        'log',
        lambda level, line, *a, **k: lines.append((level, line)),
    )
    cfg = Config.fromfile(DEMO)
    cfg.model.init_cfg = dict(type='Pretrained', checkpoint=str(path))
    model = MODELS.build(cfg.model)
    model.init_weights()
    warned = [line for level, line in lines if level >= logging.WARNING]
    assert warned == [FINE_TUNE_WARNING.format(path=path)]
    for key, value in source.backbone.state_dict().items():
        assert torch.equal(model.backbone.state_dict()[key], value), key


@pytest.mark.parametrize('tool', ['train', str(MMPRETRAIN_TRAIN)])
def test_load_from_fine_tunes_to_another_class_count(tool, tmp_path):
    """Our training tool and mmpretrain's: load_from a checkpoint of 3
    classes trains the 10-class demo, with one warning line and no other
    word about the head (mmengine's missing-key list included)."""
    from ..helpers import TINY_DEMO, run_main

    _, path = _three_class_checkpoint(tmp_path)
    work = tmp_path / 'work'
    result = run_main(
        tool, DEMO, '--work-dir', work, '--cfg-options', *TINY_DEMO,
        f'load_from={path}',
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    log = result.stdout.splitlines()
    warned = [
        line
        for line in log
        if ' WARNING - ' in line
        and any(word in line for word in ('classif', 'head', 'load_from'))
    ]
    assert len(warned) == 1, warned
    assert warned[0].endswith(FINE_TUNE_WARNING.format(path=path))
    assert not [line for line in log if 'missing keys' in line]
    saved = torch.load(work / 'epoch_1.pth', weights_only=False)
    assert saved['state_dict']['head.layers.head.weight'].shape == (10, 64)


PREFIX_CASES = {
    # the bare backbone's own file
    'bare': (
        "its {n} entries start with 'cls_token', 'encoder', 'norm', "
        "'pos_embed', 'tokens_to_token'); it is a bare T2TViT checkpoint: "
        'drop prefix from init_cfg.'
    ),
    'resnet': (
        "its 1 entries start with 'conv1'); it holds no T2TViT weights: "
        'give the checkpoint of a model with this T2TViT (a classifier, '
        'detector or segmentor, or the bare backbone).'
    ),
}


def _prefix_case_file(case, folder):
    model = _demo_classifier()
    if case == 'bare':
        state = model.backbone.state_dict()
    elif case == 'wrapped':
        state = {'module.' + k: v for k, v in model.state_dict().items()}
    else:
        state = {'conv1.weight': torch.zeros(8, 3, 3, 3)}
    path = folder / f'{case}.pth'
    torch.save({'state_dict': state}, path)
    return path, len(state)


def test_pretrained_prefix_reads_a_wrapped_classifier(tmp_path):
    """The reader drops DDP's ``module.`` prefix for every loader, a
    Pretrained prefix included."""
    path, _ = _prefix_case_file('wrapped', tmp_path)
    cfg = Config.fromfile(DEMO)
    cfg.model.backbone.init_cfg = dict(
        type='Pretrained', checkpoint=str(path), prefix='backbone.'
    )
    model = MODELS.build(cfg.model)
    model.init_weights()
    saved = torch.load(path, weights_only=True)['state_dict']
    for key, value in model.backbone.state_dict().items():
        assert torch.equal(value, saved[f'module.backbone.{key}']), key


@pytest.mark.parametrize('case', PREFIX_CASES)
def test_pretrained_prefix_the_file_lacks_is_one_line(case, tmp_path):
    from ..helpers import run_main

    path, n = _prefix_case_file(case, tmp_path)
    expected = (
        f"Checkpoint {path} holds no weights under init_cfg's prefix "
        f"'backbone.' ({PREFIX_CASES[case].format(n=n)}"
    )
    cfg = Config.fromfile(DEMO)
    cfg.model.backbone.init_cfg = dict(
        type='Pretrained', checkpoint=str(path), prefix='backbone.'
    )
    with pytest.raises(CheckpointError) as error:
        MODELS.build(cfg.model).init_weights()
    assert str(error.value) == expected
    if case != 'bare':
        return
    # our training tool: one line, exit 1, before the first iteration
    result = run_main(
        'train',
        DEMO,
        '--work-dir',
        tmp_path / 'work',
        '--cfg-options',
        'model.backbone.init_cfg.type=Pretrained',
        f'model.backbone.init_cfg.checkpoint={path}',
        'model.backbone.init_cfg.prefix=backbone.',
    )
    assert result.returncode == 1
    assert result.stderr.strip() == expected
    assert 'Epoch(train)' not in result.stdout


# --- what every weight and entry must be ----------------------------------


def _demo_arch(**arch):
    cfg = Config.fromfile(DEMO)
    cfg.model.backbone.arch.update(arch)
    return MODELS.build(cfg.model).backbone.arch_settings


def _refused_by_both_doors(path, expected, **options):
    """``tools/test.py`` (exit 1, the one line on stderr) and mmpretrain's
    ``get_model`` (the same line) refuse the checkpoint at ``path``;
    ``options`` are ``--cfg-options``."""
    from ..helpers import run_main

    cfg = Config.fromfile(DEMO)
    cfg.merge_from_dict(options)
    with pytest.raises(CheckpointError) as error:
        get_model(cfg, pretrained=str(path))
    assert str(error.value) == expected
    pairs = [f'{key}={value}' for key, value in options.items()]
    args = ['--cfg-options', *pairs] if pairs else []
    result = run_main('test', DEMO, path, '--work-dir', path.parent, *args)
    assert result.returncode == 1
    assert result.stderr.strip() == expected
    assert 'top1' not in result.stdout


def test_weights_that_are_not_tensors_are_refused(tmp_path):
    state = _demo_classifier().state_dict()
    encoder = [key for key in state if key.startswith('backbone.encoder.')]
    for key in encoder:
        state[key] = 0.5
    path = tmp_path / 'floats.pth'
    torch.save({'state_dict': state}, path)
    expected = (
        f'The checkpoint {path} holds {len(encoder)} weight(s) of T2TViT '
        f"that are not tensors, e.g. '{encoder[0]}' (a float); it was not "
        "saved from model.state_dict(): save one with torch.save({'state_"
        "dict': model.state_dict()}, path)."
    )
    _refused_by_both_doors(path, expected)


def _another_kind(value, kind):
    if kind == 'qint8':
        return torch.quantize_per_tensor(value, 0.01, 0, torch.qint8)
    return value.to(getattr(torch, kind))


@pytest.mark.parametrize('kind', ['int64', 'bool', 'int8', 'qint8'])
def test_weights_of_another_kind_are_refused(kind, tmp_path):
    """copy_ would cast integers and booleans and skip quantized weights:
    a weight is a floating tensor, or the load is refused."""
    state = _demo_classifier().state_dict()
    encoder = [key for key in state if key.startswith('backbone.encoder.')]
    for key in encoder:
        state[key] = _another_kind(state[key], kind)
    path = tmp_path / f'{kind}.pth'
    torch.save({'state_dict': state}, path)
    expected = (
        f'The checkpoint {path} holds {len(encoder)} weight(s) of T2TViT of '
        f'another kind than the model, e.g. {encoder[0]} (torch.{kind}); '
        'only floating-point weights load: save the weights of the trained '
        'model as they are, not cast to integers or quantized.'
    )
    try:
        torch.load(path, weights_only=True)
    # a torch whose safe loader reads no quantized tensor (2.1)
    except Exception:
        expected = (
            f'Cannot read checkpoint {path}: it holds Python objects that '
            "torch's safe loader refuses (GLOBAL torch._utils._rebuild_"
            'qtensor); save the weights alone (state_dict + meta), or '
            'convert it with tools/model_converters/t2t_vit_official_to_'
            'plugin.py --trust-pickle if it comes from a source you trust.'
        )
    _refused_by_both_doors(path, expected)


def _saved_by_a_run(path, **options):
    """The demo classifier's checkpoint as a run of our configs saves it:
    ExactResumeHook records the backbone's arch in its meta."""
    from types import SimpleNamespace

    from t2t_plugin.runtime.hooks import ExactResumeHook
    from t2t_plugin.runtime.hooks.exact_resume_hook import SETTINGS_KEY

    cfg = Config.fromfile(DEMO)
    cfg.merge_from_dict(options)
    model = MODELS.build(cfg.model)
    checkpoint = {'state_dict': model.state_dict(), 'meta': {'epoch': 1}}
    ExactResumeHook().before_save_checkpoint(
        # what the hook reads of a run besides the model: no loader or
        # optimizer state to record here
        SimpleNamespace(
            model=model,
            train_dataloader=SimpleNamespace(),
            optim_wrapper=None,
        ),
        checkpoint,
    )
    checkpoint['meta'].pop(SETTINGS_KEY)
    checkpoint.pop('random_state')
    torch.save(checkpoint, path)
    return checkpoint['meta']


def test_a_run_records_its_arch_in_the_checkpoint(one_epoch, tmp_path):
    """Our configs' ExactResumeHook records the arch in every
    checkpoint a run saves."""
    meta = read_checkpoint(one_epoch / 'epoch_1.pth')['meta']
    assert meta == {**meta, **_saved_by_a_run(tmp_path / 'run.pth')}
    assert meta['t2t_arch'] == {
        'model.backbone.attn_scale': 'official',
        'model.backbone.arch.token_layer': 'performer',
        'model.backbone.arch.embed_dims': 64,
        'model.backbone.arch.num_layers': 4,
        'model.backbone.arch.num_heads': 4,
        'model.backbone.arch.feedforward_channels': 128,
        'model.backbone.t2t_cfg.kernel_sizes': [3, 3, 3],
        'model.backbone.t2t_cfg.strides': [1, 1, 2],
        'model.backbone.t2t_cfg.paddings': [1, 1, 1],
    }


@pytest.mark.parametrize(
    'key,saved,built',
    [
        ('model.backbone.arch.num_heads', 4, 8),
        ('model.backbone.t2t_cfg.strides', [1, 1, 2], [1, 2, 1]),
    ],
)
def test_another_arch_of_the_same_shapes_is_refused(
    key, saved, built, tmp_path
):
    """Other heads or strides give weights of the same shapes: the arch
    the checkpoint records tells them apart."""
    path = tmp_path / 'run.pth'
    _saved_by_a_run(path)
    expected = (
        f'The checkpoint {path} was trained with {key}={saved}, this model '
        f'has {key}={built}: the weights have the same shapes but mean '
        'something else; use the config it was trained with (set '
        f'{key}={saved}).'
    )
    option = key.removeprefix('model.')
    _refused_by_both_doors(path, expected, **{f'model.{option}': built})
    # a checkpoint without the record (an official release, an older
    # file) loads as before
    checkpoint = torch.load(path, weights_only=True)
    del checkpoint['meta']['t2t_arch']
    torch.save(checkpoint, path)
    cfg = Config.fromfile(DEMO)
    cfg.merge_from_dict({key: built})
    get_model(cfg, pretrained=str(path))


@pytest.mark.parametrize('saved,built', [(4, 2), (2, 4)])
def test_another_depth_is_another_arch(saved, built, tmp_path):
    cfg = Config.fromfile(DEMO)
    cfg.model.backbone.arch.num_layers = saved
    path = tmp_path / f'{saved}_layers.pth'
    torch.save({'state_dict': MODELS.build(cfg.model).state_dict()}, path)
    expected = (
        f'The checkpoint {path} has {saved} encoder layers, this T2T-ViT '
        f'has {built} (arch {_demo_arch(num_layers=built)}). Use the arch '
        'the checkpoint was trained with.'
    )
    options = {} if built == 4 else {'model.backbone.arch.num_layers': built}
    _refused_by_both_doors(path, expected, **options)


def test_entries_the_model_does_not_have_are_refused(tmp_path):
    state = _demo_classifier().state_dict()
    state['backbone.encoder.0.attn.rel_pos'] = torch.zeros(3)
    state['head.layers.pre_logits.weight'] = torch.zeros(2, 64)
    path = tmp_path / 'extra.pth'
    torch.save({'state_dict': state}, path)
    with pytest.raises(CheckpointError) as error:
        get_model(DEMO, pretrained=str(path))
    assert str(error.value) == (
        f"The checkpoint {path} holds 1 entries under 'backbone.' that "
        "T2TViT does not have (e.g. 'backbone.encoder.0.attn.rel_pos'), "
        'which would be left unused: use the config the checkpoint was '
        'trained or converted for; to start only the backbone from a '
        'classifier or detector checkpoint, set backbone.init_cfg=dict('
        "type='Pretrained', checkpoint=FILE, prefix='backbone.')."
    )
    del state['backbone.encoder.0.attn.rel_pos']
    torch.save({'state_dict': state}, path)
    with pytest.raises(CheckpointError) as error:
        get_model(DEMO, pretrained=str(path))
    assert str(error.value) == (
        f"The checkpoint {path} holds 1 entries under 'head.' that "
        "T2TClsHead does not have (e.g. 'head.layers.pre_logits.weight'), "
        f'which would be left unused: {FINE_TUNE}.'
    )


def test_entries_a_model_knowingly_leaves_unused_still_load(tmp_path):
    """A classifier's final norm and class token, loaded into a backbone
    built without them."""
    source = _demo_classifier()
    path = tmp_path / 'classifier.pth'
    torch.save({'state_dict': source.state_dict()}, path)
    cfg = Config.fromfile(DEMO)
    cfg.model.backbone.update(final_norm=False)
    loaded = get_model(cfg, pretrained=str(path))
    for key, value in loaded.backbone.state_dict().items():
        assert torch.equal(value, source.backbone.state_dict()[key]), key
    # a bare backbone started from the classifier: the head is dropped
    backbone = copy.deepcopy(cfg.model.backbone)
    backbone.update(init_cfg=dict(type='Pretrained', checkpoint=str(path)))
    built = MODELS.build(backbone)
    built.init_weights()
    assert 'norm.weight' not in built.state_dict()


def test_the_ema_copy_of_the_weights_is_refused(tmp_path):
    """mmengine's EMAHook loads a deep copy of the weights before the
    model's own load: the same refusal (the copy's tensors are no longer
    the ones the reader read, so it says 'the checkpoint')."""
    cfg = Config.fromfile(DEMO)
    cfg.model.backbone.arch.num_layers = 2
    path = tmp_path / '2_layers.pth'
    torch.save({'state_dict': MODELS.build(cfg.model).state_dict()}, path)
    cfg = Config.fromfile(DEMO)
    cfg.custom_hooks = [*cfg.get('custom_hooks', []), dict(type='EMAHook')]
    cfg.work_dir = str(tmp_path / 'work')
    cfg.load_from = str(path)
    runner = plain_runner(cfg)
    with pytest.raises(CheckpointError) as error:
        runner.test()
    assert str(error.value) == (
        'The checkpoint has 2 encoder layers, this T2T-ViT has 4 '
        f'(arch {_demo_arch()}). Use the arch the checkpoint was trained '
        'with.'
    )


def _malformed(case):
    state = _demo_classifier().state_dict()
    if case == 'list':
        return {'state_dict': [1, 2, 3]}, (
            "The 'state_dict' of {path} is a list, not a dict of weights; "
            'save model.state_dict() there.'
        )
    if case == 'int_keys':
        return {'state_dict': {**state, 7: torch.zeros(1)}}, (
            'The weights of {path} are not all named by strings (a key 7); '
            'save model.state_dict(), whose keys are the weight names.'
        )
    if case == 'meta_str':
        return {'state_dict': state, 'meta': 'hello'}, (
            "The 'meta' of {path} is a str, not a dict; save a dict there "
            "(mmengine's meta) or leave it out."
        )
    if case == 'dataset_meta_list':
        return {'state_dict': state, 'meta': {'dataset_meta': [1]}}, (
            "The meta['dataset_meta'] of {path} is a list, not a dict; save "
            "the dataset's metainfo there or leave it out."
        )
    meta = {'dataset_meta': {'classes': 5}}
    return {'state_dict': state, 'meta': meta}, (
        "The meta['dataset_meta']['classes'] of {path} is 5, not a list of "
        'class names; save the names there or leave it out.'
    )


@pytest.mark.parametrize(
    'case', ['list', 'int_keys', 'meta_str', 'dataset_meta_list', 'classes']
)
def test_malformed_checkpoints_are_one_line(case, tmp_path):
    checkpoint, problem = _malformed(case)
    path = tmp_path / f'{case}.pth'
    torch.save(checkpoint, path)
    _refused_by_both_doors(path, problem.format(path=path))


class _GetattrOfHistoryBuffer:
    """Unpickled, a getattr of a HistoryBuffer method that is no
    statistic (the allow-list's getattr stand-in refuses it)."""

    def __reduce__(self):
        from mmengine.logging import HistoryBuffer

        return (getattr, (HistoryBuffer, '__init__'))


@pytest.mark.parametrize('case', ['getattr', 'object_array'])
def test_refused_objects_are_named_not_called_damage(case, tmp_path):
    import numpy as np

    if case == 'getattr':
        payload = _GetattrOfHistoryBuffer()
        refused = "GLOBAL builtins.getattr(HistoryBuffer, '__init__')"
    else:
        from t2t_plugin.compat import HAS_ADD_SAFE_GLOBALS

        if not HAS_ADD_SAFE_GLOBALS:
            pytest.skip(
                "torch < 2.4: the reader's own allow-list rebuilds an object "
                'array of ints and strings (no global of it runs code)'
            )
        payload = np.array([1, 'a'], dtype=object)
        refused = 'a numpy.dtypes.ObjectDType object'
    path = tmp_path / f'{case}.pth'
    torch.save({'state_dict': {'x': torch.zeros(1)}, 'extra': payload}, path)
    expected = (
        f'Cannot read checkpoint {path}: it holds Python objects that '
        f"torch's safe loader refuses ({refused}); save the weights alone "
        '(state_dict + meta), or convert it with '
        'tools/model_converters/t2t_vit_official_to_plugin.py '
        '--trust-pickle if it comes from a source you trust.'
    )
    with pytest.raises(CheckpointError) as error:
        read_checkpoint(path)
    assert str(error.value) == expected
    with pytest.raises(CheckpointError) as error:
        get_model(DEMO, pretrained=str(path))
    assert str(error.value) == expected


# --- official layout, through the hooks -----------------------------------


def test_official_release_loads_into_a_bare_backbone(tmp_path):
    """Pretrained without a prefix hands the backbone the file as it is."""
    from ..test_apis.test_model_zoo import official_keys

    source = _demo_classifier()
    path = tmp_path / 'official.pth.tar'
    torch.save(
        {'state_dict_ema': official_keys(source.state_dict(), 'performer')},
        path,
    )
    cfg = Config.fromfile(DEMO)
    for checkpoint in (str(path), official_to_plugin(torch.load(path))):
        backbone = MODELS.build(cfg.model.backbone)
        if isinstance(checkpoint, str):
            backbone.init_cfg = dict(type='Pretrained', checkpoint=checkpoint)
            backbone.init_weights()
        else:  # a classifier's checkpoint, backbone.* keys
            backbone.load_state_dict(checkpoint['state_dict'], strict=True)
        for key, value in source.backbone.state_dict().items():
            assert torch.equal(backbone.state_dict()[key], value), key


def test_official_names_are_converted_by_the_reader_alone(
    tmp_path, monkeypatch
):
    """One conversion, the reader's: a load_state_dict call of official
    names is refused in one line that says which loaders convert them."""
    from t2t_plugin.runtime import checkpoint as reader

    from ..test_apis.test_model_zoo import official_keys

    source = _demo_classifier()
    raw = official_keys(source.state_dict(), 'performer')
    cfg = Config.fromfile(DEMO)
    with pytest.raises(CheckpointError) as error:
        MODELS.build(cfg.model.backbone).load_state_dict(raw)
    assert str(error.value).startswith(
        'The checkpoint holds none of the 76 weights of T2TViT (expected '
        "e.g. 'cls_token', 'pos_embed'; it has "
    )
    calls = []

    def counted(checkpoint):
        calls.append(checkpoint)
        return official_to_plugin(checkpoint)

    monkeypatch.setattr(reader, 'official_to_plugin', counted)
    path = tmp_path / 'official.pth.tar'
    torch.save({'state_dict_ema': raw}, path)
    cfg.model.backbone.init_cfg = dict(type='Pretrained', checkpoint=str(path))
    backbone = MODELS.build(cfg.model.backbone)
    backbone.init_weights()
    assert len(calls) == 1
    for key, value in source.backbone.state_dict().items():
        assert torch.equal(backbone.state_dict()[key], value), key


def test_is_official_tells_the_names_wherever_they_are_kept():
    from t2t_plugin.converters import is_official

    names = {
        'tokens_to_token.project.weight': 0,
        'blocks.0.attn.qkv.weight': 0,
    }
    assert is_official(names)
    assert is_official({'state_dict_ema': {f'module.{k}': 0 for k in names}})
    assert not is_official({'backbone.tokens_to_token.project.weight': 0})
    assert not is_official([1, 2])


def test_refusals_name_the_file_the_reader_read_the_tensors_from(tmp_path):
    from t2t_plugin.models.checkpoint_checks import check_fit, source_of

    state = _demo_classifier().state_dict()
    path = tmp_path / 'read.pth'
    torch.save({'state_dict': state}, path)
    read = read_checkpoint(path)['state_dict']
    assert source_of(read).path == str(path)
    assert source_of(dict(read), 'backbone.').path == str(path)
    # weights built in memory, or copied, come from no file
    assert source_of(state) is None
    assert source_of(copy.deepcopy(read)) is None
    own = {'w': torch.zeros(2)}
    for weights, named in (
        (read, f'checkpoint {path}'),
        (state, 'checkpoint'),
    ):
        with pytest.raises(CheckpointError) as error:
            check_fit('Part', own, weights, 'head.layers.head.')
        assert str(error.value).startswith(f'The {named} holds none of')


def test_the_converter_is_a_leaf():
    tree = ast.parse(Path(official_module.__file__).read_text())
    imported = {
        (node.module or '').split('.')[0]
        if isinstance(node, ast.ImportFrom)
        else alias.name.split('.')[0]
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    relative = [
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.level
    ]
    assert relative == []
    assert imported == {'re', 'collections', 'typing', 'torch'}


def test_official_to_plugin_is_dict_to_dict():
    weights = {
        'module.cls_token': torch.zeros(1, 1, 8),
        'module.tokens_to_token.project.weight': torch.zeros(8, 4),
        'module.tokens_to_token.attention1.kqv.weight': torch.zeros(12, 4),
        'module.blocks.0.attn.qkv.weight': torch.zeros(24, 8),
        'module.head.bias': torch.zeros(5),
    }
    converted = official_to_plugin({'state_dict_ema': weights})
    assert list(converted['state_dict']) == [
        'backbone.cls_token',
        'backbone.tokens_to_token.project.weight',
        'backbone.tokens_to_token.attention1.attn.kqv.weight',
        'backbone.encoder.0.attn.qkv.weight',
        'head.layers.head.bias',
    ]
    for ours, theirs in zip(
        converted['state_dict'].values(), weights.values()
    ):
        assert ours is theirs
    assert official_to_plugin({'state_dict': {'conv1.weight': 1}}) is None


# --- other models load as without the plugin ------------------------------

RESNET_LOAD = """
import sys, torch
from mmengine.runner import load_checkpoint
from mmpretrain.registry import MODELS
import mmpretrain.models  # noqa: F401
{extra}
model = MODELS.build(dict(type='ImageClassifier',
    backbone=dict(type='ResNet', depth=18),
    neck=dict(type='GlobalAveragePooling'),
    head=dict(type='LinearClsHead', num_classes=7, in_channels=512)))
checkpoint = load_checkpoint(model, sys.argv[1], map_location='cpu')
out = dict(state=model.state_dict(), meta=checkpoint['meta'])
torch.save(out, sys.argv[2])
"""


def test_resnet_checkpoint_loads_the_same_with_and_without_the_plugin(
    tmp_path,
):
    from mmpretrain.datasets.categories import IMAGENET_CATEGORIES

    model = MODELS.build(
        dict(
            type='ImageClassifier',
            backbone=dict(type='ResNet', depth=18),
            neck=dict(type='GlobalAveragePooling'),
            head=dict(type='LinearClsHead', num_classes=7, in_channels=512),
        )
    )
    with torch.no_grad():
        for param in model.parameters():
            param.normal_(0, 0.1)
    path = tmp_path / 'resnet18.pth'
    meta = dict(
        epoch=3,
        dataset_meta=dict(classes=list(IMAGENET_CATEGORIES[:7])),
        mmengine_version='0.10.7',
    )
    torch.save(dict(state_dict=model.state_dict(), meta=meta), path)
    script = tmp_path / 'load.py'
    script.write_text(RESNET_LOAD.format(extra=''))
    done = subprocess.run(
        [sys.executable, str(script), str(path), str(tmp_path / 'alone.pt')],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS='1'),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert 't2t_plugin' not in done.stderr
    alone = torch.load(tmp_path / 'alone.pt')
    namespace = {'__name__': 'with_plugin'}
    sys.argv, argv = (
        ['load.py', str(path), str(tmp_path / 'ours.pt')],
        sys.argv,
    )
    try:
        exec(RESNET_LOAD.format(extra='import t2t_plugin'), namespace)
    finally:
        sys.argv = argv
    ours = torch.load(tmp_path / 'ours.pt')
    assert ours['meta'] == alone['meta'] == meta
    assert list(ours['state']) == list(alone['state'])
    for key, value in alone['state'].items():
        assert torch.equal(ours['state'][key], value), key
        assert torch.equal(value, model.state_dict()[key]), key


# --- data files -----------------------------------------------------------


CIFAR_FILES = {
    'LocalCIFAR10': (
        'cifar-10-batches-py',
        [f'data_batch_{i}' for i in range(1, 6)] + ['test_batch'],
    ),
    'LocalCIFAR100': ('cifar-100-python', ['train', 'test']),
}


@pytest.mark.parametrize(
    'config',
    [
        't2t-vit-7_1xb128_cifar10-32px.py',
        't2t-vit-14_in1k-pre_1xb64_cifar10-224px.py',
        't2t-vit-14_in1k-pre_1xb64_cifar100-224px.py',
    ],
)
def test_cifar_configs_read_batches_without_running_code(config, tmp_path):
    from mmpretrain.registry import DATASETS

    from t2t_plugin.runtime import DataFileError

    cfg = Config.fromfile(ROOT / 'configs' / config)
    marker = tmp_path / 'marker'
    for loader in ('train_dataloader', 'test_dataloader'):
        dataset = copy.deepcopy(cfg[loader].dataset)
        folder, names = CIFAR_FILES[dataset.type]
        (tmp_path / folder).mkdir(exist_ok=True)
        for name in names:
            with open(tmp_path / folder / name, 'wb') as f:
                pickle.dump({'data': _RunsCode(marker)}, f)
        dataset.data_root = str(tmp_path)
        with pytest.raises(DataFileError, match='posix.system'):
            DATASETS.build(dataset)
    assert not marker.exists()


# --- every other scheme of mmengine's CheckpointLoader ---------------------

TORCHVISION_RELEASE = 'resnet18-f37072fd.pth'
MMCLS_RELEASE = 'vgg11_batch256_imagenet_20210208-4271cd6c.pth'


@pytest.fixture
def schemes(hub, tmp_path, monkeypatch):
    """Where each scheme resolves, offline: the hub cache for the names of
    torchvision://, mmcls:// and open-mmlab:// (a URL entry), a file of
    MMENGINE_HOME for open-mmlab:// (a local entry), stand-ins of the pavi
    and petrel clients serving one file. Returns a function that writes an
    object where ``scheme`` resolves and gives the path to load and the
    file's name in messages."""
    import types

    from mmengine.runner import checkpoint as mmengine_checkpoint

    home = tmp_path / 'mmengine'
    (home / 'local').mkdir(parents=True)
    monkeypatch.setenv('MMENGINE_HOME', str(home))
    url = mmengine_checkpoint.get_external_models()['detectron/resnet50_caffe']
    (home / 'open_mmlab.json').write_text('{"t2t_tiny": "local/t2t_tiny.pth"}')
    served = tmp_path / 'served.pth'

    class Model:
        name = 'served.pth'

        def download(self, path):
            Path(path).write_bytes(served.read_bytes())

    class Client:
        def __init__(self, *args, **kwargs):
            pass

        def Get(self, path):
            return served.read_bytes()

    pavi = types.ModuleType('pavi')
    pavi.modelcloud = types.SimpleNamespace(get=lambda name: Model())
    petrel = types.ModuleType('petrel_client')
    petrel.client = types.SimpleNamespace(Client=Client)
    monkeypatch.setitem(sys.modules, 'pavi', pavi)
    monkeypatch.setitem(sys.modules, 'petrel_client', petrel)
    monkeypatch.setitem(sys.modules, 'petrel_client.client', petrel.client)

    places = {
        'torchvision://resnet18': hub / TORCHVISION_RELEASE,
        'modelzoo://resnet18': hub / TORCHVISION_RELEASE,
        'mmcls://vgg11': hub / MMCLS_RELEASE,
        'open-mmlab://detectron/resnet50_caffe': hub / url.rsplit('/')[-1],
        'openmmlab://t2t_tiny': home / 'local' / 't2t_tiny.pth',
        'pavi://project/served.pth': served,
        's3://bucket/served.pth': served,
        'cluster:s3://bucket/served.pth': served,
        'petrel://bucket/served.pth': served,
    }

    def place(path, obj):
        torch.save(obj, places[path])
        return places[path] if places[path] != served else path

    return place


SCHEMES = [
    'torchvision://resnet18',
    'modelzoo://resnet18',
    'mmcls://vgg11',
    'open-mmlab://detectron/resnet50_caffe',
    'openmmlab://t2t_tiny',
    'pavi://project/served.pth',
    's3://bucket/served.pth',
    'cluster:s3://bucket/served.pth',
    'petrel://bucket/served.pth',
]


def test_every_mmengine_scheme_is_read_by_the_safe_reader():
    from mmengine.runner import CheckpointLoader

    from t2t_plugin.runtime import checkpoint as ours

    # a scheme of a newer mmengine would keep its own loader: this says so
    assert {
        prefix: loader.__module__
        for prefix, loader in CheckpointLoader._schemes.items()
    } == dict.fromkeys(
        ['', 'http://', 'https://', *ours.CHECKPOINT_SCHEMES], ours.__name__
    )
    prefixes = {p.replace(r'(\S+\:)?', '') for p in ours.CHECKPOINT_SCHEMES}
    # each of them is tested below
    tested = {path.split('://')[0].split(':')[-1] + '://' for path in SCHEMES}
    assert tested == prefixes


@pytest.mark.parametrize('path', SCHEMES)
def test_scheme_payload_never_runs(path, schemes, tmp_path):
    marker = tmp_path / 'marker'
    where = schemes(path, {'state_dict': _RunsCode(marker)})
    expected = (
        f'Cannot read checkpoint {where}: it holds Python objects that '
        "torch's safe loader refuses (GLOBAL posix.system); save the "
        'weights alone (state_dict + meta), or convert it with '
        'tools/model_converters/t2t_vit_official_to_plugin.py '
        '--trust-pickle if it comes from a source you trust.'
    )
    # mmengine's load_checkpoint (the Runner's load_from and resume)
    with pytest.raises(CheckpointError) as error:
        load_checkpoint(torch.nn.Linear(1, 1), path)
    assert str(error.value) == expected
    # Pretrained initialisation of a plain MODELS.build
    backbone = copy.deepcopy(Config.fromfile(DEMO).model.backbone)
    backbone.init_cfg = dict(type='Pretrained', checkpoint=path)
    with pytest.raises(CheckpointError) as error:
        MODELS.build(backbone).init_weights()
    assert str(error.value) == expected
    # mmpretrain's get_model
    with pytest.raises(CheckpointError) as error:
        get_model(DEMO, pretrained=path)
    assert str(error.value) == expected
    assert not marker.exists()


@pytest.mark.parametrize('path', SCHEMES)
def test_scheme_weights_load_as_saved(path, schemes):
    model = _demo_classifier()
    schemes(path, {'state_dict': model.state_dict()})
    if path.startswith('mmcls://'):
        # mmengine's mmcls:// hands over the backbone's weights, bare
        expected = model.backbone.state_dict()
        loaded = MODELS.build(Config.fromfile(DEMO).model).backbone
        load_checkpoint(loaded, path, strict=True)
    else:
        expected = model.state_dict()
        loaded = get_model(DEMO, pretrained=path)
    for key, value in expected.items():
        assert torch.equal(loaded.state_dict()[key], value), key


def test_unknown_scheme_names_say_what_to_give(schemes):
    with pytest.raises(CheckpointError) as error:
        load_checkpoint(torch.nn.Linear(1, 1), 'torchvision://resnet_13')
    assert str(error.value) == (
        'Cannot read checkpoint torchvision://resnet_13: torchvision:// has '
        "no model named 'resnet_13' in mmengine's list; give a name of "
        'that list, a local file or a URL.'
    )
    missing = Path(os.environ['MMENGINE_HOME']) / 'local' / 't2t_tiny.pth'
    with pytest.raises(CheckpointError) as error:
        read_checkpoint('openmmlab://t2t_tiny')
    assert str(error.value) == (
        f'Checkpoint not found: {missing} (where openmmlab://t2t_tiny points).'
    )


def test_the_file_name_stays_out_of_checkpoints_saved_again(tmp_path):
    """The loaders tell the load hooks the file; a checkpoint read and
    saved again (a converter, a slimming script) keeps no trace of it."""
    source = tmp_path / 'source.pth'
    torch.save({'state_dict': _demo_classifier().state_dict()}, source)
    checkpoint = read_checkpoint(source)
    again = tmp_path / 'again.pth'
    torch.save(checkpoint, again)
    assert str(source).encode() not in again.read_bytes()
    reread = torch.load(again, weights_only=True)
    assert type(reread['state_dict']._metadata) is OrderedDict
    state = _demo_classifier().state_dict()
    state['head.layers.head.bias'][0] = float('inf')
    torch.save({'state_dict': state}, again)
    with pytest.raises(CheckpointError) as error:
        get_model(DEMO, pretrained=str(again))
    assert str(error.value).startswith(f'The checkpoint {again} holds NaN')


@pytest.mark.parametrize(
    'path', ['torchvision://resnet18', 'openmmlab://t2t_tiny']
)
def test_scheme_payload_through_load_from_of_the_training_tool(
    path, schemes, tmp_path
):
    from ..helpers import run_main

    marker = tmp_path / 'marker'
    where = schemes(path, {'state_dict': _RunsCode(marker)})
    result = run_main(
        'train',
        DEMO,
        '--work-dir',
        tmp_path / 'work',
        '--cfg-options',
        f'load_from={path}',
    )
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f'Cannot read checkpoint {where}: it holds Python objects that '
        "torch's safe loader refuses (GLOBAL posix.system); save the "
        'weights alone (state_dict + meta), or convert it with '
        'tools/model_converters/t2t_vit_official_to_plugin.py '
        '--trust-pickle if it comes from a source you trust.'
    )
    assert not marker.exists()


# --- one owner per decision, reached by every door ------------------------

OWNERS = {
    # decision: (module, name) of the one function that decides it
    'safe to read': ('t2t_plugin.runtime.checkpoint', 'read_checkpoint'),
    'structure valid': ('t2t_plugin.runtime.checkpoint', 'check_structure'),
    'layout converted': ('t2t_plugin.runtime.checkpoint', 'plugin_layout'),
    'weights fit': ('t2t_plugin.models.checkpoint_checks', 'check_fit'),
    'classes match': (
        't2t_plugin.runtime.hooks.run_check_hook',
        'class_mismatch',
    ),
}


def test_every_door_reaches_each_owner_once_per_load(tmp_path, monkeypatch):
    """Each checkpoint decision has one owner: patched, it is called by
    our tools/test.py, by mmpretrain's get_model and by mmengine's own
    Runner, and the file is read once per load."""
    import importlib

    from ..helpers import run_main

    calls = []

    def counted(decision, owner):
        def wrapper(*args, **kwargs):
            calls.append(decision)
            return owner(*args, **kwargs)

        return wrapper

    for decision, (module, name) in OWNERS.items():
        module = importlib.import_module(module)
        monkeypatch.setattr(
            module, name, counted(decision, getattr(module, name))
        )
    path = tmp_path / 'run.pth'
    classes = [str(digit) for digit in range(10)]
    torch.save(
        {
            'state_dict': _demo_classifier().state_dict(),
            'meta': {'dataset_meta': {'classes': classes}},
        },
        path,
    )
    result = run_main('test', DEMO, path, '--work-dir', tmp_path / 'ours')
    assert result.returncode == 0, result.stderr
    assert set(calls) == set(OWNERS)
    assert calls.count('safe to read') == 1
    calls.clear()
    get_model(DEMO, pretrained=str(path))
    assert set(calls) == set(OWNERS) - {'classes match'}
    assert calls.count('safe to read') == 1
    calls.clear()
    cfg = Config.fromfile(DEMO)
    cfg.work_dir = str(tmp_path / 'runner')
    cfg.load_from = str(path)
    plain_runner(cfg).test()
    assert set(calls) == set(OWNERS)
    assert calls.count('safe to read') == 1


def test_a_checkpoint_is_opened_once_per_load(tmp_path, monkeypatch):
    """Our tools/test.py, mmpretrain's get_model(pretrained=FILE) and a
    load_from run of mmengine's Runner each open the file once (any
    ``open`` of its path: torch.load's, a zip check's) and read it through
    the one reader once."""
    import builtins
    import io

    from t2t_plugin.runtime import checkpoint as reader

    from ..helpers import run_main

    path = tmp_path / 'run.pth'
    torch.save(
        {
            'state_dict': _demo_classifier().state_dict(),
            'meta': {'dataset_meta': {'classes': [str(d) for d in range(10)]}},
        },
        path,
    )
    opened, read = [], []
    plain_open, plain_read = builtins.open, reader.read_checkpoint

    def counted_open(file, *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and Path(file) == path:
            opened.append(file)
        return plain_open(file, *args, **kwargs)

    def counted_read(file, *args, **kwargs):
        read.append(file)
        return plain_read(file, *args, **kwargs)

    for module in (builtins, io):
        monkeypatch.setattr(module, 'open', counted_open)
    monkeypatch.setattr(reader, 'read_checkpoint', counted_read)

    def load_from_run():
        cfg = Config.fromfile(DEMO)
        cfg.work_dir = str(tmp_path / 'runner')
        cfg.load_from = str(path)
        cfg.test_dataloader.dataset.indices = 16
        plain_runner(cfg).test()

    for door, load in (
        (
            'tools/test.py',
            lambda: run_main(
                'test',
                DEMO,
                path,
                '--work-dir',
                tmp_path / 'ours',
                '--cfg-options',
                'test_dataloader.dataset.indices=16',
                check=True,
            ),  # fmt: skip
        ),
        ('get_model', lambda: get_model(DEMO, pretrained=str(path))),
        ('load_from', load_from_run),
    ):
        opened.clear()
        read.clear()
        load()
        assert (len(opened), len(read)) == (1, 1), (door, opened, read)


def test_a_multistep_schedule_checkpoint_is_read(tmp_path):
    """MultiStepLR keeps its milestones in a collections.Counter, which
    torch < 2.4's safe loader does not allow by itself: the run's own
    checkpoint (--resume, tools/test.py) is read on every stack."""
    from collections import Counter

    milestones = Counter({30: 1, 60: 1})
    path = tmp_path / 'epoch_1.pth'
    torch.save(
        dict(
            state_dict=OrderedDict(w=torch.ones(2)),
            param_schedulers=[dict(milestones=milestones, gamma=0.1)],
        ),
        path,
    )
    read = read_checkpoint(str(path))
    assert read['param_schedulers'][0]['milestones'] == milestones
    assert type(read['param_schedulers'][0]['milestones']) is Counter
