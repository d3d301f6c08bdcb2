"""What happens when things go wrong: crafted data files, class mismatches,
diverging runs, bad images, user mistakes, a frozen rank, an empty
``last_checkpoint``. Each case is refused or reported in one line."""

import contextlib
import copy
import io
import math
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmpretrain.registry import DATASETS, MODELS
from PIL import Image

from t2t_plugin.cli.run_checks import (
    add_training_guards,
    check_dataset_classes,
    check_pipelines,
    class_mismatch,
    misspelt_option_key,
    newest_intact_checkpoint,
)
from t2t_plugin.datasets import UnsafePickleError, load_data_pickle
from t2t_plugin.engine.hooks import (
    BadImageHook,
    NonFiniteGuardHook,
    NonFiniteLossError,
    TooManyBadImagesError,
)

from ..helpers import ROOT, load_tool

DEMO = str(ROOT / 'configs' / 't2t-vit-mini_1xb64_digits.py')
DIGIT_CLASSES = [str(i) for i in range(10)]


def run_main(tool: str, *args: str, monkeypatch) -> tuple:
    """Exit code and stderr of a tool run in this process."""
    module = load_tool(f'tools/{tool}.py')
    monkeypatch.setattr(sys, 'argv', [f'{tool}.py', *args])
    monkeypatch.delenv('T2T_DEBUG', raising=False)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = module.main()
    return code, err.getvalue()


def demo_model(**backbone):
    cfg = Config.fromfile(DEMO)
    model_cfg = copy.deepcopy(cfg.model)
    model_cfg.backbone.update(backbone)
    return MODELS.build(model_cfg)


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert 'Traceback' not in err
    return lines[0]


# 1. Pickled data files run no code.


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


# 2. Classes of the checkpoint and the dataset.


def save_checkpoint(path: Path, classes, **backbone) -> Path:
    torch.save(
        dict(
            state_dict=demo_model(**backbone).state_dict(),
            meta=dict(dataset_meta=dict(classes=tuple(classes))),
        ),
        path,
    )
    return path


def test_class_mismatch_names_both_lists():
    message = class_mismatch(
        dict(meta=dict(dataset_meta=dict(classes=('cat', 'dog', 'emu')))),
        ['cat', 'emu'],
        'model.pth',
    )
    assert message.startswith(
        "model.pth was trained on 3 classes ['cat', 'dog', 'emu'], but the "
        "dataset has 2 classes ['cat', 'emu']"
    )
    assert class_mismatch(dict(meta={}), ['a'], 'x.pth') is None
    assert (
        class_mismatch(
            dict(meta=dict(dataset_meta=dict(classes=('a',)))), ['a'], 'x.pth'
        )
        is None
    )


def test_test_tool_refuses_a_checkpoint_of_other_classes(
    tmp_path, monkeypatch
):
    classes = [f'c{i}' for i in range(10)]
    checkpoint = save_checkpoint(tmp_path / 'other.pth', classes)
    code, err = run_main(
        'test',
        DEMO,
        str(checkpoint),
        '--work-dir',
        str(tmp_path / 'work'),
        monkeypatch=monkeypatch,
    )
    assert code == 1
    line = one_line(err)
    assert f'{checkpoint} was trained on 10 classes {classes}' in line
    assert f'the dataset has 10 classes {DIGIT_CLASSES}' in line


def write_png(path: Path, size=(8, 8), mode='L') -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new(mode, size, 128).save(path)


def test_empty_class_folder_is_refused(tmp_path):
    for name in ('ant', 'cow'):
        write_png(tmp_path / 'data' / name / '0.png')
    (tmp_path / 'data' / 'bee').mkdir()
    dataset = DATASETS.build(
        dict(type='CustomDataset', data_root=str(tmp_path / 'data'))
    )
    runner = SimpleNamespace(train_dataloader=SimpleNamespace(dataset=dataset))
    message = check_dataset_classes(runner, ['train_dataloader'])
    assert message.startswith('train_dataloader: class folder(s) bee in ')
    assert 'shifting every label' in message


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
    result = subprocess.run(
        [
            sys.executable,
            'tools/train.py',
            DEMO,
            '--work-dir',
            str(work_dir),
            '--cfg-options',
            'optim_wrapper.optimizer.lr=1e5',
            'train_cfg.max_epochs=4',
            'train_dataloader.batch_size=16',
            'train_dataloader.dataset.indices=64',
            'default_hooks.checkpoint.interval=1',
            'train_cfg.val_interval=10',
            'default_hooks.non_finite.max_consecutive=2',
        ],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 1, result.stderr[-2000:]
    assert (
        result.stderr.strip().splitlines()[-1].startswith('Training stopped ')
    )
    assert 'Traceback' not in result.stderr
    for path in work_dir.glob('epoch_*.pth'):
        state = torch.load(path)['state_dict']
        assert all(
            torch.isfinite(v).all()
            for v in state.values()
            if v.is_floating_point()
        ), path


# 5. Bad images.


def bad_image_folder(root: Path) -> dict:
    write_png(root / 'a' / 'good0.png')
    write_png(root / 'a' / 'good1.png')
    write_png(root / 'b' / 'good2.png')
    (root / 'a' / 'empty.png').write_bytes(b'')
    (root / 'a' / 'text.png').write_text('not an image')
    data = (root / 'a' / 'good0.png').read_bytes()
    (root / 'b' / 'truncated.png').write_bytes(data[: len(data) // 2])
    write_png(root / 'b' / 'odd.png', size=(9, 9))
    return dict(good=3, bad=4)


def test_bad_images_are_skipped_counted_and_limited(tmp_path):
    counts = bad_image_folder(tmp_path)
    wrapper = DATASETS.build(
        dict(
            type='SkipBadImages',
            max_bad_images=3,
            size_multiple=2,
            in_channels=1,
            dataset=dict(
                type='CustomDataset',
                data_root=str(tmp_path),
                pipeline=[
                    dict(type='LoadImageFromFile', color_type='grayscale'),
                    dict(type='PackInputs'),
                ],
            ),
        )
    )
    samples = [wrapper[i] for i in range(len(wrapper))]
    assert len(samples) == counts['good'] + counts['bad']
    assert {Path(s['data_samples'].img_path).name for s in samples} == {
        'good0.png',
        'good1.png',
        'good2.png',
    }
    time.sleep(0.2)  # the queue's feeder thread
    reports = wrapper.drain()
    assert {Path(path).name for path, _ in reports} == {
        'empty.png',
        'text.png',
        'truncated.png',
        'odd.png',
    }
    odd = next(
        problem for path, problem in reports if path.endswith('odd.png')
    )
    assert odd.startswith('9x9 pixels after the pipeline')
    # the hook stops the run past max_bad_images different images
    hook = BadImageHook()
    hook.wrapper = wrapper
    for path, problem in reports:
        wrapper.reports.put((path, problem))
    time.sleep(0.2)  # the queue's feeder thread
    with pytest.raises(TooManyBadImagesError, match='4 different images'):
        hook.after_train_iter(fake_runner(), 0)


def test_untileable_pipeline_size_is_one_line():
    model = demo_model()  # soft-split strides 1, 1, 2
    runner = SimpleNamespace(
        model=model,
        cfg=Config(
            dict(
                train_dataloader=dict(
                    dataset=dict(
                        pipeline=[
                            dict(type='RandomCrop', crop_size=7),
                            dict(type='PackInputs'),
                        ]
                    )
                )
            )
        ),
    )
    message = check_pipelines(runner, ['train_dataloader'])
    assert message.startswith(
        'train_dataloader.dataset.pipeline: T2T-ViT cannot tile a 7x7 input'
    )
    runner.cfg.train_dataloader.dataset.pipeline[0].crop_size = 8
    assert check_pipelines(runner, ['train_dataloader']) is None
    runner.cfg.train_dataloader.dataset.pipeline.insert(
        0, dict(type='LoadImageFromFile')
    )
    assert (
        'loads 3-channel images, but the backbone takes in_channels=1'
        in check_pipelines(runner, ['train_dataloader'])
    )


# 6. User mistakes in train.py and test.py: one line, exit code 1 or 2.


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
            'Invalid options for {config}: train_cfg.val_interval must be a '
            'whole number >= 1, got 0',
        ),
        (
            'train_dataloder.batch_size=8',
            'Invalid options for {config}: --cfg-options '
            'train_dataloder.batch_size:'
            " the config has no key 'train_dataloder'; did you mean "
            "'train_dataloader'?",
        ),
    ],
)
def test_training_mistakes_are_one_line(
    option, expected, tmp_path, monkeypatch
):
    code, err = run_main(
        'train',
        DEMO,
        '--work-dir',
        str(tmp_path / 'w'),
        '--cfg-options',
        option,
        monkeypatch=monkeypatch,
    )
    assert code in (1, 2)
    assert one_line(err).startswith(expected.format(config=DEMO))


def test_misspelt_key_helper_accepts_runner_keys():
    cfg = Config(dict(model=dict(), train_dataloader=dict()))
    assert (
        misspelt_option_key(
            cfg,
            {
                'train_dataloader.batch_size': 8,
                'work_dir': 'x',
                'resume': True,
            },
        )
        is None
    )
    assert 'did you mean' not in misspelt_option_key(cfg, {'zzz.y': 1})


def training_checkpoint(path: Path, **backbone) -> Path:
    torch.save(
        dict(
            meta=dict(
                epoch=1,
                iter=10,
                dataset_meta=dict(classes=tuple(DIGIT_CLASSES)),
            ),
            state_dict=demo_model(**backbone).state_dict(),
            optimizer={},
            message_hub={},
        ),
        path,
    )
    return path


@pytest.mark.parametrize('case', ['slim', 'other_model', 'other_arch'])
def test_resume_mistakes_are_one_line(case, tmp_path, monkeypatch):
    if case == 'slim':
        checkpoint = save_checkpoint(tmp_path / 'slim.pth', DIGIT_CLASSES)
        expected = (
            f'{checkpoint} holds weights only (no epoch, optimizer '
            'or scheduler state)'
        )
    elif case == 'other_model':
        checkpoint = training_checkpoint(
            tmp_path / 'other.pth', drop_path_rate=0.0, img_size=16
        )
        expected = f'{checkpoint} is the training checkpoint of another model'
    else:
        arch = dict(
            token_layer='performer',
            embed_dims=32,
            num_layers=2,
            num_heads=2,
            feedforward_channels=64,
        )
        checkpoint = training_checkpoint(tmp_path / 'arch.pth', arch=arch)
        expected = (
            f'{checkpoint} is the training checkpoint of another model ('
        )
    code, err = run_main(
        'train',
        DEMO,
        '--work-dir',
        str(tmp_path / 'w'),
        '--resume',
        str(checkpoint),
        monkeypatch=monkeypatch,
    )
    assert code == 1
    assert one_line(err).startswith(expected)


def test_test_tool_refuses_another_arch_in_one_line(tmp_path, monkeypatch):
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
    code, err = run_main(
        'test',
        DEMO,
        str(checkpoint),
        '--work-dir',
        str(tmp_path / 'w'),
        monkeypatch=monkeypatch,
    )
    assert code == 1
    assert one_line(err).startswith(f'Checkpoint does not fit {DEMO}: ')


# 7. A frozen rank ends a distributed run within the timeout.

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
    from mmengine.config import Config
    print(dist_failure_message(error, Config(cfg)), file=sys.stderr)
    sys.exit(1)
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


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
        start = time.time()
        _, err = processes[0].communicate(timeout=120)
        elapsed = time.time() - start
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
    assert elapsed < 60


# 8. An empty last_checkpoint falls back to the newest intact checkpoint.


def test_empty_last_checkpoint_falls_back_to_newest_intact(tmp_path):
    model = torch.nn.Linear(2, 2)
    for epoch in (1, 2):
        torch.save(
            {'state_dict': model.state_dict()}, tmp_path / f'epoch_{epoch}.pth'
        )
    whole = (tmp_path / 'epoch_2.pth').read_bytes()
    (tmp_path / 'epoch_3.pth').write_bytes(whole[: len(whole) // 2])
    (tmp_path / 'last_checkpoint').write_text('')
    assert newest_intact_checkpoint(str(tmp_path)) == str(
        tmp_path / 'epoch_2.pth'
    )
    (tmp_path / 'last_checkpoint').write_text(str(tmp_path / 'epoch_1.pth'))
    assert newest_intact_checkpoint(str(tmp_path)) == str(
        tmp_path / 'epoch_1.pth'
    )
    assert newest_intact_checkpoint(str(tmp_path / 'none')) is None


def test_training_guards_are_added_to_any_config():
    cfg = Config(
        dict(
            default_scope='mmpretrain',
            custom_hooks=[dict(type='EMAHook')],
            train_dataloader=dict(
                dataset=dict(type='DigitsDataset', max_bad_images=7)
            ),
        )
    )
    add_training_guards(cfg)
    assert [hook['type'] for hook in cfg.custom_hooks] == [
        'EMAHook',
        'NonFiniteGuardHook',
        'RandomStateHook',
        'BadImageHook',
        'RankHeartbeatHook',
    ]
    assert cfg.train_dataloader.dataset == dict(
        type='SkipBadImages',
        max_bad_images=7,
        dataset=dict(type='DigitsDataset'),
    )
    add_training_guards(cfg)  # nothing twice
    assert len(cfg.custom_hooks) == 5
    assert cfg.train_dataloader.dataset.dataset.type == 'DigitsDataset'


@pytest.mark.parametrize(
    'tool',
    [
        'tools/analysis_tools/get_flops.py',
        'tools/visualization/vis_features.py',
    ],
)
def test_broken_config_is_one_line_in_other_tools(tool, tmp_path):
    config = tmp_path / 'broken.py'
    config.write_text('model = dict(\n')
    image = tmp_path / 'digit.png'
    write_png(image)
    args = (
        [str(config)]
        if 'get_flops' in tool
        else [str(image), str(config), str(config)]
    )
    result = subprocess.run(
        [sys.executable, tool, *args],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1
    assert one_line(result.stderr).startswith('error: ')
    assert 'never closed' in result.stderr
