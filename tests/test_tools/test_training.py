"""tools/train.py and tools/test.py on the digits demo config (CPU):
a run killed mid-epoch resumes on the same schedule, checkpoints load with
torch's safe unpickler, test.py reports top-1/top-5, --amp trains in bf16,
and a missing dataset is one line on stderr."""

import argparse
import copy
import io
import json
import os
import pickle
import signal
import subprocess
import sys
import time

import pytest
import torch
from mmengine.config import Config
from mmengine.logging import HistoryBuffer
from mmengine.optim import build_optim_wrapper
from mmengine.registry import PARAM_SCHEDULERS
from mmpretrain.registry import DATASETS, MODELS

import t2t_plugin  # noqa: F401
from t2t_plugin import compat
from t2t_plugin.analysis import find_scalar_files, load_scalars
from t2t_plugin.runtime import AtomicLocalBackend

from ..helpers import (
    DEMO,
    ROOT,
    evaluate_in_process,
    load_tool,
    run_main,
    tool_env,
)

EPOCH_LENGTH = 5  # 320 of the training images in batches of 64
SHORT_RUN = [
    '--cfg-options',
    'train_cfg.max_epochs=3',
    'train_dataloader.dataset.indices=320',
    'train_cfg.val_interval=3',
    'default_hooks.logger.interval=1',
    'default_hooks.checkpoint.interval=1',
    'default_hooks.checkpoint.max_keep_ckpts=5',
]


def demo_lrs(num_iters: int) -> list:
    """lr of each iteration of the demo schedule, by mmengine's schedulers."""
    cfg = Config.fromfile(DEMO)
    optim_wrapper = build_optim_wrapper(
        torch.nn.Linear(1, 1), dict(optimizer=cfg.optim_wrapper.optimizer)
    )
    schedulers = [
        PARAM_SCHEDULERS.build(
            copy.deepcopy(s),
            default_args=dict(
                optimizer=optim_wrapper, epoch_length=EPOCH_LENGTH
            ),
        )
        for s in cfg.param_scheduler
    ]
    lrs = []
    for _ in range(num_iters):
        lrs.append(optim_wrapper.param_groups[0]['lr'])
        for scheduler in schedulers:
            scheduler.step()
    return lrs


@pytest.fixture(scope='module')
def interrupted_run(tmp_path_factory):
    """A 3-epoch demo run killed after its first checkpoint, then resumed."""
    work_dir = tmp_path_factory.mktemp('interrupted')
    args = [
        sys.executable,
        'tools/train.py',
        DEMO,
        '--work-dir',
        str(work_dir),
        *SHORT_RUN,
    ]
    first = subprocess.Popen(
        args,
        cwd=ROOT,
        env=tool_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    # mmengine names the checkpoint to resume from in last_checkpoint,
    # written right after the checkpoint itself.
    pointer = work_dir / 'last_checkpoint'
    deadline = time.time() + 240
    while not (
        pointer.exists()
        and pointer.read_text().strip().endswith('epoch_1.pth')
    ):
        assert first.poll() is None, 'training stopped before epoch 1'
        assert time.time() < deadline, 'no checkpoint after 240 s'
        time.sleep(0.02)
    time.sleep(0.2)  # into epoch 2
    killed_mid_run = first.poll() is None
    first.send_signal(signal.SIGKILL)
    first.wait()
    resumed = run_main(
        'train',
        DEMO,
        '--work-dir',
        str(work_dir),
        '--verbose',  # the resume's INFO lines
        '--resume',
        *SHORT_RUN,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert killed_mid_run
    return work_dir, resumed.stdout + resumed.stderr


@pytest.mark.slow
def test_resume_after_kill_continues_the_schedule(interrupted_run):
    work_dir, log = interrupted_run
    line = next(ln for ln in log.splitlines() if 'resumed epoch:' in ln)
    resumed_epoch = int(line.split('resumed epoch:')[1].split(',')[0])
    assert resumed_epoch in (1, 2)
    assert f'iter: {resumed_epoch * EPOCH_LENGTH}' in line

    # The resumed start logs every iteration after its checkpoint with the
    # lr of the uninterrupted schedule.
    runs = sorted(work_dir.glob('*/vis_data/scalars.json'))
    assert len(runs) == 2
    train, _ = load_scalars([str(runs[1])])
    steps = [r['step'] for r in train]
    assert steps == list(
        range(resumed_epoch * EPOCH_LENGTH + 1, 3 * EPOCH_LENGTH + 1)
    )
    lrs = demo_lrs(3 * EPOCH_LENGTH)
    for record in train:
        assert record['lr'] == pytest.approx(lrs[record['step'] - 1], rel=1e-6)

    # Both starts together make one curve, step 1 to the end.
    train, val = load_scalars(find_scalar_files(str(work_dir)))
    assert [r['step'] for r in train] == list(range(1, 3 * EPOCH_LENGTH + 1))
    assert [r['step'] for r in val] == [3]
    assert (work_dir / 'curves.png').stat().st_size > 10_000


def test_full_checkpoint_loads_with_weights_only(interrupted_run):
    work_dir, _ = interrupted_run
    last = (work_dir / 'last_checkpoint').read_text().strip()
    assert last == str(work_dir / 'epoch_3.pth')
    # torch >= 2.6 loads with weights_only=True by default.
    checkpoint = torch.load(last, map_location='cpu')
    assert checkpoint['meta']['epoch'] == 3
    assert checkpoint['meta']['iter'] == 3 * EPOCH_LENGTH
    history = checkpoint['message_hub']['log_scalars']['train/lr']
    assert isinstance(history, HistoryBuffer)
    assert history.current() == pytest.approx(
        demo_lrs(3 * EPOCH_LENGTH)[-1], rel=1e-6
    )


@pytest.mark.slow
def test_test_tool_reports_top1_top5(interrupted_run, tmp_path):
    work_dir, _ = interrupted_run
    out = tmp_path / 'metrics.json'
    checkpoint = str(work_dir / 'epoch_3.pth')
    result = run_main(
        'test',
        DEMO,
        checkpoint,
        '--work-dir',
        str(tmp_path),
        '--out',
        str(out),
        '--out-item',
        'metrics',
    )
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads(out.read_text())
    top1, top5 = evaluate_in_process(checkpoint)
    assert metrics['accuracy/top1'] == pytest.approx(top1, abs=1e-3)
    assert metrics['accuracy/top5'] == pytest.approx(top5, abs=1e-3)
    assert f'accuracy/top1: {metrics["accuracy/top1"]:.4f}' in result.stdout


@pytest.mark.slow
def test_test_tool_scores_the_averaged_weights_of_ema_checkpoints(
    interrupted_run, tmp_path
):
    """With EMAHook, a checkpoint's state_dict holds the averaged weights
    and ema_state_dict the raw ones; test.py loads it strictly through the
    runner and must score the averaged weights."""
    work_dir, _ = interrupted_run
    checkpoint = torch.load(work_dir / 'epoch_3.pth', map_location='cpu')
    # The hook averages parameters only; buffers are the same in both.
    model_cfg = copy.deepcopy(Config.fromfile(DEMO).model)
    parameters = {
        name for name, _ in MODELS.build(model_cfg).named_parameters()
    }
    generator = torch.Generator().manual_seed(0)
    raw = {
        f'module.{key}': value
        + 0.5 * torch.randn(value.shape, generator=generator)
        if key in parameters
        else value.clone()
        for key, value in checkpoint['state_dict'].items()
    }
    checkpoint['ema_state_dict'] = dict(raw, steps=torch.tensor(69))
    ema_checkpoint = tmp_path / 'ema.pth'
    torch.save(checkpoint, ema_checkpoint)
    raw_checkpoint = tmp_path / 'raw.pth'
    torch.save(
        {
            'state_dict': {
                key[len('module.') :]: value for key, value in raw.items()
            }
        },
        raw_checkpoint,
    )
    config = tmp_path / 'digits_ema.py'
    config.write_text(
        f'_base_ = [{DEMO!r}]\n'
        "custom_hooks = [dict(type='EMAHook', momentum=4e-5, "
        "priority='ABOVE_NORMAL')]\n"
    )

    out = tmp_path / 'metrics.json'
    result = run_main(
        'test',
        str(config),
        str(ema_checkpoint),
        '--work-dir',
        str(tmp_path / 'work'),
        '--verbose',  # the EMA hook's INFO line
        '--out',
        str(out),
        '--out-item',
        'metrics',
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert 'Start testing on EMA model.' in result.stdout
    metrics = json.loads(out.read_text())
    top1, top5 = evaluate_in_process(str(ema_checkpoint))
    assert metrics['accuracy/top1'] == pytest.approx(top1, abs=1e-3)
    assert metrics['accuracy/top5'] == pytest.approx(top5, abs=1e-3)
    # The raw weights score differently, so the check above can fail.
    assert evaluate_in_process(str(raw_checkpoint))[0] != pytest.approx(
        top1, abs=1e-3
    )


def test_amp_on_cpu_trains_in_bfloat16():
    train_tool = load_tool('tools/train.py')
    args = argparse.Namespace(
        config=DEMO,
        cfg_options=None,
        work_dir='unused',
        amp=True,
        resume=None,
        auto_scale_lr=False,
        no_validate=False,
        no_pin_memory=False,
        no_persistent_workers=False,
        launcher='none',
    )
    cfg = train_tool.merge_args(Config.fromfile(DEMO), args)
    assert cfg.optim_wrapper.type == 'AutocastOptimWrapper'
    assert cfg.optim_wrapper.dtype == 'bfloat16'

    model_cfg = copy.deepcopy(cfg.model)
    model_cfg.data_preprocessor = cfg.data_preprocessor
    model = MODELS.build(model_cfg)
    optim_wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    dtypes = []
    model.head.layers.head.register_forward_hook(
        lambda module, inputs, output: dtypes.append(output.dtype)
    )
    dataset = DATASETS.build(
        dict(type='DigitsDataset', pipeline=[dict(type='PackInputs')])
    )
    batch = [dataset[i] for i in range(16)]
    data = dict(
        inputs=[b['inputs'] for b in batch],
        data_samples=[b['data_samples'] for b in batch],
    )
    before = model.head.layers.head.weight.detach().clone()
    losses = model.train_step(data, optim_wrapper)
    assert dtypes == [torch.bfloat16]
    assert torch.isfinite(losses['loss'])
    assert not torch.equal(before, model.head.layers.head.weight)
    assert model.head.layers.head.weight.dtype == torch.float32


@pytest.mark.slow
def test_missing_dataset_is_one_line(tmp_path, monkeypatch):
    config = str(ROOT / 'configs' / 't2t-vit-14_8xb64_in1k.py')
    monkeypatch.chdir(tmp_path)  # data/imagenet is relative
    result = run_main('train', config)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        'Dataset not found: expected data/imagenet '
        '(see docs/getting_started.md#data-preparation).'
    )
    assert 'Traceback' not in result.stdout + result.stderr


def test_atomic_backend_keeps_the_old_file_on_failure(tmp_path, monkeypatch):
    backend = AtomicLocalBackend()
    target = tmp_path / 'sub' / 'epoch_1.pth'
    backend.put(b'complete', target)
    assert target.read_bytes() == b'complete'

    def fail(*args):
        raise OSError('disk full')

    monkeypatch.setattr(os, 'replace', fail)
    with pytest.raises(OSError, match='disk full'):
        backend.put(b'trunc', target)
    assert target.read_bytes() == b'complete'
    assert sorted(p.name for p in target.parent.iterdir()) == ['epoch_1.pth']


class _Reach:
    """Pickles as a call of ``getattr`` on an allowed class."""

    def __init__(self, owner, name):
        self.owner, self.name = owner, name

    def __reduce__(self):
        return getattr, (self.owner, self.name)


@pytest.mark.skipif(
    not compat.WEIGHTS_ONLY_BY_DEFAULT,
    reason='torch < 2.6 loads with the unrestricted unpickler by default',
)
@pytest.mark.parametrize(
    'payload',
    [
        _Reach(HistoryBuffer, '__init__'),
        _Reach(torch.Tensor, 'copy_'),
    ],
)
def test_safe_loading_still_refuses_other_globals(payload):
    buffer = io.BytesIO()
    torch.save({'state_dict': {}, 'x': payload}, buffer)
    buffer.seek(0)
    with pytest.raises(pickle.UnpicklingError):
        torch.load(buffer)


def test_plot_curves_tool_redraws_from_a_work_dir(
    interrupted_run, tmp_path, monkeypatch, capsys
):
    work_dir, _ = interrupted_run
    plot_tool = load_tool('tools/analysis_tools/plot_curves.py')
    out = tmp_path / 'redrawn.png'
    monkeypatch.setattr(
        sys, 'argv', ['plot_curves.py', str(work_dir), '--out', str(out)]
    )
    assert plot_tool.main() == 0
    assert (
        f'{3 * EPOCH_LENGTH} training and 1 evaluation'
        in capsys.readouterr().out
    )
    assert out.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'

    monkeypatch.setattr(
        sys, 'argv', ['plot_curves.py', str(tmp_path / 'nothing')]
    )
    assert plot_tool.main() == 1
    assert 'No training log found' in capsys.readouterr().err

    # --out over the log it reads: refused, the log left as it was
    log = sorted(work_dir.glob('*/vis_data/scalars.json'))[0]
    before = log.read_bytes()
    monkeypatch.setattr(
        sys, 'argv', ['plot_curves.py', str(log), '--out', str(log)]
    )
    assert plot_tool.main() == 1
    assert capsys.readouterr().err.strip() == (
        f'--out {log} is the log {log}, an input of this command; give '
        'another path.'
    )
    assert log.read_bytes() == before


@pytest.mark.parametrize(
    'text, resumed',
    [
        ('resume = True\n', True),  # as mmengine's formatted dump writes it
        ("load_from=None\nresume=True\nwork_dir='w'\n", True),  # unformatted
        ('resume = False\n', False),
        ("# resume = True\nresume = 'auto'\n", False),
        ('model = dict(resume=True)\n', False),  # not the top-level key
        ('resume = (\n', False),  # a cut-off file
    ],
)
def test_curves_follow_a_start_that_resumed(tmp_path, text, resumed):
    # two starts of one work dir: the later one's curves take in the
    # earlier one's only where its saved config resumed
    for start, config in (('20260101_000000', ''), ('20260101_000100', text)):
        scalars = tmp_path / start / 'vis_data' / 'scalars.json'
        scalars.parent.mkdir(parents=True)
        scalars.write_text('')
        (tmp_path / start / 'vis_data' / 'config.py').write_text(config)
    starts = [
        path.split(os.sep)[-3] for path in find_scalar_files(str(tmp_path))
    ]
    assert starts == ['20260101_000000'] * resumed + ['20260101_000100']
