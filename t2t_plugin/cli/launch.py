"""The distributed launch of ``tools/train.py`` and ``tools/test.py``."""

from typing import Optional

import torch
import torch.distributed as torch_dist
from mmengine.config import Config

from .distributed import (
    DEFAULT_TIMEOUT,
    is_timeout,
    set_dist_timeout,
    setup_cpu_dist,
    silent_ranks_message,
)


def prepare_launcher(cfg: Config, launcher: str) -> Optional[str]:
    """Set up CPU-only distributed runs (gloo) before the Runner is built.

    On CUDA machines mmengine's own launcher set-up runs as usual. Either
    way collectives time out after ``env_cfg.dist_cfg.timeout`` seconds
    (default 300), so a rank that stops answering ends the run.

    Returns:
        str | None: A one-line message if the processes were not started
        the way ``launcher`` says, else None.
    """
    if launcher == 'none':
        return None
    set_dist_timeout(cfg)
    if torch.cuda.is_available():
        return None
    try:
        setup_cpu_dist(cfg, launcher)
    except RuntimeError as error:
        return str(error)
    return None


def close_dist() -> None:
    """End a distributed run in step on every rank.

    A process that exits with its process group still open can leave a
    communication thread running; gloo then aborts it at exit ("terminate
    called without an active exception", SIGABRT) and torchrun reports the
    whole run as failed. Waiting for all ranks and closing the group first
    avoids that.
    """
    if torch_dist.is_available() and torch_dist.is_initialized():
        torch_dist.barrier()
        torch_dist.destroy_process_group()


def dist_failure_message(error: BaseException, cfg: Config) -> Optional[str]:
    """One line for a distributed run whose peer stopped answering.

    Args:
        error (BaseException): What the run raised.
        cfg (Config): The run's config (for the timeout).

    Returns:
        str | None: The line naming the silent rank(s), or None when the
        error is something else (or the run is not distributed).
    """
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
