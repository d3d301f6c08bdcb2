"""tools/dist_train.sh and tools/dist_test.sh with two CPU processes (gloo):
the data is split between the ranks and the distributed evaluation equals a
single-process one; what stops a launch (a busy port, a bad launcher value,
too few GPUs, a worker that fails) is one line."""

import json
import re
import signal
import socket
import subprocess
import sys
import time

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import RUNNERS

from t2t_plugin.runtime.distributed import open_process_group
from t2t_preflight.errors import ArgumentRefused
from t2t_preflight.launch import torchrun

from ..helpers import (
    DEMO,
    MMPRETRAIN_TOOLS,
    ROOT,
    evaluate_in_process,
    free_port,
    run_main,
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


def run_script(
    script: str, *args: str, **variables: str
) -> subprocess.CompletedProcess:
    """``bash tools/SCRIPT ARGS`` with the environment ``variables``."""
    env = tool_env()
    env.update(PORT=str(free_port()), PYTHON=sys.executable)
    env.update(variables)
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


def only_line(result: subprocess.CompletedProcess, code: int) -> str:
    """The one line a launch that stopped printed on stderr."""
    assert result.returncode == code, result.stderr[-3000:]
    assert 'Traceback' not in result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr[-3000:]
    return lines[0]


@pytest.fixture
def busy_port():
    """A port of this host that another socket listens on."""
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        sock.listen()
        yield sock.getsockname()[1]


def advised_port(line: str, busy: int, variable: str) -> int:
    """The free port ``line`` advises, after checking the line."""
    match = re.fullmatch(
        f'Port {busy} is in use on this host \\(another run or program '
        'listens on it\\), so the processes cannot meet there; set '
        f'{variable} to a free port, e.g. {variable}=(\\d+)\\.',
        line,
    )
    assert match, line
    port = int(match.group(1))
    assert port > busy
    return port


@pytest.mark.skipif(sys.platform == 'win32', reason='bash launcher')
@pytest.mark.parametrize('script', ['dist_train.sh', 'dist_test.sh'])
def test_a_busy_port_is_one_line_naming_it(script, busy_port):
    args = [DEMO, '2'] if script == 'dist_train.sh' else [DEMO, 'x.pth', '2']
    result = run_script(script, *args, PORT=str(busy_port))
    advised_port(only_line(result, 2), busy_port, 'PORT')


@pytest.mark.skipif(sys.platform == 'win32', reason='bash launcher')
@pytest.mark.parametrize(
    'script, args, variables, line',
    [
        (
            'dist_train.sh',
            [DEMO, 'two'],
            {},
            'NGPUS must be a whole number from 1 to 65536 (processes per '
            "node, one per GPU), got 'two'.",
        ),
        (
            'dist_test.sh',
            [DEMO, 'x.pth', '0'],
            {},
            'NGPUS must be a whole number from 1 to 65536 (processes per '
            "node, one per GPU), got '0'.",
        ),
        (
            'dist_train.sh',
            [DEMO, '2'],
            {'NNODES': '2', 'NODE_RANK': '2'},
            'NODE_RANK must be a whole number from 0 to 1 (the place of '
            "this node among the NNODES), got '2'.",
        ),
        (
            'dist_train.sh',
            [DEMO, '2'],
            {'PORT': '65536'},
            'PORT must be a whole number from 1 to 65535 (the port where '
            "the processes meet), got '65536'.",
        ),
        (
            'slurm_train.sh',
            ['dev', 'job', DEMO],
            {'GPUS': '2.5'},
            'GPUS must be a whole number from 1 to 65536 (tasks in all, one '
            "per GPU), got '2.5'.",
        ),
        (
            'slurm_test.sh',
            ['dev', 'job', DEMO, 'x.pth'],
            {'GPUS_PER_NODE': 'all'},
            'GPUS_PER_NODE must be a whole number from 1 to 65536 (tasks per '
            "node), got 'all'.",
        ),
    ],
)
def test_a_launcher_value_it_cannot_use_is_one_line(
    script, args, variables, line
):
    assert only_line(run_script(script, *args, **variables), 2) == line


@pytest.mark.skipif(sys.platform == 'win32', reason='bash launcher')
@pytest.mark.slow
def test_a_failing_worker_is_one_line_naming_its_rank(tmp_path):
    """Both ranks refuse a dataset option: each prints its own line, and
    torchrun's summary of the failure is one line, not its traceback."""
    result = run_script(
        'dist_train.sh', DEMO, '2', '--work-dir', str(tmp_path / 'w'),
        '--cfg-options', 'train_dataloader.dataset.val_ratio=2',
    )  # fmt: skip
    assert result.returncode == 1, result.stderr[-3000:]
    assert 'Traceback' not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert re.fullmatch(
        r'Rank ([01]) \(local rank \1, pid \d+\) exited with code 1, so '
        'torchrun stopped the other ranks; its own error is printed above.',
        lines[-1],
    ), lines[-1]
    assert 'val_ratio' in lines[-2]


def two_workers(script) -> list[str]:
    """The command that runs ``script`` on two workers through our
    torchrun wrapper, on a free port."""
    return [
        sys.executable,
        '-m',
        't2t_preflight.launch',
        '--nproc_per_node=2',
        f'--master_port={free_port()}',
        str(script),
    ]


@pytest.mark.parametrize(
    'ending, code, how',
    [
        (
            'sys.exit(3)',
            3,
            'exited with code 3, so torchrun stopped the other ranks; its '
            r'own error is printed above\.',
        ),
        (
            'os.kill(os.getpid(), signal.SIGKILL)',
            137,
            'was killed by SIGKILL, so torchrun stopped the other ranks '
            r'\(the out-of-memory killer sends it: see dmesg\)\.',
        ),
    ],
)
def test_torchrun_names_the_worker_that_failed(ending, code, how, tmp_path):
    script = tmp_path / 'worker.py'
    script.write_text(
        'import os, signal, sys, time\n'
        "if os.environ['RANK'] == '1':\n"
        f'    {ending}\n'
        'time.sleep(60)\n'
    )
    result = subprocess.run(
        two_workers(script),
        cwd=ROOT,
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    line = only_line(result, code)
    assert re.fullmatch(
        rf'Rank 1 \(local rank 1, pid \d+\) {how}',
        line,
    ), line


def test_a_stopped_launcher_is_one_line(tmp_path):
    """A kill of the launcher (Ctrl-C sends SIGINT to it and the workers
    alike) stops the workers and says so in one line."""
    script = tmp_path / 'worker.py'
    script.write_text(
        'import os, pathlib, time\n'
        f"pathlib.Path({str(tmp_path)!r}, os.environ['RANK']).touch()\n"
        'time.sleep(120)\n'
    )
    launcher = subprocess.Popen(
        two_workers(script),
        cwd=ROOT,
        env=tool_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not all((tmp_path / rank).exists() for rank in '01'):
        assert time.monotonic() < deadline and launcher.poll() is None
        time.sleep(0.2)
    launcher.send_signal(signal.SIGTERM)
    out, err = launcher.communicate(timeout=120)
    result = subprocess.CompletedProcess(
        launcher.args, launcher.returncode, out, err
    )
    assert only_line(result, 143) == (
        'torchrun received SIGTERM and stopped the workers.'
    )


def test_a_busy_port_inside_the_run_is_one_line(
    busy_port, tmp_path, monkeypatch
):
    """A launcher whose processes meet at a port of their own (srun,
    mpirun, torchrun's variables set by hand): the rank that hosts the
    meeting finds the port held, through our tool and the config's runner
    as mmengine builds it."""
    for name, value in dict(
        MASTER_ADDR='127.0.0.1', MASTER_PORT=str(busy_port), RANK='0',
        WORLD_SIZE='1', LOCAL_RANK='0', LOCAL_WORLD_SIZE='1',
    ).items():  # fmt: skip
        monkeypatch.setenv(name, value)
    result = run_main(
        'train', DEMO, '--launcher', 'pytorch',
        '--work-dir', tmp_path / 'ours',
    )  # fmt: skip
    advised_port(only_line(result, 2), busy_port, 'MASTER_PORT')
    cfg = Config.fromfile(DEMO)
    cfg.merge_from_dict(
        dict(work_dir=str(tmp_path / 'theirs'), launcher='pytorch')
    )
    with pytest.raises(ArgumentRefused) as info:
        RUNNERS.build(cfg)  # as mmpretrain's tools/train.py builds it
    advised_port(str(info.value), busy_port, 'MASTER_PORT')


@pytest.fixture
def one_gpu(monkeypatch):
    """A node with one CUDA device, as torch sees it."""
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    monkeypatch.setattr(torch.cuda, 'device_count', lambda: 1)


def test_more_processes_than_gpus_are_refused_before_launching(
    one_gpu, capsys
):
    assert torchrun(['--nproc_per_node=2', 'tools/train.py', DEMO]) == 2
    assert capsys.readouterr().err == (
        'NGPUS=2: 2 processes on this node need one GPU each, but it has 1 '
        '(torch.cuda.device_count(), which CUDA_VISIBLE_DEVICES limits); '
        'set NGPUS to at most 1, or hide the GPUs (CUDA_VISIBLE_DEVICES=) '
        'to run CPU processes (gloo).\n'
    )


def test_a_rank_without_a_gpu_is_refused_in_the_run(one_gpu, monkeypatch):
    """The launchers that do not go through tools/dist_*.sh (srun, another
    torchrun): the second process of a one-GPU node stops in one line
    before it opens the group."""
    for name, value in dict(
        MASTER_ADDR='127.0.0.1', MASTER_PORT=str(free_port()), RANK='1',
        WORLD_SIZE='2', LOCAL_RANK='1', LOCAL_WORLD_SIZE='2',
    ).items():  # fmt: skip
        monkeypatch.setenv(name, value)
    with pytest.raises(ArgumentRefused) as info:
        open_process_group('pytorch', dict(timeout=5))
    assert str(info.value) == (
        '2 processes on this node need one GPU each, but it has 1 '
        '(torch.cuda.device_count(), which CUDA_VISIBLE_DEVICES limits); '
        'start at most 1 processes per node (NGPUS of '
        'tools/dist_train.sh, GPUS_PER_NODE of tools/slurm_train.sh), or '
        'hide the GPUs (CUDA_VISIBLE_DEVICES=) to train on CPU processes.'
    )
