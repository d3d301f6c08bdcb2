"""What happens when things go wrong, through every door: each case is
checked by a registered hook or wrapper of the config, so our tools (run
in-process through ``main(argv)``), a Runner built from the config as any
OpenMMLab tool builds it, and mmpretrain's own ``tools/train.py`` /
``test.py`` stop on the same input with the same line."""

import argparse
import errno
import json
import math
import os
import pickle
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from mmengine.config import Config, DictAction
from mmengine.evaluator import DumpResults
from mmengine.registry import RUNNERS
from mmengine.runner import Runner
from mmpretrain.registry import DATASETS, MODELS
from PIL import Image

from t2t_plugin.datasets import (
    SkipBadImages,
    UnsafePickleError,
    load_data_pickle,
)
from t2t_plugin.engine import (
    AtomicLocalBackend,
    CheckpointMismatchError,
    newest_intact_checkpoint,
)
from t2t_plugin.engine.hooks import (
    BadImageHook,
    DiskFullError,
    NonFiniteGuardHook,
    NonFiniteLossError,
    RunCheckError,
    TooManyBadImagesError,
    class_mismatch,
    release_locks,
    work_dir_hook,
)
from t2t_plugin.engine.hooks.run_check_hook import pipeline_problem

from ..helpers import (
    DEMO,
    ROOT,
    free_port,
    last_line,
    run_main,
    run_mmpretrain_tool,
)

CUSTOM = str(ROOT / 'configs' / 't2t-vit-7_1xb64_custom-64px.py')
DIGIT_CLASSES = [str(i) for i in range(10)]
# The demo on 32 training and 16 validation images, one epoch.
TINY_DEMO = [
    'train_cfg.max_epochs=1',
    'train_cfg.val_interval=1',
    'train_dataloader.batch_size=16',
    'train_dataloader.dataset.indices=32',
    'val_dataloader.dataset.indices=16',
    'default_hooks.checkpoint.interval=1',
    'default_hooks.logger.interval=1',
]


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert 'Traceback' not in err
    return lines[0]


def door(
    config: str,
    options: dict,
    work_dir: Path,
    mode: str = 'train',
    build=Runner.from_cfg,
):
    """What a Runner built from the config raises (None if it runs
    through): mmengine's own Runner, or with ``build=RUNNERS.build`` the
    config's ``runner_type``, as the OpenMMLab tools build it."""
    cfg = Config.fromfile(config)
    cfg.merge_from_dict(options)
    cfg.work_dir = str(work_dir)
    runner = build(cfg)
    try:
        getattr(runner, mode)()
    except Exception as error:
        release_locks()  # as the process's end would
        return error
    return None


def as_dict(options: list) -> dict:
    """``--cfg-options`` as mmengine's argument parser reads them."""
    namespace = argparse.Namespace()
    DictAction(None, 'cfg_options')(None, namespace, options)
    return namespace.cfg_options


def digit_model(**backbone):
    model_cfg = Config.fromfile(DEMO).model
    model_cfg.backbone.update(backbone)
    return MODELS.build(model_cfg)


def write_png(path: Path, size=(8, 8), mode='L') -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new(mode, size, 128).save(path)
    return path


def image_folders(root: Path, classes: int, per_class: int = 2) -> Path:
    """``train/`` and ``val/`` with ``classes`` class folders of images."""
    for split in ('train', 'val'):
        for label in range(classes):
            for index in range(per_class):
                write_png(
                    root / split / f'c{label}' / f'{index}.png',
                    size=(40, 40),
                    mode='RGB',
                )
    return root


def custom_options(root: Path) -> list:
    options = ['train_cfg.max_epochs=1', 'train_dataloader.batch_size=2']
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        options += [
            f'{loader}.dataset.data_root={root}',
            f'{loader}.num_workers=0',
            f'{loader}.persistent_workers=False',
        ]
    return options


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
    with pytest.raises(UnsafePickleError) as info:
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
    runner = Runner.from_cfg(cfg)
    names = {type(hook).__name__ for hook in runner.hooks}
    assert {
        'RunCheckHook',
        'CheckpointCheckHook',
        'WorkDirHook',
        'BadImageHook',
        'NonFiniteGuardHook',
        'NonFiniteOutputHook',
        'RandomStateHook',
        'RankHeartbeatHook',
    } <= names


@pytest.mark.parametrize('folders', [4, 1])
def test_class_folders_must_match_num_classes(folders, tmp_path):
    root = image_folders(tmp_path / 'data', folders)
    options = custom_options(root)
    names = ', '.join(f'c{i}' for i in range(folders))
    expected = (
        f'train_dataloader: the dataset has {folders} classes in '
        f'{root}/train ({names}), but model.head.num_classes=3; set '
        'model.head.num_classes (and data_preprocessor.num_classes) to '
        f'{folders}, or give the dataset 3 class folders.'
    )
    ours = run_main(
        'train', CUSTOM, '--work-dir', tmp_path / 'ours',
        '--cfg-options', *options,
    )  # fmt: skip
    assert ours.returncode == 1
    assert one_line(ours.stderr) == expected
    if folders == 4:  # mmpretrain's own tool: its traceback ends with ours
        theirs = run_mmpretrain_tool(
            'train', CUSTOM, '--work-dir', tmp_path / 'theirs',
            '--cfg-options', *options,
        )  # fmt: skip
        assert theirs.returncode == 1
        assert last_line(theirs.stderr).endswith(': ' + expected)
    else:
        error = door(CUSTOM, as_dict(options), tmp_path / 'door')
        assert isinstance(error, RunCheckError) and str(error) == expected


def test_empty_class_folder_is_refused(tmp_path):
    root = image_folders(tmp_path / 'data', 3)
    for split in ('train', 'val'):
        shutil.rmtree(root / split / 'c1')
        (root / split / 'c1').mkdir()
    options = custom_options(root)
    ours = run_main(
        'train', CUSTOM, '--work-dir', tmp_path / 'w', '--cfg-options',
        *options,
    )  # fmt: skip
    line = one_line(ours.stderr)
    assert line == (
        f'train_dataloader: class folder(s) c1 in {root}/train hold no '
        'images but still take a label index, shifting every label after '
        'them; remove the empty folders or add their images.'
    )
    assert str(door(CUSTOM, as_dict(options), tmp_path / 'door')) == line


def test_class_mismatch_names_counts_and_a_few_names():
    many = tuple(f'n{i:04d}' for i in range(1000))
    message = class_mismatch(
        dict(meta=dict(dataset_meta=dict(classes=many))),
        ['cat', 'emu'],
        'model.pth',
    )
    assert message == (
        'model.pth was trained on 1000 classes (n0000, n0001, n0002, '
        'n0003, n0004 and 995 more), but the dataset has 2 classes (cat, '
        'emu)'
    )
    assert class_mismatch(dict(meta={}), ['a'], 'x.pth') is None
    same = dict(meta=dict(dataset_meta=dict(classes=('a',))))
    assert class_mismatch(same, ['a'], 'x.pth') is None


def save_checkpoint(path: Path, classes, **backbone) -> Path:
    torch.save(
        dict(
            state_dict=digit_model(**backbone).state_dict(),
            meta=dict(dataset_meta=dict(classes=tuple(classes))),
        ),
        path,
    )
    return path


def test_fine_tuning_on_other_classes_warns_in_one_short_line(tmp_path):
    many = [f'n{i:04d}' for i in range(1000)]
    pretrained = save_checkpoint(tmp_path / 'in1k.pth', many)
    options = [*TINY_DEMO, f'load_from={pretrained}']
    ours = run_main(
        'train', DEMO, '--work-dir', tmp_path / 'ours', '--cfg-options',
        *options,
    )  # fmt: skip
    assert ours.returncode == 0, ours.stderr[-2000:]
    line = next(ln for ln in ours.stdout.splitlines() if 'load_from:' in ln)
    assert line.endswith(
        f'load_from: {pretrained} was trained on 1000 classes (n0000, '
        'n0001, n0002, n0003, n0004 and 995 more), but the dataset has 10 '
        'classes (0, 1, 2, 3, 4 and 5 more); its head is loaded as it is (to '
        'start a new head, load the backbone only, see docs/weights.md).'
    )
    assert len(line) < 400


def test_test_tool_refuses_a_checkpoint_of_other_classes(tmp_path):
    classes = [f'c{i}' for i in range(10)]
    checkpoint = save_checkpoint(tmp_path / 'other.pth', classes)
    expected = (
        f'{checkpoint} was trained on 10 classes (c0, c1, c2, c3, c4 and 5 '
        'more), but the dataset has 10 classes (0, 1, 2, 3, 4 and 5 more); '
        'the labels would not match (check the dataset folders or the '
        'checkpoint).'
    )
    ours = run_main('test', DEMO, checkpoint, '--work-dir', tmp_path / 'w')
    assert ours.returncode == 1 and one_line(ours.stderr) == expected
    error = door(DEMO, dict(load_from=str(checkpoint)), tmp_path / 'd', 'test')
    assert isinstance(error, CheckpointMismatchError)
    assert str(error) == expected


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


def fake_runner(model=None):
    return SimpleNamespace(iter=0, epoch=0, model=model)


def test_guard_stops_after_consecutive_non_finite_losses():
    hook = NonFiniteGuardHook(max_consecutive=3)
    runner = fake_runner()
    losses = [1.0, math.nan, math.inf, 2.0, math.nan, math.nan]
    for step, loss in enumerate(losses):
        runner.iter = step
        hook.after_train_iter(
            runner, step, outputs={'loss': torch.tensor(loss)}
        )
    runner.iter = 6
    with pytest.raises(NonFiniteLossError) as info:
        hook.after_train_iter(
            runner, 6, outputs={'loss': torch.tensor(math.nan)}
        )
    message = str(info.value)
    assert message.startswith(
        'Training stopped at iteration 7: loss is nan '
        'for 3 iterations in a row.'
    )
    assert 'learning rate' in message and '--amp' in message
    assert 'clip_grad' in message


def test_guard_never_saves_non_finite_weights():
    model = torch.nn.Linear(2, 2)
    hook = NonFiniteGuardHook()
    hook.before_save_checkpoint(
        fake_runner(model), {'state_dict': model.state_dict()}
    )
    with torch.no_grad():
        model.bias[1] = math.inf
    with pytest.raises(NonFiniteLossError, match='weight bias is NaN'):
        hook.before_save_checkpoint(
            fake_runner(model), {'state_dict': model.state_dict()}
        )
    with pytest.raises(NonFiniteLossError, match='no checkpoint is saved'):
        hook.after_train_epoch(fake_runner(model))


def test_diverging_training_stops_in_one_line(tmp_path):
    work_dir = tmp_path / 'work'
    ours = run_main(
        'train', DEMO, '--work-dir', work_dir, '--cfg-options',
        'optim_wrapper.optimizer.lr=1e5', 'train_cfg.max_epochs=4',
        'train_dataloader.batch_size=16',
        'train_dataloader.dataset.indices=64',
        'default_hooks.checkpoint.interval=1', 'train_cfg.val_interval=10',
        'default_hooks.non_finite.max_consecutive=2',
    )  # fmt: skip
    assert ours.returncode == 1, ours.stderr[-2000:]
    assert one_line(ours.stderr).startswith('Training stopped ')
    for path in work_dir.glob('epoch_*.pth'):
        state = torch.load(path)['state_dict']
        assert all(
            torch.isfinite(v).all()
            for v in state.values()
            if v.is_floating_point()
        ), path


# 4. Bad images, in training, validation and test.


def bad_image_folder(root: Path) -> None:
    write_png(root / 'a' / 'good0.png')
    write_png(root / 'a' / 'good1.png')
    write_png(root / 'b' / 'good2.png')
    (root / 'a' / 'empty.png').write_bytes(b'')
    (root / 'a' / 'text.png').write_text('not an image')
    data = (root / 'a' / 'good0.png').read_bytes()
    (root / 'b' / 'truncated.png').write_bytes(data[: len(data) // 2])
    write_png(root / 'b' / 'odd.png', size=(9, 9))


@pytest.mark.parametrize('test_mode', [False, True])
def test_bad_images_are_replaced_counted_and_limited(test_mode, tmp_path):
    bad_image_folder(tmp_path)
    dataset = DATASETS.build(
        dict(
            type='CustomDataset',
            data_root=str(tmp_path),
            test_mode=test_mode,
            pipeline=[
                dict(type='LoadImageFromFile', color_type='grayscale'),
                dict(type='PackInputs'),
            ],
        )
    )
    wrapper = SkipBadImages.wrap(dataset, in_channels=1, size_multiple=2)
    assert SkipBadImages.wrap(dataset) is wrapper  # once
    names = [
        Path(dataset[i]['data_samples'].img_path).name
        for i in range(len(dataset))
    ]
    # a/empty a/good0 a/good1 a/text b/good2 b/odd b/truncated: each bad
    # one is replaced by the next usable one (b/truncated by a/good0)
    assert names == [
        'good0.png',
        'good0.png',
        'good1.png',
        'good2.png',
        'good2.png',
        'good0.png',
        'good0.png',
    ]
    time.sleep(0.2)  # the queue's feeder thread
    reports = wrapper.drain()
    assert {Path(path).name for path, _ in reports} == {
        'empty.png',
        'odd.png',
        'text.png',
        'truncated.png',
    }
    odd = next(p for path, p in reports if path.endswith('odd.png'))
    assert (
        odd == '9x9 pixels after the pipeline, not multiples of the stride 2'
    )
    hook = BadImageHook(max_bad_images=3)
    hook.wrappers = {'test_dataloader': [wrapper]}
    for report in reports:
        wrapper.reports.put(report)
    time.sleep(0.2)
    with pytest.raises(TooManyBadImagesError, match='4 different images'):
        hook.after_test_iter(fake_runner(), 0)


def test_a_bad_validation_image_is_skipped_and_counted(tmp_path):
    root = image_folders(tmp_path / 'data', 3)
    empty = root / 'val' / 'c1' / '0.png'
    empty.write_bytes(b'')
    options = custom_options(root) + ['train_cfg.val_interval=1']
    ours = run_main(
        'train', CUSTOM, '--work-dir', tmp_path / 'w', '--cfg-options',
        *options,
    )  # fmt: skip
    assert ours.returncode == 0, ours.stderr[-2000:]
    assert (
        'Evaluation: skipped 1 sample(s) from 1 image(s) that could not be '
        f'used (each replaced by the next image): {empty}'
    ) in ours.stdout
    checkpoint = tmp_path / 'w' / 'epoch_1.pth'
    tested = run_main(
        'test', CUSTOM, checkpoint, '--work-dir', tmp_path / 'w',
        '--cfg-options', *options,
    )  # fmt: skip
    assert tested.returncode == 0, tested.stderr[-2000:]
    assert 'Test: skipped 1 sample(s) from 1 image(s)' in tested.stdout
    assert 'accuracy/top1: ' in tested.stdout
    # a Runner of the config, as mmpretrain's test.py builds it
    cfg = Config.fromfile(CUSTOM)
    cfg.merge_from_dict(as_dict(options))
    cfg.merge_from_dict(
        dict(work_dir=str(tmp_path / 'd'), load_from=str(checkpoint))
    )
    runner = Runner.from_cfg(cfg)
    runner.test()
    hook = next(h for h in runner.hooks if isinstance(h, BadImageHook))
    assert hook.bad == {str(empty)}


def test_untileable_pipeline_size_is_one_line():
    t2t = digit_model().backbone.tokens_to_token  # strides 1, 1, 2
    problem = pipeline_problem(
        [dict(type='RandomCrop', crop_size=7), dict(type='PackInputs')], t2t
    )
    assert problem.startswith('T2T-ViT cannot tile a 7x7 input')
    assert (
        pipeline_problem([dict(type='RandomCrop', crop_size=8)], t2t) is None
    )
    assert pipeline_problem([dict(type='LoadImageFromFile')], t2t) == (
        'loads 3-channel images, but the backbone takes in_channels=1; set '
        "model.backbone.in_channels or LoadImageFromFile's color_type to "
        'match.'
    )


def test_symlink_loop_in_a_class_folder_is_one_line(tmp_path):
    root = image_folders(tmp_path / 'data', 3)
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


# 5. Outputs: writable paths, one training per work dir, a full disk.


@pytest.mark.parametrize('option', ['--out', '--show-dir', '--work-dir'])
def test_output_paths_are_checked_before_the_work(option, tmp_path):
    blocker = tmp_path / 'a_file'
    blocker.write_text('')
    checkpoint = save_checkpoint(tmp_path / 'm.pth', DIGIT_CLASSES)
    target = blocker / 'out.pkl'
    args = [DEMO, checkpoint, '--work-dir', tmp_path / 'w']
    args += [option, target] if option != '--work-dir' else []
    if option == '--work-dir':
        args[3] = target
    ours = run_main('test', *args)
    assert ours.returncode == 1
    assert one_line(ours.stderr) == (
        f'{option} {target}: {blocker} is a file, not a folder.'
    )
    assert 'accuracy' not in ours.stdout
    if option == '--work-dir':
        return  # the Runner makes the folder: mmengine's own OSError
    # what mmpretrain's test.py makes of --out and --show-dir
    cfg = Config.fromfile(DEMO)
    cfg.merge_from_dict(
        dict(work_dir=str(tmp_path / 'd'), load_from=str(checkpoint))
    )
    if option == '--show-dir':
        cfg.default_hooks.visualization.update(
            enable=True, out_dir=str(target)
        )
    runner = Runner.from_cfg(cfg)
    if option == '--out':
        runner.test_evaluator.metrics.append(DumpResults(str(target)))
    with pytest.raises(RunCheckError) as info:
        runner.test()
    assert str(info.value) == one_line(ours.stderr)


def live_process():
    return subprocess.Popen(
        [sys.executable, '-c', 'import time; time.sleep(60)']
    )


def test_a_second_training_into_a_work_dir_is_refused(tmp_path):
    work_dir = tmp_path / 'w'
    work_dir.mkdir()
    lock = work_dir / 'train.lock'
    first = live_process()
    host = socket.gethostname()
    try:
        lock.write_text(json.dumps(dict(pid=first.pid, host=host)))
        expected = (
            f'{work_dir} is in use by another training (process {first.pid} '
            f'on {host}, see {lock}); choose another --work-dir, or delete '
            'the file if that run has ended.'
        )
        ours = run_main('train', DEMO, '--work-dir', work_dir)
        assert ours.returncode == 1 and one_line(ours.stderr) == expected
        error = door(DEMO, {}, work_dir)
        assert isinstance(error, RunCheckError) and str(error) == expected
        assert not list(work_dir.glob('*.pth'))
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    # the first run is gone: its lock is taken over, and released at the end
    ours = run_main(
        'train', DEMO, '--work-dir', work_dir, '--cfg-options', *TINY_DEMO
    )
    assert ours.returncode == 0, ours.stderr[-2000:]
    assert (work_dir / 'epoch_1.pth').is_file() and not lock.exists()


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


def test_too_little_space_for_a_checkpoint_stops_before_saving(
    tmp_path, monkeypatch
):
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(
        work_dir_hook.shutil,
        'disk_usage',
        lambda path: usage._replace(free=2**20),
    )
    needed = sum(v.numel() * 4 for v in digit_model().state_dict().values())
    ours = run_main(
        'train', DEMO, '--work-dir', tmp_path / 'w', '--cfg-options',
        *TINY_DEMO,
    )  # fmt: skip
    assert ours.returncode == 1
    line = one_line(ours.stderr)
    assert line.startswith(
        'Training stopped before saving a checkpoint: it needs about '
    )
    # weights, their optimizer moments and gradients' companions
    assert float(line.split('about ')[1].split(' MiB')[0]) > needed / 2**20
    assert f'{tmp_path}/w has 1.0 MiB free' in line
    assert not (tmp_path / 'w' / 'epoch_1.pth').exists()
    error = door(DEMO, as_dict(TINY_DEMO), tmp_path / 'door')
    assert isinstance(error, DiskFullError)


# 6. Resume.


@pytest.fixture(scope='module')
def one_epoch(tmp_path_factory):
    """A work dir with the tiny demo run for one epoch."""
    work_dir = tmp_path_factory.mktemp('one_epoch')
    ours = run_main(
        'train', DEMO, '--work-dir', work_dir, '--cfg-options', *TINY_DEMO
    )
    assert ours.returncode == 0, ours.stderr[-2000:]
    return work_dir


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
    # WorkDirHook removes what a hard kill left while saving, before the
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
            'train', DEMO, '--work-dir', work_dir, '--resume', *resume,
            '--cfg-options', *options,
        )  # fmt: skip
        assert ours.returncode == 0, ours.stderr[-2000:]
        assert 'resumed epoch: 1,' in ours.stdout
        assert dict(reads) == {str(work_dir / 'epoch_1.pth'): 1}
        reads.clear()
        (work_dir / 'epoch_2.pth').unlink()
        (work_dir / 'last_checkpoint').write_text(
            str(work_dir / 'epoch_1.pth')
        )


def test_resume_auto_takes_the_newest_intact_checkpoint(one_epoch, tmp_path):
    work_dir = tmp_path / 'w'
    shutil.copytree(one_epoch, work_dir)
    whole = (work_dir / 'epoch_1.pth').read_bytes()
    (work_dir / 'epoch_2.pth').write_bytes(whole[: len(whole) // 2])
    (work_dir / 'last_checkpoint').write_text(str(work_dir / 'epoch_2.pth'))
    assert newest_intact_checkpoint(str(work_dir)) == str(
        work_dir / 'epoch_1.pth'
    )
    (work_dir / 'last_checkpoint').write_text('')
    assert newest_intact_checkpoint(str(work_dir)) == str(
        work_dir / 'epoch_1.pth'
    )
    assert newest_intact_checkpoint(str(tmp_path / 'none')) is None
    # mmengine's Runner would resume from the truncated file
    # last_checkpoint names: refused in one line; the config's runner
    # (SampleSeededRunner, as the OpenMMLab tools build it) takes the
    # intact one
    (work_dir / 'last_checkpoint').write_text(str(work_dir / 'epoch_2.pth'))
    options = dict(as_dict(TINY_DEMO), resume=True)
    options['train_cfg.max_epochs'] = 2
    assert str(door(DEMO, options, work_dir)) == (
        f'{work_dir / "epoch_2.pth"}, the checkpoint last_checkpoint names '
        f"in {work_dir}, is cut short, and mmengine's Runner would resume "
        'it; resume an intact one with --resume PATH, or set runner_type = '
        "'SampleSeededRunner' (it takes the newest intact one)."
    )
    assert door(DEMO, options, work_dir, build=RUNNERS.build) is None
    assert (work_dir / 'epoch_2.pth').stat().st_size > len(whole) // 2


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


def test_resume_auto_falls_back_on_load_from(one_epoch, tmp_path):
    """resume='auto' (tools/train.py --resume with load_from set): the work
    dir's checkpoint where there is one, else load_from; mmengine's own
    Runner would resume load_from, and says so in one line."""
    work_dir = tmp_path / 'w'
    shutil.copytree(one_epoch, work_dir)
    (work_dir / 'last_checkpoint').write_text(str(work_dir / 'epoch_1.pth'))
    pretrained = save_checkpoint(tmp_path / 'pretrained.pth', DIGIT_CLASSES)
    options = dict(resume='auto', load_from=str(pretrained))

    def runner_in(folder: Path):
        cfg = Config.fromfile(DEMO)
        cfg.merge_from_dict(dict(options, work_dir=str(folder)))
        return RUNNERS.build(cfg)

    runner = runner_in(work_dir)
    assert (runner.load_from, runner.resumes) == (
        str(work_dir / 'epoch_1.pth'),
        True,
    )
    runner = runner_in(tmp_path / 'fresh')
    assert (runner.load_from, runner.resumes) == (str(pretrained), False)
    assert runner.cfg.resume is False
    assert str(door(DEMO, options, tmp_path / 'door')) == (
        "resume='auto' is SampleSeededRunner's: mmengine's Runner would "
        f'resume the run of load_from={pretrained} instead of the work '
        "dir's; set runner_type = 'SampleSeededRunner' or leave load_from "
        'out.'
    )


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
            'optim_wrapper: TypeError: AdamW.__init__() got an unexpected '
            "keyword argument 'lrr'",
        ),
        (
            'optim_wrapper.optimizer.lr=-0.1',
            'optim_wrapper: ValueError: Invalid learning rate: -0.1',
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
    if option == 'train_cfg.val_interval=0':
        error = door(DEMO, as_dict([option]), tmp_path / 'door')
        assert isinstance(error, RunCheckError) and str(error) == expected


# 8. A frozen rank ends a distributed run within the timeout.

FROZEN_RANK = r"""
import os, signal, sys
import torch, torch.distributed as dist
from t2t_plugin.cli.distributed import init_cpu_dist
from t2t_plugin.cli.launch import dist_failure_message
from t2t_plugin.engine.hooks import RankHeartbeatHook
init_cpu_dist('pytorch', timeout=3)
hook, rank = RankHeartbeatHook(), dist.get_rank()
hook.before_train(None)
try:
    for step in range(50):
        if rank == 1 and step == 3:
            os.kill(os.getpid(), signal.SIGSTOP)
        dist.all_reduce(torch.ones(4))
except RuntimeError as error:
    cfg = dict(env_cfg=dict(dist_cfg=dict(timeout=3)))
    from mmengine.config import Config, DictAction
    print(dist_failure_message(error, Config(cfg)), file=sys.stderr)
    sys.exit(1)
"""


def test_frozen_rank_ends_the_run_naming_it():
    env = dict(
        os.environ,
        PYTHONPATH=str(ROOT),
        MASTER_ADDR='127.0.0.1',
        MASTER_PORT=str(free_port()),
        WORLD_SIZE='2',
    )
    processes = [
        subprocess.Popen(
            [sys.executable, '-c', FROZEN_RANK],
            env=dict(env, RANK=str(rank)),
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(2)
    ]
    try:
        # The bound only stops a hang; the message says when rank 0 noticed.
        _, err = processes[0].communicate(timeout=300)
    finally:
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
            process.wait()
    assert processes[0].returncode == 1
    line = err.strip().splitlines()[-1]
    assert line.startswith(
        'Rank 0: rank(s) 1 stopped answering (no heartbeat for 5 s)'
    ), err
    assert 'after the 3 s process-group timeout' in line


@pytest.mark.parametrize(
    'tool', ['analysis_tools/get_flops', 'visualization/vis_features']
)
def test_broken_config_is_one_line_in_other_tools(tool, tmp_path):
    config = tmp_path / 'broken.py'
    config.write_text('model = dict(\n')
    image = write_png(tmp_path / 'digit.png')
    args = (
        [str(config)]
        if 'get_flops' in tool
        else [str(image), str(config), str(config)]
    )
    result = run_main(tool, *args)
    assert result.returncode == 1
    assert one_line(result.stderr).startswith('error: ')
    assert 'never closed' in result.stderr
