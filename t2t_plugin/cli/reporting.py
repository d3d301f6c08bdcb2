"""How ``tools/train.py`` and ``tools/test.py`` start a run: the config
with their options, and one line with an exit code for what stops it (the
run's checks are the Runner's and its hooks', which every tool gets)."""

import contextlib
import io
import os
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Callable

from rich.console import Console
from rich.progress import track

from t2t_preflight.config import ConfigError

from ..engine.checkpoint import CheckpointError, CheckpointMismatchError
from ..engine.distributed import LaunchError
from ..engine.hooks import RunCheckError, TrainingStopped

# What a wrong config or option raises while mmengine builds the run
# (model, datasets, loops, optimizer): a user mistake, not a bug.
BUILD_ERRORS = (AssertionError, ValueError, TypeError, KeyError)
# What the run's checks raise: their messages are one line for the user.
CHECK_ERRORS = (
    ConfigError,
    RunCheckError,
    TrainingStopped,
    CheckpointError,
    CheckpointMismatchError,
    FileNotFoundError,
)
# What loading a model raises on a user mistake (SyntaxError: a broken
# config, ImportError: a missing toolbox).
LOAD_ERRORS = (OSError, ValueError, TypeError, SyntaxError, ImportError)


def progress(
    items: Sequence, description: str, console: Console, always: bool = False
) -> Iterable:
    """``items`` with a transient bar on ``console`` where someone watches:
    a terminal, and several items unless ``always``."""
    return track(
        items,
        description=description,
        console=console,
        transient=True,
        disable=not console.is_terminal or (len(items) == 1 and not always),
    )


def one_line(error: BaseException) -> str:
    """The first line of an error's message (its type when it has none)."""
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def run_reported(
    action: Callable, config: str, building: bool = False
) -> tuple[int, Any]:
    """Run ``action`` (building the Runner, or its ``train`` / ``test``):
    the exit code and what it returned. The errors of the run's checks
    (the machine's too: the Runner turns them into check errors) become
    one line and exit code 1 (2: processes not started as ``--launcher``
    says; 130 for Ctrl-C); anything else keeps its traceback.

    Args:
        action (Callable): What to run.
        config (str): Its file, for the messages.
        building (bool): ``action`` builds the Runner: a wrong config's
            errors (:data:`BUILD_ERRORS`) are one line too, unless
            ``T2T_DEBUG=1``.
    """
    try:
        return 0, action()
    except LaunchError as error:
        print(error, file=sys.stderr)
        return 2, None
    except CHECK_ERRORS as error:
        message = ' '.join(str(error).split())
    except BUILD_ERRORS as error:
        if not building or os.environ.get('T2T_DEBUG') == '1':
            raise
        message = (
            f'{config}: {type(error).__name__}: {" ".join(str(error).split())}'
            ' (set T2T_DEBUG=1 for the traceback)'
        )
    except KeyboardInterrupt:
        print('Interrupted; resume with --resume.', file=sys.stderr)
        return 130, None
    print(message, file=sys.stderr)
    return 1, None


# A line of mmengine's logger that is not a warning or an error: its
# time, the logger's name and the level.
_INFO_RECORD = re.compile(r'^\d\d/\d\d \d\d:\d\d:\d\d - \S+ - INFO - ')
# The progress lines of mmengine's LoggerHook.
_PROGRESS = re.compile(r' - INFO - (Epoch|Iter)\((train|val|test)\)')


class _ProgressOnly(io.TextIOBase):
    """A stream that passes to ``stream`` all but mmengine's INFO records
    that are not progress lines."""

    def __init__(self, stream) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        plain = re.sub(r'\x1b\[[0-9;]*m', '', text)
        if not _INFO_RECORD.match(plain) or _PROGRESS.search(plain):
            self.stream.write(text)
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()


@contextlib.contextmanager
def progress_only(enabled: bool = True) -> Iterator[None]:
    """Within it (if ``enabled``: ``--quiet``), print mmengine's progress
    lines, warnings and errors and what is not a log record (the tool's
    own lines), not the rest of its INFO records (environment, config,
    hooks). The run's log file, written by the logger itself, keeps them
    all; the logger writes to the ``sys.stdout`` of the moment it is
    made."""
    if not enabled:
        yield
        return
    original = sys.stdout
    sys.stdout = _ProgressOnly(original)
    try:
        yield
    finally:
        sys.stdout = original
