"""What happens when things go wrong, through every door: each case is
checked by a registered hook or wrapper of the config, so our tools (run
in-process through ``main(argv)``), a Runner built from the config as any
OpenMMLab tool builds it, and mmpretrain's own ``tools/train.py`` /
``test.py`` stop on the same input with the same line."""

import errno
import pickle
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.registry import RUNNERS
from mmpretrain.registry import DATASETS

from t2t_plugin.runtime import (
    AtomicLocalBackend,
    DataFileError,
    load_data_pickle,
)
from t2t_plugin.runtime.hooks import (
    RunCheckError,
)
from t2t_preflight.errors import ConfigError

from ..helpers import (
    CUSTOM,
    DEMO,
    DIGIT_CLASSES,
    TINY_DEMO,
    as_dict,
    custom_options,
    digit_model,
    door,
    last_line,
    one_line,
    plain_runner,
    run_main,
    run_mmpretrain_tool,
    save_checkpoint,
    write_class_folders,
    write_image,
)

# The demo on 32 training and 16 validation images, one epoch.


# 1. Data files run no code.


class _Payload:
    """Unpickling it would create ``marker`` (a code-execution probe)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), 'w'))


def test_crafted_cifar_batch_runs_no_code(tmp_path):
    folder = tmp_path / 'cifar-10-batches-py'
    folder.mkdir()
    marker = tmp_path / 'marker'
    rows = np.zeros((1, 3 * 32 * 32), np.uint8)
    for name in [f'data_batch_{i}' for i in range(1, 6)] + ['test_batch']:
        with open(folder / name, 'wb') as f:
            pickle.dump({'data': rows, 'labels': [_Payload(marker)]}, f)
    with pytest.raises(DataFileError) as info:
        DATASETS.build(
            dict(type='LocalCIFAR10', data_root=str(tmp_path), split='test')
        )
    assert not marker.exists()
    message = str(info.value)
    assert len(message.splitlines()) == 1
    assert 'io.open' in message and 'test_batch' in message
    assert isinstance(info.value, ValueError)  # the tools' one-line errors


@pytest.mark.parametrize('protocol', [2, 4, 5])
def test_data_pickle_reads_arrays_and_containers(protocol, tmp_path):
    data = {
        'data': np.arange(24, dtype=np.uint8).reshape(2, 12),
        'labels': [3, 7],
        'name': 'batch 1',
        'raw': b'\x00\xff',
        'scale': np.float32(0.5),
    }
    path = tmp_path / 'batch'
    path.write_bytes(pickle.dumps(data, protocol=protocol))
    with open(path, 'rb') as f:
        loaded = load_data_pickle(f, str(path))
    np.testing.assert_array_equal(loaded['data'], data['data'])
    assert loaded['data'].dtype == np.uint8
    assert loaded['labels'] == [3, 7] and loaded['name'] == 'batch 1'
    assert loaded['raw'] == b'\x00\xff' and loaded['scale'] == 0.5


# 2. Class folders, num_classes and the checkpoint's classes.


def test_every_door_gets_the_checks(tmp_path):
    cfg = Config.fromfile(DEMO)
    cfg.work_dir = str(tmp_path)
    runner = plain_runner(cfg)
    names = {type(hook).__name__ for hook in runner.hooks}
    assert {
        'RunCheckHook',
        'RunGuardHook',
        'ExactResumeHook',
        'RunSummaryHook',
        'SaveFirstCheckpointHook',
    } <= names


def test_test_tool_refuses_another_arch_in_one_line(tmp_path):
    arch = dict(
        token_layer='performer',
        embed_dims=32,
        num_layers=2,
        num_heads=2,
        feedforward_channels=64,
    )
    checkpoint = save_checkpoint(
        tmp_path / 'arch.pth', DIGIT_CLASSES, arch=arch
    )
    ours = run_main('test', DEMO, checkpoint, '--work-dir', tmp_path / 'w')
    assert ours.returncode == 1
    line = one_line(ours.stderr)
    # the backbone's own load hook: the same through every loader
    assert line == (
        f'The checkpoint {checkpoint} has embed_dims=32, this T2T-ViT has '
        "64 (arch {'token_layer': 'performer', 'embed_dims': 64, "
        "'num_layers': 4, 'num_heads': 4, 'feedforward_channels': 128}). "
        'Use the arch the checkpoint was trained with.'
    )
    error = door(DEMO, dict(load_from=str(checkpoint)), tmp_path / 'd', 'test')
    assert str(error) == line


# 3. Non-finite losses and weights.


# 4. Bad images, in training, validation and test.


def test_symlink_loop_in_a_class_folder_is_one_line(tmp_path):
    root = write_class_folders(tmp_path / 'data', 3)
    (root / 'train' / 'c0' / 'again').symlink_to('..')
    options = custom_options(root)
    ours = run_main(
        'train', CUSTOM, '--work-dir', tmp_path / 'w', '--cfg-options',
        *options,
    )  # fmt: skip
    assert ours.returncode == 1
    assert one_line(ours.stderr) == (
        f'Cannot read {root}/train/c0/again: a symbolic link loop '
        '(a link to a folder above it); remove or replace the link.'
    )
    error = door(CUSTOM, as_dict(options), tmp_path / 'door')
    assert isinstance(error, OSError) and error.errno == errno.ELOOP
    # the configs' runner: the same line through every tool
    error = door(
        CUSTOM, as_dict(options), tmp_path / 'ours', build=RUNNERS.build
    )
    assert isinstance(error, RunCheckError)
    assert str(error) == one_line(ours.stderr)


# 5. Outputs: writable paths, one training per work dir, a full disk.


def test_a_full_disk_is_one_line(tmp_path, monkeypatch):
    def full(self, obj, filepath):
        raise OSError(errno.ENOSPC, 'No space left on device', str(filepath))

    monkeypatch.setattr(AtomicLocalBackend, 'put', full)
    ours = run_main(
        'train', DEMO, '--work-dir', tmp_path / 'w', '--cfg-options',
        *TINY_DEMO,
    )  # fmt: skip
    assert ours.returncode == 1
    assert one_line(ours.stderr) == (
        'No space left on the device while writing '
        f'{tmp_path}/w/epoch_1.pth: free some space, then resume with '
        '--resume (the last complete checkpoint is kept).'
    )
    # the configs' runner: the same line through every tool
    error = door(
        DEMO, as_dict(TINY_DEMO), tmp_path / 'w2', build=RUNNERS.build
    )
    assert isinstance(error, RunCheckError)
    assert str(error) == one_line(ours.stderr).replace('/w/', '/w2/')


# 6. Resume.


def test_resume_past_max_epochs_says_so(one_epoch, tmp_path):
    work_dir = tmp_path / 'w'
    shutil.copytree(one_epoch, work_dir)
    (work_dir / 'last_checkpoint').write_text(str(work_dir / 'epoch_1.pth'))
    expected = (
        f'Nothing to resume: the checkpoint {work_dir / "epoch_1.pth"} ends '
        'at epoch 1 and train_cfg.max_epochs=1; raise it (--cfg-options) to '
        'train longer, or start a new run in another work dir.'
    )
    ours = run_main(
        'train', DEMO, '--work-dir', work_dir, '--resume', '--cfg-options',
        *TINY_DEMO,
    )  # fmt: skip
    assert ours.returncode == 1 and one_line(ours.stderr) == expected
    # RunCheckHook removes what a hard kill left while saving, before the
    # resume: through mmpretrain's tool too, in the work dir and in the
    # checkpoint folder of an out_dir (out_dir/<work dir's name>)
    saved_in = tmp_path / 'out' / 'w'
    saved_in.mkdir(parents=True)
    stale = [d / '.epoch_2.pth.k2x_9abq.tmp' for d in (work_dir, saved_in)]
    for path in stale:
        path.write_bytes(b'half a checkpoint')
    theirs = run_mmpretrain_tool(
        'train', DEMO, '--work-dir', work_dir, '--resume', '--cfg-options',
        *TINY_DEMO, f'default_hooks.checkpoint.out_dir={tmp_path / "out"}',
    )  # fmt: skip
    assert theirs.returncode == 1
    assert last_line(theirs.stderr).endswith(': ' + expected)
    assert not any(path.exists() for path in stale)
    for folder in (work_dir, saved_in):
        assert (
            f'Removed 1 temporary checkpoint file(s) left in {folder} by an '
            'interrupted save.'
        ) in theirs.stdout


def test_resume_reads_each_checkpoint_once(one_epoch, tmp_path, monkeypatch):
    work_dir = tmp_path / 'w'
    shutil.copytree(one_epoch, work_dir)
    reads = Counter()
    load = torch.load

    def counted(f, *args, **kwargs):
        reads[str(f)] += 1
        return load(f, *args, **kwargs)

    monkeypatch.setattr(torch, 'load', counted)
    options = [*TINY_DEMO, 'train_cfg.max_epochs=2']
    for resume in ([str(work_dir / 'epoch_1.pth')], []):  # a path, auto
        ours = run_main(
            'train', DEMO, '--work-dir', work_dir, '--verbose', '--resume',
            *resume, '--cfg-options', *options,
        )  # fmt: skip
        assert ours.returncode == 0, ours.stderr[-2000:]
        assert 'resumed epoch: 1,' in ours.stdout
        assert dict(reads) == {str(work_dir / 'epoch_1.pth'): 1}
        reads.clear()
        (work_dir / 'epoch_2.pth').unlink()
        (work_dir / 'last_checkpoint').write_text(
            str(work_dir / 'epoch_1.pth')
        )


def training_checkpoint(path: Path, **backbone) -> Path:
    torch.save(
        dict(
            meta=dict(
                epoch=1,
                iter=10,
                dataset_meta=dict(classes=tuple(DIGIT_CLASSES)),
            ),
            state_dict=digit_model(**backbone).state_dict(),
            optimizer={},
            message_hub={},
        ),
        path,
    )
    return path


@pytest.mark.parametrize('case', ['slim', 'other_model', 'missing'])
def test_resume_mistakes_are_one_line(case, tmp_path):
    if case == 'slim':
        checkpoint = save_checkpoint(tmp_path / 'slim.pth', DIGIT_CLASSES)
        expected = (
            f'{checkpoint} holds weights only (no epoch, optimizer or '
            'scheduler state), so training cannot resume from it; start a '
            'new run from its weights with --cfg-options '
            f'load_from={checkpoint} instead of --resume.'
        )
    elif case == 'other_model':
        arch = dict(embed_dims=32, num_layers=2, num_heads=2)
        checkpoint = training_checkpoint(tmp_path / 'other.pth', arch=arch)
        expected = (
            f'The checkpoint {checkpoint} has embed_dims=32, this T2T-ViT '
            'has 64'
        )
    else:
        checkpoint = tmp_path / 'missing.pth'
        expected = (
            f'Checkpoint not found: expected {checkpoint} (see '
            'docs/training.md#training).'
        )
    ours = run_main(
        'train', DEMO, '--work-dir', tmp_path / 'w', '--resume', checkpoint
    )
    assert ours.returncode == 1
    line = one_line(ours.stderr)
    assert line.startswith(expected)
    options = dict(resume=True, load_from=str(checkpoint))
    assert str(door(DEMO, options, tmp_path / 'door')) == line


# 7. Option values.


@pytest.mark.parametrize(
    'option, expected',
    [
        (
            'optim_wrapper.optimizer.lrr=0.1',
            "optim_wrapper.optimizer.lrr: AdamW takes no argument 'lrr'; did "
            "you mean 'lr'?",
        ),
        (
            'optim_wrapper.optimizer.lr=-0.1',
            'optim_wrapper: ValueError: Invalid learning rate: -0.1',
        ),
        (
            'param_scheduler.0.start_factor=2.0',
            'param_scheduler: ValueError: Starting multiplicative factor '
            'should between 0 and 1.; check the schedule settings of the '
            'config and --cfg-options.',
        ),
        (
            'param_scheduler.1.end=3',
            'param_scheduler.1: the CosineAnnealingLR begins at epoch 5 and '
            'ends at epoch 3 (train_cfg.max_epochs=40); give it a begin '
            'below its end (a warm-up must be shorter than training).',
        ),
        (
            'train_cfg.val_interval=0',
            'train_cfg.val_interval must be a whole number >= 1, got 0; use '
            '--no-validate to skip evaluation.',
        ),
        (
            'train_dataloder.batch_size=8',
            f'Invalid options for {DEMO}: --cfg-options '
            'train_dataloder.batch_size: the config has no key '
            "'train_dataloder'; did you mean 'train_dataloader'?",
        ),
    ],
)
def test_option_values_are_checked(option, expected, tmp_path):
    ours = run_main(
        'train', DEMO, '--work-dir', tmp_path / 'w', '--cfg-options', option
    )
    assert ours.returncode in (1, 2)
    assert one_line(ours.stderr).startswith(expected)
    if option.startswith(('optim_wrapper', 'param_scheduler')):
        # the configs' runner's line, as it builds or as it trains
        try:
            error = door(
                DEMO, as_dict([option]), tmp_path / 'door',
                build=RUNNERS.build,
            )  # fmt: skip
        except ConfigError as raised:
            error = raised
        assert isinstance(error, ConfigError)
        assert str(error) == one_line(ours.stderr)
    if option == 'train_cfg.val_interval=0':
        error = door(DEMO, as_dict([option]), tmp_path / 'door')
        assert isinstance(error, RunCheckError) and str(error) == expected


# 8. A frozen rank ends a distributed run within the timeout.


@pytest.mark.parametrize(
    'tool', ['analysis_tools/get_flops', 'visualization/vis_features']
)
def test_broken_config_is_one_line_in_other_tools(tool, tmp_path):
    config = tmp_path / 'broken.py'
    config.write_text('model = dict(\n')
    image = write_image(
        tmp_path / 'digit.png', (8, 8), content='flat', mode='L'
    )
    args = (
        [str(config)]
        if 'get_flops' in tool
        else [str(image), str(config), str(config)]
    )
    result = run_main(tool, *args)
    assert result.returncode == 1
    assert one_line(result.stderr).startswith('error: ')
    assert 'never closed' in result.stderr
