"""tools/dist_train.sh and tools/dist_test.sh with two CPU processes (gloo):
the data is split between the ranks and the distributed evaluation equals a
single-process one."""

import json
import subprocess
import sys

import pytest

from ..helpers import (
    DEMO,
    MMPRETRAIN_TOOLS,
    ROOT,
    evaluate_in_process,
    free_port,
    tool_env,
)

# One epoch of 320 training images, evaluated, every iteration logged: 3
# iterations per epoch on 2 ranks of 64.
ONE_EPOCH_OF_320 = (
    'train_cfg.max_epochs=1',
    'train_cfg.val_interval=1',
    'train_dataloader.dataset.indices=320',
    'default_hooks.logger.interval=1',
)


def run_script(script: str, *args: str) -> subprocess.CompletedProcess:
    env = tool_env()
    env.update(PORT=str(free_port()), PYTHON=sys.executable)
    return subprocess.run(
        ['bash', f'tools/{script}', *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.skipif(sys.platform == 'win32', reason='bash launcher')
@pytest.mark.slow
def test_two_process_cpu_training_and_testing(tmp_path):
    work_dir = tmp_path / 'dist'
    result = run_script(
        'dist_train.sh',
        DEMO,
        '2',
        '--work-dir',
        str(work_dir),
        '--cfg-options',
        *ONE_EPOCH_OF_320,
    )
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-3000:]
    # 320 images over 2 ranks of 64: 3 iterations per epoch, not 5.
    assert 'Epoch(train) [1][3/3]' in log
    assert 'Epoch(val) [1][2/2]' in log
    checkpoint = work_dir / 'epoch_1.pth'
    assert checkpoint.is_file() and (work_dir / 'curves.png').is_file()

    out = tmp_path / 'metrics.json'
    result = run_script(
        'dist_test.sh',
        DEMO,
        str(checkpoint),
        '2',
        '--work-dir',
        str(tmp_path / 'test'),
        '--out',
        str(out),
        '--out-item',
        'metrics',
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    metrics = json.loads(out.read_text())
    top1, top5 = evaluate_in_process(str(checkpoint))
    # The sampler pads 359 images to 2 x 180; the padding is dropped again.
    assert metrics['accuracy/top1'] == pytest.approx(top1, abs=1e-3)
    assert metrics['accuracy/top5'] == pytest.approx(top5, abs=1e-3)


@pytest.mark.slow
def test_two_process_cpu_training_through_mmpretrains_tool(tmp_path):
    """The CPU process group is opened by the configs' runner, so
    mmpretrain's own tools/train.py trains on two CPU processes too."""
    work_dir = tmp_path / 'dist'
    env = tool_env()
    result = subprocess.run(
        [
            sys.executable,
            '-m',
            'torch.distributed.run',
            '--nproc_per_node=2',
            f'--master_port={free_port()}',
            str(MMPRETRAIN_TOOLS / 'train.py'),
            DEMO,
            '--launcher',
            'pytorch',
            '--no-persistent-workers',
            '--work-dir',
            str(work_dir),
            '--cfg-options',
            *ONE_EPOCH_OF_320,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-3000:]
    # 320 images over 2 ranks of 64: 3 iterations per epoch, not 5.
    assert 'Epoch(train) [1][3/3]' in log
    assert (work_dir / 'epoch_1.pth').is_file()
