"""The decisions table of docs/architecture.md: each owner, patched where
its doors look it up, answers through two doors (our tools' pre-flight or
tool, and the runner, mmengine's own Runner, ``MODELS.build`` or
``get_model``).

Rows tested elsewhere: the checkpoint read, its structure, its layout, the
weights' fit and its classes
(test_checkpoint.py::test_every_door_reaches_each_owner_once_per_load),
the start point
(test_hooks/test_exact_resume_hook.py::test_every_door_asks_start_point),
the output path
(test_config_outputs.py::test_every_door_asks_output_problem)."""

import importlib

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import RUNNERS
from mmpretrain.apis import get_model
from mmpretrain.registry import MODELS

from t2t_plugin.runtime import CheckpointError
from t2t_plugin.runtime.hooks import (
    exact_resume_hook,
    run_check_hook,
)
from t2t_preflight import archs, arguments, checks, inputs
from t2t_preflight.errors import ConfigError, RunCheckError

from ..helpers import (
    DEMO,
    DIGIT_CLASSES,
    ROOT,
    TINY_DEMO,
    as_dict,
    digit_model,
    door,
    load_tool_package,
    run_main,
    save_checkpoint,
    write_class_folders,
    write_image,
)

LITE = str(ROOT / 'configs' / 't2t-vit-lite_1xb64_custom-32px.py')
REFUSED = 'refused by the owner'


def demo_cfg(work_dir, **options) -> Config:
    cfg = Config.fromfile(DEMO)
    cfg.merge_from_dict(dict(work_dir=str(work_dir), **options))
    return cfg


def refused_by_our_tool(tool: str, *args, code: int = 1) -> str:
    """The one line ``tools/<tool>.py`` ended with ``code``."""
    result = run_main(tool, *args)
    assert result.returncode == code, result.stderr[-3000:]
    return result.stderr.strip().splitlines()[-1]


def test_the_checkpoint_exists(monkeypatch, tmp_path):
    """An existing file refused by the patched owner: the pre-flight of
    tools/test.py, the configs' runner, RunCheckHook under
    mmengine's own Runner and the reader (get_model)."""
    checkpoint = save_checkpoint(tmp_path / 'm.pth', DIGIT_CLASSES)
    expected = f'{checkpoint}: {REFUSED}'

    def owner(path, doc=None):
        return f'{path}: {REFUSED}'

    monkeypatch.setattr(inputs, 'missing_checkpoint', owner)
    monkeypatch.setattr(
        't2t_plugin.runtime.checkpoint.missing_checkpoint', owner
    )
    assert (
        refused_by_our_tool(
            'test', DEMO, checkpoint, '--work-dir', tmp_path / 'ours'
        )
        == expected
    )
    with pytest.raises(ConfigError, match=expected):
        RUNNERS.build(demo_cfg(tmp_path / 'runner', load_from=checkpoint))
    error = door(
        DEMO, dict(load_from=str(checkpoint)), tmp_path / 'host', 'test'
    )
    assert isinstance(error, RunCheckError)
    assert str(error) == expected
    with pytest.raises(CheckpointError, match=expected):
        get_model(DEMO, pretrained=str(checkpoint))


def test_data_present(monkeypatch, tmp_path):
    """Asked by tools/train.py and tools/test.py after the models' import,
    on the loaders each reads; the other doors have the dataset's own
    error."""

    def owner(cfg, dataloaders):
        return [f'{", ".join(dataloaders)}: {REFUSED}']

    monkeypatch.setattr(arguments, 'find_missing_data', owner)
    assert (
        refused_by_our_tool('train', DEMO, '--work-dir', tmp_path / 'a')
        == f'train_dataloader, val_dataloader: {REFUSED}'
    )
    checkpoint = save_checkpoint(tmp_path / 'm.pth', DIGIT_CLASSES)
    assert (
        refused_by_our_tool(
            'test', DEMO, checkpoint, '--work-dir', tmp_path / 'b'
        )
        == f'test_dataloader: {REFUSED}'
    )


def test_class_folders_against_the_head(monkeypatch, tmp_path):
    """Our tools before the Runner (where the run has RunCheckHook), and
    RunCheckHook under mmengine's own Runner."""
    root = write_class_folders(tmp_path / 'data', 3)
    asked = []

    def owner(key, classes, num_classes, *args, **kwargs):
        asked.append(key)
        return f'{key}: {len(classes)} folders, {REFUSED}'

    monkeypatch.setattr(inputs, 'class_count_message', owner)
    monkeypatch.setattr(run_check_hook, 'class_count_message', owner)
    options = {
        f'{loader}.dataset.data_root': str(root)
        for loader in ('train_dataloader', 'val_dataloader')
    }
    assert (
        refused_by_our_tool(
            'train',
            LITE,
            '--work-dir',
            tmp_path / 'ours',
            '--cfg-options',
            *(f'{key}={value}' for key, value in options.items()),
        )  # fmt: skip
        == f'train_dataloader: 3 folders, {REFUSED}'
    )
    error = door(LITE, options, tmp_path / 'host')
    assert isinstance(error, RunCheckError)
    assert str(error) == f'train_dataloader: 3 folders, {REFUSED}'
    assert asked == ['train_dataloader', 'train_dataloader']


def test_keys_of_a_config(monkeypatch, tmp_path):
    """Our tools/train.py (the runner it builds) and the configs' runner
    as mmpretrain's tools build it."""
    monkeypatch.setattr(checks, 'misspelt_keys', lambda cfg: 'owner: no')
    assert (
        refused_by_our_tool('train', DEMO, '--work-dir', tmp_path / 'ours')
        == 'owner: no'
    )
    with pytest.raises(ConfigError, match='^owner: no$'):
        RUNNERS.build(demo_cfg(tmp_path / 'runner'))
    assert not (tmp_path / 'ours').exists()
    assert not (tmp_path / 'runner').exists()


def test_arch_name(monkeypatch, tmp_path):
    """The pre-flight of tools/train.py, and T2TViT as it is built
    (MODELS.build, get_model)."""

    def owner(arch):
        raise ValueError(REFUSED)

    monkeypatch.setattr(archs, 'resolve_arch', owner)
    monkeypatch.setattr(
        't2t_plugin.models.backbones.t2t_vit.resolve_arch', owner
    )
    assert (
        refused_by_our_tool('train', DEMO, '--work-dir', tmp_path / 'a')
        == f'model.backbone.arch: {REFUSED}'
    )
    with pytest.raises(ValueError, match=REFUSED):
        MODELS.build(Config.fromfile(DEMO).model)
    with pytest.raises(ValueError, match=REFUSED):
        get_model(DEMO)


def test_schedule_valid(monkeypatch, tmp_path):
    """empty_scheduler: our tools/train.py and the configs' runner."""
    monkeypatch.setattr(checks, 'empty_scheduler', lambda cfg: REFUSED)
    assert (
        refused_by_our_tool('train', DEMO, '--work-dir', tmp_path / 'ours')
        == REFUSED
    )
    with pytest.raises(ConfigError, match=REFUSED):
        RUNNERS.build(demo_cfg(tmp_path / 'runner'))


def test_a_scheduler_that_spans_nothing(monkeypatch, tmp_path):
    """spans_nothing: the runner's build_param_scheduler, as our
    tools/train.py and mmpretrain's (RUNNERS.build) start training."""
    from t2t_plugin.runtime import sample_seeded_runner

    asked = []

    def owner(scheduler):
        asked.append(scheduler['type'])
        raise ConfigError(REFUSED)

    monkeypatch.setattr(sample_seeded_runner, 'spans_nothing', owner)
    assert (
        refused_by_our_tool('train', DEMO, '--work-dir', tmp_path / 'ours')
        == REFUSED
    )
    with pytest.raises(ConfigError, match=REFUSED):
        RUNNERS.build(demo_cfg(tmp_path / 'runner')).train()
    first = Config.fromfile(DEMO).param_scheduler[0]['type']
    assert asked == [first, first]


def test_topk_within_the_classes(monkeypatch, tmp_path):
    """Our tools/test.py and the configs' runner."""
    monkeypatch.setattr(checks, 'topk_problem', lambda cfg: REFUSED)
    checkpoint = save_checkpoint(tmp_path / 'm.pth', DIGIT_CLASSES)
    assert (
        refused_by_our_tool(
            'test', DEMO, checkpoint, '--work-dir', tmp_path / 'ours'
        )
        == REFUSED
    )
    with pytest.raises(ConfigError, match=REFUSED):
        RUNNERS.build(demo_cfg(tmp_path / 'runner'))


@pytest.mark.parametrize('owner_name', ['after_load_checkpoint', 'settings'])
def test_what_a_resume_keeps(owner_name, monkeypatch, tmp_path):
    """ExactResumeHook, the owner of what a resume deletes (its
    after_load_checkpoint) and of the settings it names
    (settings_changes): a resume of our tools/train.py and of mmengine's
    own Runner with the config's hooks."""
    checkpoint = tmp_path / 'epoch_1.pth'
    torch.save(
        dict(
            state_dict=digit_model().state_dict(),
            optimizer={},
            meta=dict(
                dataset_meta=dict(classes=tuple(DIGIT_CLASSES)),
                epoch=1,
                iter=1,
                train_settings=dict(batch_size=16, lr=[0.002]),
            ),
        ),
        checkpoint,
    )
    asked = []

    def owner(*args, **kwargs):
        asked.append(owner_name)
        raise RunCheckError(REFUSED)

    if owner_name == 'settings':
        monkeypatch.setattr(exact_resume_hook, 'settings_changes', owner)
    else:
        monkeypatch.setattr(
            exact_resume_hook.ExactResumeHook, 'after_load_checkpoint', owner
        )
    assert (
        refused_by_our_tool(
            'train',
            DEMO,
            '--resume',
            checkpoint,
            '--work-dir',
            tmp_path / 'ours',
            '--cfg-options',
            *TINY_DEMO,
        )  # fmt: skip
        == REFUSED
    )
    options = dict(as_dict(TINY_DEMO), resume=True, load_from=str(checkpoint))
    error = door(DEMO, options, tmp_path / 'host')
    assert isinstance(error, RunCheckError)
    assert str(error) == REFUSED
    assert asked == [owner_name, owner_name]


def test_an_export_replaces_only_once_complete(monkeypatch, tmp_path):
    """export_onnx: tools/deployment/pytorch2onnx.py and the benchmark's
    exports of .dev_scripts."""
    import t2t_plugin.deployment

    asked = []

    def owner(model, path, *args, **kwargs):
        asked.append(path)
        raise OSError(REFUSED)

    monkeypatch.setattr(t2t_plugin.deployment, 'export_onnx', owner)
    checkpoint = save_checkpoint(tmp_path / 'm.pth', DIGIT_CLASSES)
    out = tmp_path / 'm.onnx'
    assert refused_by_our_tool(
        'deployment/pytorch2onnx', DEMO, checkpoint, out, code=2
    ).endswith(REFUSED)
    load_tool_package('.dev_scripts/benchmark_lib')
    runtimes = importlib.import_module('benchmark_lib.runtimes')
    monkeypatch.setattr(runtimes, 'export_onnx', owner)
    with pytest.raises(OSError, match=REFUSED):
        runtimes.export_backbone(
            digit_model().backbone, tmp_path, ('onnxruntime',)
        )
    assert asked == [out, tmp_path / 'backbone.onnx']


def test_device_usable(monkeypatch, tmp_path):
    """tools/infer.py and tools/visualization/vis_features.py."""
    from t2t_plugin.apis import ArgumentRefused
    from t2t_plugin.cli import options

    def owner(device):
        raise ArgumentRefused(f'--device {device}: {REFUSED}')

    monkeypatch.setattr(options, 'check_device', owner)
    checkpoint = save_checkpoint(tmp_path / 'm.pth', DIGIT_CLASSES)
    image = write_image(tmp_path / 'a.png')
    for tool, args in (
        ('infer', [image, DEMO, checkpoint]),
        ('visualization/vis_features', [image, DEMO, checkpoint]),
    ):
        line = refused_by_our_tool(tool, *args, '--device', 'cpu', code=2)
        assert line.endswith(f'error: --device cpu: {REFUSED}'), tool
