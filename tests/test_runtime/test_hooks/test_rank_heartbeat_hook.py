"""RankHeartbeatHook: a frozen rank ends a distributed run within the
timeout, and the line names it."""

import os
import signal
import subprocess
import sys

from ...helpers import ROOT, free_port

FROZEN_RANK = r"""
import os, signal, sys
import torch, torch.distributed as dist
from t2t_plugin.runtime.distributed import init_cpu_dist
from t2t_plugin.runtime.hooks import RankHeartbeatHook, TrainingStopped
from t2t_plugin.runtime.sample_seeded_runner import one_line_failures
init_cpu_dist('pytorch', timeout=3)
hook, rank = RankHeartbeatHook(), dist.get_rank()
hook.before_train(None)
try:
    with one_line_failures(timeout=3):
        for step in range(50):
            if rank == 1 and step == 3:
                os.kill(os.getpid(), signal.SIGSTOP)
            dist.all_reduce(torch.ones(4))
except TrainingStopped as error:
    print(error, file=sys.stderr)
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
    assert processes[0].returncode == 1, err[-3000:]
    line = err.strip().splitlines()[-1]
    assert line.startswith(
        'Rank 0: rank(s) 1 stopped answering (no heartbeat for 5 s)'
    ), err
    assert 'after the 3 s process-group timeout' in line
