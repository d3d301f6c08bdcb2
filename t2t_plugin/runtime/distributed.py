"""Distributed runs: the opening of the process group (gloo on machines
without CUDA), the launch failures a user can act on, and the ranks that
stopped answering.

mmengine's ``init_dist`` calls ``torch.cuda.set_device`` whatever the
backend: without CUDA, :class:`~t2t_plugin.runtime.SampleSeededRunner`
opens the group with :func:`init_cpu_dist` instead (and gives DDP no
device ids). Used by the runner and ``RunGuardHook``; the launcher of
``tools/dist_*.sh`` is ``t2t_preflight.launch``, whose busy-port and
GPU-count messages the group's opening shares. Nothing here imports the
rest of the runtime.
"""

import datetime
import os
import subprocess
import time

import torch
import torch.distributed as torch_dist
from mmengine.dist import init_dist

from t2t_preflight.errors import ArgumentRefused
from t2t_preflight.launch import gpu_shortage, rendezvous_failures

from .. import compat

# Seconds a collective operation waits for the other ranks before the run
# ends (torch's default, 1800, keeps a job with a frozen rank hanging for
# half an hour). Set env_cfg.dist_cfg.timeout in a config to change it.
DEFAULT_TIMEOUT = 300

# Seconds between two signs of life of a rank (RunGuardHook).
HEARTBEAT_INTERVAL = 2.0

# Words of the errors a collective raises when a peer stops answering
# (gloo: "Timed out waiting ...", "Connection closed by peer"; NCCL's
# watchdog: "Watchdog caught collective operation timeout").
_TIMEOUT_WORDS = (
    'timed out',
    'timeout',
    'connection closed by peer',
    'connection reset by peer',
)


def heartbeat_key(rank: int) -> str:
    """The process-group store key that counts a rank's signs of life."""
    return f't2t_heartbeat/{rank}'


def _require(launcher: str, names: tuple, start: str) -> None:
    """Refuse the launcher (:class:`ArgumentRefused`) naming its variables
    that are unset."""
    missing = [name for name in names if name not in os.environ]
    if missing:
        raise ArgumentRefused(
            f'launcher={launcher!r} needs the environment variables '
            f'{", ".join(missing)}; {start}.'
        )


def _export_slurm_env() -> None:
    """Fill torch's rendezvous variables from Slurm's."""
    _require(
        'slurm',
        ('SLURM_NODELIST', 'SLURM_NTASKS', 'SLURM_PROCID'),
        'start the script with srun, e.g. tools/slurm_train.sh',
    )
    if 'MASTER_ADDR' not in os.environ:
        # The first node of the allocation hosts the rendezvous.
        result = subprocess.run(
            ['scontrol', 'show', 'hostnames', os.environ['SLURM_NODELIST']],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0 or not result.stdout.strip():
            raise ArgumentRefused(
                'Could not resolve the first Slurm node with scontrol; set '
                'MASTER_ADDR to its host name.'
            )
        os.environ['MASTER_ADDR'] = result.stdout.split()[0]
    if 'MASTER_PORT' not in os.environ:
        # One port per job: jobs that share a node (and a job resumed
        # right after a cancelled one) must not meet at the same port.
        job = int(os.environ.get('SLURM_JOB_ID', '9500'))
        os.environ['MASTER_PORT'] = str(20000 + job % 10000)
    os.environ['WORLD_SIZE'] = os.environ['SLURM_NTASKS']
    os.environ['RANK'] = os.environ['SLURM_PROCID']
    os.environ['LOCAL_RANK'] = os.environ.get('SLURM_LOCALID', '0')


def _export_mpi_env() -> None:
    """Fill torch's rendezvous variables from Open MPI's."""
    _require(
        'mpi',
        (
            'OMPI_COMM_WORLD_SIZE',
            'OMPI_COMM_WORLD_RANK',
            'OMPI_COMM_WORLD_LOCAL_RANK',
        ),
        "start the script with Open MPI's mpirun",
    )
    os.environ.setdefault('MASTER_ADDR', '127.0.0.1')
    os.environ.setdefault('MASTER_PORT', '29500')
    os.environ['WORLD_SIZE'] = os.environ['OMPI_COMM_WORLD_SIZE']
    os.environ['RANK'] = os.environ['OMPI_COMM_WORLD_RANK']
    os.environ['LOCAL_RANK'] = os.environ['OMPI_COMM_WORLD_LOCAL_RANK']


def open_process_group(launcher: str, dist_cfg: dict) -> None:
    """Open the process group of a run started by ``launcher``: gloo
    without CUDA (:func:`init_cpu_dist`), else mmengine's ``init_dist``
    with ``dist_cfg`` (its ``timeout`` in seconds) once this process has
    a GPU of its own. A port held by another process, a launcher's
    variables that are unset and a node with fewer GPUs than processes
    raise :class:`ArgumentRefused`."""
    with rendezvous_failures():
        if not torch.cuda.is_available():
            init_cpu_dist(launcher, timeout=dist_cfg['timeout'])
            return
        if launcher == 'pytorch':
            # mmengine's init_dist reads them without a word when unset
            _require(
                launcher,
                (
                    'MASTER_ADDR',
                    'MASTER_PORT',
                    'RANK',
                    'WORLD_SIZE',
                    'LOCAL_RANK',
                ),
                'start the script with torchrun, e.g. tools/dist_train.sh',
            )
        local_rank = int(
            os.environ.get('LOCAL_RANK')
            or os.environ.get('SLURM_LOCALID')
            or os.environ.get('OMPI_COMM_WORLD_LOCAL_RANK')
            or 0
        )
        processes = int(os.environ.get('LOCAL_WORLD_SIZE') or local_rank + 1)
        gpus = torch.cuda.device_count()
        shortage = gpu_shortage(max(processes, local_rank + 1), gpus)
        if shortage:
            raise ArgumentRefused(
                f'{shortage}; start at most {gpus} processes per node '
                '(NGPUS of tools/dist_train.sh, GPUS_PER_NODE of '
                'tools/slurm_train.sh), or hide the GPUs '
                '(CUDA_VISIBLE_DEVICES=) to train on CPU processes.'
            )
        init_dist(launcher, **dist_cfg)


def init_cpu_dist(launcher: str, timeout: float = DEFAULT_TIMEOUT) -> None:
    """Open a gloo process group from the environment of ``launcher``
    (``'pytorch'``: torchrun, ``'slurm'``: srun, ``'mpi'``: mpirun), whose
    collectives wait ``timeout`` seconds."""
    if launcher == 'slurm':
        _export_slurm_env()
    elif launcher == 'mpi':
        _export_mpi_env()
    _require(
        launcher,
        ('MASTER_ADDR', 'MASTER_PORT', 'RANK', 'WORLD_SIZE'),
        'start the script with torchrun, e.g. tools/dist_train.sh',
    )
    torch_dist.init_process_group(
        backend='gloo',
        rank=int(os.environ['RANK']),
        world_size=int(os.environ['WORLD_SIZE']),
        timeout=datetime.timedelta(seconds=timeout),
    )


def is_timeout(error: BaseException) -> bool:
    """Whether ``error`` is a collective that gave up on a silent peer."""
    text = str(error).lower()
    return any(word in text for word in _TIMEOUT_WORDS)


def silent_ranks_message(timeout: float) -> str:
    """One line naming the ranks that stopped answering: those whose
    ``RunGuardHook`` counter did not move in a few heartbeats.
    ``timeout`` is the process-group timeout, for the message."""
    try:
        store = compat.default_store()
        # the store may be the silent rank's: do not wait for it as long
        store.set_timeout(datetime.timedelta(seconds=10))
        keys = [
            heartbeat_key(rank) for rank in range(torch_dist.get_world_size())
        ]
        before = [store.add(key, 0) for key in keys]
        time.sleep(2.5 * HEARTBEAT_INTERVAL)
        after = [store.add(key, 0) for key in keys]
        silent = [
            rank
            for rank, (old, new) in enumerate(zip(before, after))
            if old == new
        ]
    # the store lives on rank 0's host: it may be gone with that rank
    except Exception:
        silent = []
    own = torch_dist.get_rank() if torch_dist.is_initialized() else 0
    advice = (
        f'the run ended after the {timeout:g} s process-group '
        'timeout (env_cfg.dist_cfg.timeout); check that process and '
        'its node, then resume with --resume.'
    )
    if not silent:
        return f'Rank {own}: another rank stopped answering; {advice}'
    return (
        f'Rank {own}: rank(s) {", ".join(map(str, silent))} stopped '
        f'answering (no heartbeat for {2.5 * HEARTBEAT_INTERVAL:g} s); '
        f'{advice}'
    )
