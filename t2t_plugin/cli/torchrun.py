"""torchrun as ``tools/dist_*.sh`` start it, with what stops the launch
in one line.

``python -m t2t_plugin.cli.torchrun TORCHRUN_ARGUMENTS`` is torchrun
(``torch.distributed.run``): a port that another process holds, more
processes than the node has GPUs, a worker that fails and a signal that
stops the launcher end in one line and the exit code instead of
torchrun's traceback. What opens the process group inside each worker
(and turns its own failures into one line) is
:func:`~t2t_plugin.runtime.distributed.open_process_group`, for every door.
"""

import logging
import sys
from collections.abc import Sequence
from typing import Optional

import torch
from torch.distributed.elastic.multiprocessing import SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.run import parse_args, run

from t2t_preflight.errors import ArgumentRefused

from ..runtime.distributed import gpu_shortage, rendezvous_failures

# torchrun's agent logs each failed worker (and its stopping of the
# others) before it raises; the one line below says it instead
_AGENT_LOGGERS = (
    'torch.distributed.elastic.multiprocessing.api',
    'torch.distributed.elastic.agent.server.api',
)


def failed_worker_line(error: ChildFailedError) -> tuple[str, int]:
    """One line naming the first worker that failed, and the exit code for
    the launcher: the worker's, or 128 + the signal that killed it."""
    rank, failure = error.get_first_failure()
    worker = (
        f'Rank {rank} (local rank {failure.local_rank}, pid {failure.pid})'
    )
    stopped = 'so torchrun stopped the other ranks'
    if failure.exitcode >= 0:
        return (
            f'{worker} exited with code {failure.exitcode}, {stopped}; its '
            'own error is printed above.',
            failure.exitcode or 1,
        )
    name = failure.signal_name()
    # a kill the user did not send is most often the kernel's
    why = ' (the out-of-memory killer sends it: see dmesg)'
    return (
        f'{worker} was killed by {name}, {stopped}'
        f'{why if name == "SIGKILL" else ""}.',
        128 - failure.exitcode,
    )


def torchrun(argv: Sequence[str]) -> int:
    """Run torchrun with ``argv``; its exit code (0: every worker
    succeeded), after one line on stderr for what stopped the launch."""
    args = parse_args(list(argv))
    processes = args.nproc_per_node
    if processes.isdigit() and torch.cuda.is_available():
        shortage = gpu_shortage(int(processes), torch.cuda.device_count())
        if shortage:
            print(
                f'NGPUS={processes}: {shortage}; set NGPUS to at most '
                f'{torch.cuda.device_count()}, or hide the GPUs '
                '(CUDA_VISIBLE_DEVICES=) to run CPU processes (gloo).',
                file=sys.stderr,
            )
            return 2
    for name in _AGENT_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    try:
        with rendezvous_failures(args.master_port, 'PORT'):
            run(args)
    except ArgumentRefused as error:
        print(error, file=sys.stderr)
        return error.exit_code
    except ChildFailedError as error:
        line, code = failed_worker_line(error)
        print(line, file=sys.stderr)
        return code
    except SignalException as error:  # Ctrl-C, or a kill of the launcher
        print(
            f'torchrun received {error.sigval.name} and stopped the workers.',
            file=sys.stderr,
        )
        return 128 + error.sigval.value
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m t2t_plugin.cli.torchrun``: :func:`torchrun`."""
    return torchrun(sys.argv[1:] if argv is None else argv)


if __name__ == '__main__':
    sys.exit(main())
