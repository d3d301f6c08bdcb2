"""The runs of the kill-and-resume tests (test_resume*.py): a training
killed with SIGKILL mid-epoch in a process of its own, then resumed; the
uninterrupted and the resumed runs are tools/train.py's main in this
process, on one thread as the killed one."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers import ROOT, run_main, write_image

DIGITS = ROOT / 'configs' / 't2t-vit-mini_1xb64_digits.py'
CUSTOM = ROOT / 'configs' / 't2t-vit-7_1xb64_custom-64px.py'


def digits_options(workers: int, epochs: int = 3) -> list:
    """A short digits run: 192 training images in batches of 32 (6
    iterations an epoch), a checkpoint and a validation every epoch."""
    return [
        f'train_cfg.max_epochs={epochs}',
        'train_cfg.val_interval=1',
        'train_dataloader.batch_size=32',
        'train_dataloader.dataset.indices=192',
        'val_dataloader.dataset.indices=128',
        f'train_dataloader.num_workers={workers}',
        f'val_dataloader.num_workers={workers}',
        'default_hooks.logger.interval=2',
        'default_hooks.checkpoint.interval=1',
        'default_hooks.checkpoint.max_keep_ckpts=10',
        'default_hooks.checkpoint.save_best=None',
    ]


def write_custom_data(root: Path) -> None:
    """Three class folders of small pictures: 16 training images a class
    (3 iterations an epoch at batch 16), 4 validation images a class."""
    for split, count in (('train', 16), ('val', 4)):
        for label in range(3):
            folder = root / split / f'class{label}'
            folder.mkdir(parents=True)
            for index in range(count):
                size = (36 + 4 * (index % 5), 32 + 8 * label)
                write_image(
                    folder / f'{index}.png', size, seed=100 * label + index
                )


def resume_options(root: Path, epochs: int = 3) -> list:
    """The custom-data config with its loaders as shipped (2 persistent
    workers) on 48 images in batches of 16: a checkpoint, a validation
    and a loss every iteration."""
    return [
        f'train_cfg.max_epochs={epochs}',
        'train_cfg.val_interval=1',
        'train_dataloader.batch_size=16',
        f'train_dataloader.dataset.data_root={root}',
        f'val_dataloader.dataset.data_root={root}',
        'default_hooks.logger.interval=1',
        'default_hooks.checkpoint.interval=1',
        'default_hooks.checkpoint.max_keep_ckpts=10',
        'default_hooks.checkpoint.save_best=None',
    ]


def train_arguments(
    work_dir: Path, options: list, resume: bool, config: Path = DIGITS
) -> list:
    return (
        # --verbose: the tests read the resume's INFO lines
        [str(config), '--work-dir', str(work_dir), '--verbose']
        + (['--resume'] if resume else [])
        + ['--cfg-options']
        + options
    )


def train(work_dir: Path, options: list, resume: bool, config: Path) -> str:
    """tools/train.py in this process; its output."""
    done = run_main(
        'train', *train_arguments(work_dir, options, resume, config)
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout + done.stderr


def logged(work_dir: Path) -> tuple:
    """Loss at every logged iteration and the validation top-1 of each
    epoch, over all starts of the run (later starts overwrite)."""
    losses, top1 = {}, {}
    for path in sorted(work_dir.glob('*/vis_data/scalars.json')):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if 'loss' in record:
                losses[record['iter']] = record['loss']
            if 'accuracy/top1' in record:
                top1[record['step']] = record['accuracy/top1']
    return losses, top1


def warnings_logged(work_dir: Path) -> list:
    """The WARNING lines of every start's mmengine log."""
    return [
        line.strip()
        for path in sorted(work_dir.glob('*/*.log'))
        for line in path.read_text().splitlines()
        if 'WARNING' in line
    ]


def assert_same_run(
    whole: Path, broken: Path, iterations: list, epochs: int
) -> None:
    """The killed-and-resumed run logged the uninterrupted run's loss at
    each of ``iterations`` and its top-1 after each of ``epochs``; a
    mismatch names the iterations that differ and the runs' warnings."""
    whole_losses, whole_top1 = logged(whole)
    broken_losses, broken_top1 = logged(broken)
    assert sorted(whole_losses) == iterations
    differ = {
        step: (whole_losses.get(step), broken_losses.get(step))
        for step in sorted(set(whole_losses) | set(broken_losses))
        if whole_losses.get(step) != broken_losses.get(step)
    }
    assert not differ, (
        f'losses (uninterrupted, killed and resumed) differ: {differ}; '
        f'warnings: {warnings_logged(whole) + warnings_logged(broken)}; '
        'the killed process wrote: '
        + broken.with_name(broken.name + '-killed.txt').read_text()[-2000:]
    )
    assert broken_top1 == whole_top1 and len(whole_top1) == epochs


def run_killed_and_resumed(
    work_dir: Path, options: list, kill_at_iter: int, config: Path = DIGITS
) -> str:
    """Start training, SIGKILL it once it logged ``kill_at_iter``, resume;
    the resumed run's output."""
    # its output beside the work dir, for assert_same_run's message
    output = work_dir.with_name(work_dir.name + '-killed.txt').open('wb')
    process = subprocess.Popen(
        [sys.executable, str(ROOT / 'tools' / 'train.py')]
        + train_arguments(work_dir, options, resume=False, config=config),
        env=dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS='1'),
        stdout=output,
        stderr=subprocess.STDOUT,
    )
    deadline = time.time() + 600
    try:
        while time.time() < deadline and process.poll() is None:
            if max(logged(work_dir)[0], default=0) >= kill_at_iter:
                break
            time.sleep(0.2)
        assert process.poll() is None, 'training ended before the kill'
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.wait()
        output.close()
    return train(work_dir, options, resume=True, config=config)
