"""torchrun as ``tools/dist_*.sh`` start it, with what stops the launch
in one line.

``python -m t2t_preflight.launch TORCHRUN_ARGUMENTS`` is torchrun
(``torch.distributed.run``): a port that another process holds, more
processes than the node has GPUs, a worker that fails and a signal that
stops the launcher end in one line and the exit code instead of
torchrun's traceback. The launcher needs torch alone: the workers import
the models, the launcher does not (about 6 CPU-s less per launch). What
opens the process group inside each worker (and turns its own failures
into one line) is
:func:`~t2t_plugin.runtime.distributed.open_process_group`, which uses
:func:`rendezvous_failures` and :func:`gpu_shortage` of this module.
"""

import contextlib
import logging
import os
import socket
import sys
from collections.abc import Iterator, Sequence
from typing import Optional

import torch
from torch.distributed.elastic.multiprocessing import SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.run import parse_args, run

from .errors import ArgumentRefused


def port_in_use(error: BaseException) -> bool:
    """Whether ``error`` is a rendezvous server that could not listen on
    its port because another process listens there."""
    text = str(error)
    return 'EADDRINUSE' in text or 'address already in use' in text.lower()


def free_port_after(port: int) -> Optional[int]:
    """The first port above ``port`` that this host can listen on now,
    for the advice of :func:`busy_port_message`; None if none is near."""
    for candidate in range(port + 1, min(port + 100, 65536)):
        with socket.socket() as sock:
            # as torch's TCPStore does: a port left in TIME_WAIT is free
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(('', candidate))
            except OSError:
                continue
            return candidate
    return None


def busy_port_message(port: int, variable: str) -> str:
    """One line for a rendezvous port that another process holds, naming
    the environment variable that sets it (``PORT`` of tools/dist_*.sh,
    ``MASTER_PORT`` of the other launchers)."""
    free = free_port_after(port)
    example = f', e.g. {variable}={free}' if free is not None else ''
    return (
        f'Port {port} is in use on this host (another run or program '
        f'listens on it), so the processes cannot meet there; set '
        f'{variable} to a free port{example}.'
    )


def gpu_shortage(processes: int, gpus: int) -> Optional[str]:
    """Why ``processes`` processes of a node cannot have one of its
    ``gpus`` CUDA devices each, or None if they can."""
    if processes <= gpus:
        return None
    return (
        f'{processes} processes on this node need one GPU each, but it has '
        f'{gpus} (torch.cuda.device_count(), which CUDA_VISIBLE_DEVICES '
        'limits)'
    )


@contextlib.contextmanager
def rendezvous_failures(
    port: Optional[int] = None, variable: str = 'MASTER_PORT'
) -> Iterator[None]:
    """Within it, a rendezvous port held by another process ends as an
    :class:`ArgumentRefused` of :func:`busy_port_message`, the original
    error as its cause. ``port`` defaults to ``MASTER_PORT`` of the
    environment, ``variable`` is the setting the message names."""
    try:
        yield
    except RuntimeError as error:  # torch's DistNetworkError
        if not port_in_use(error):
            raise
        if port is None:
            port = int(os.environ.get('MASTER_PORT') or 0)
        raise ArgumentRefused(busy_port_message(port, variable)) from error


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
    """``python -m t2t_preflight.launch``: :func:`torchrun`."""
    return torchrun(sys.argv[1:] if argv is None else argv)


if __name__ == '__main__':
    sys.exit(main())
