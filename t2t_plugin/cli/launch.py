"""Command-line pieces that ``tools/train.py`` and ``tools/test.py`` share."""

import argparse
import os
from typing import Optional

import torch
import torch.distributed as torch_dist
from mmengine.config import Config, DictAction

from .distributed import (
    DEFAULT_TIMEOUT,
    is_timeout,
    set_dist_timeout,
    setup_cpu_dist,
    silent_ranks_message,
)


def add_launch_arguments(
    parser: argparse.ArgumentParser, cfg_example: str
) -> None:
    """Add ``--cfg-options``, ``--launcher`` and ``--local_rank``.

    Args:
        parser: The tool's parser.
        cfg_example: An override to show in the ``--cfg-options`` help.
    """
    parser.add_argument(
        '--cfg-options',
        nargs='+',
        action=DictAction,
        help=f'override config entries, e.g. {cfg_example}',
    )
    parser.add_argument(
        '--launcher',
        choices=['none', 'pytorch', 'slurm', 'mpi'],
        default='none',
        help='how the processes were started (none: a single process)',
    )
    # torch.distributed.launch passes --local_rank (or --local-rank).
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)


def parse_launch_args(parser: argparse.ArgumentParser) -> argparse.Namespace:
    """Parse the command line; unparsable ``--cfg-options`` are a usage
    error, not a traceback."""
    try:
        args = parser.parse_args()
    except (AssertionError, RecursionError, ValueError, SyntaxError):
        # mmengine's DictAction fails this way on values it cannot parse.
        parser.error(
            'cannot parse the --cfg-options values; write lists '
            'as key=[a,b] and give dicts in a config file'
        )
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    return args


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
