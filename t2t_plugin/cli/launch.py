"""The distributed launch of ``tools/train.py`` and ``tools/test.py``."""

from typing import Optional

import torch
import torch.distributed as torch_dist
from mmengine.config import Config

from .distributed import (
    DEFAULT_TIMEOUT,
    init_cpu_dist,
    is_timeout,
    silent_ranks_message,
)


def prepare_launcher(cfg: Config, launcher: str) -> Optional[str]:
    """Set a collective timeout of ``env_cfg.dist_cfg.timeout`` seconds
    (default 300) and, without CUDA (where mmengine's set-up runs), gloo,
    a DDP wrapper without device ids and the process group; one line if
    the processes were not started the way ``launcher`` says."""
    if launcher == 'none':
        return None
    # mmengine's init_dist reads it there for CUDA runs
    dist_cfg = cfg.setdefault('env_cfg', {}).setdefault('dist_cfg', {})
    dist_cfg.setdefault('timeout', DEFAULT_TIMEOUT)
    if torch.cuda.is_available():
        return None
    dist_cfg['backend'] = 'gloo'
    if cfg.get('model_wrapper_cfg') is None:
        # An explicit None: the Runner's default is [LOCAL_RANK].
        cfg.model_wrapper_cfg = dict(
            type='MMDistributedDataParallel',
            device_ids=None,
            broadcast_buffers=False,
            find_unused_parameters=cfg.get('find_unused_parameters', False),
        )
    try:
        if not torch_dist.is_initialized():
            init_cpu_dist(launcher, timeout=dist_cfg['timeout'])
    except RuntimeError as error:
        return str(error)
    return None


def close_dist() -> None:
    """End a distributed run in step on every rank: a process that exits
    with its group open can leave a gloo thread that aborts at exit
    (SIGABRT), and torchrun then reports the whole run as failed."""
    if torch_dist.is_available() and torch_dist.is_initialized():
        torch_dist.barrier()
        torch_dist.destroy_process_group()


def dist_failure_message(error: BaseException, cfg: Config) -> Optional[str]:
    """The line naming the silent rank(s) of a distributed run whose peer
    stopped answering; None for any other error."""
    if not (
        torch_dist.is_available()
        and torch_dist.is_initialized()
        and is_timeout(error)
    ):
        return None
    timeout = (
        cfg.get('env_cfg', {})
        .get('dist_cfg', {})
        .get('timeout', DEFAULT_TIMEOUT)
    )
    return silent_ranks_message(timeout)
