"""How ``tools/train.py`` and ``tools/test.py`` start a run: the config
with their options, and one line with an exit code for what stops it (the
run's checks are the Runner's and its hooks', which every tool gets)."""

import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any, Callable, Optional

from rich.console import Console
from rich.progress import track

from t2t_preflight.config import environment_variable
from t2t_preflight.errors import ConfigError

from ..runtime.checkpoint import CheckpointError, CheckpointMismatchError
from ..runtime.checkpoint_fit import ClassCountError
from ..runtime.distributed import LaunchError
from ..runtime.hooks import RunCheckError, TrainingStopped

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


def run_config_advice(checkpoint: str, classes: int, config: str) -> str:
    """What to give a tool that only runs a model for a checkpoint of
    ``classes`` classes that ``config`` does not have: the config its run
    saved beside it (mmengine writes it to the work dir, with the options
    the run was given), or the environment variable or option that sets
    the number."""
    folder = os.path.dirname(os.path.abspath(checkpoint))
    saved = sorted(
        name
        for name in (os.listdir(folder) if os.path.isdir(folder) else ())
        if name.endswith('.py')
    )
    if len(saved) == 1:
        path = os.path.join(os.path.dirname(checkpoint), saved[0])
        run = f'the config its run saved, {path}, '
    else:
        run = 'the config its run saved in the work dir '
    if os.path.isfile(config):
        with open(config, encoding='utf-8') as file:
            variable = environment_variable(file.read(), 'num_classes')
        if variable:
            return f'give the tool {run}or set {variable}={classes} before it'
    return (
        f'give the tool {run}or add --cfg-options '
        f'model.head.num_classes={classes}'
    )


def running_line(error: BaseException, config: str, checkpoint: str) -> str:
    """The one line of an error of a tool that only runs a model (test,
    inference, export, drawing) from ``config`` and ``checkpoint``: a
    checkpoint of another number of classes says which config or option
    fits it, instead of the training's advice."""
    if isinstance(error, ClassCountError) and error.advice:
        advice = run_config_advice(checkpoint, error.classes, config)
        error = error.advising(advice)
    return one_line(error)


def run_reported(
    action: Callable,
    config: str,
    building: bool = False,
    checkpoint: Optional[str] = None,
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
        checkpoint (str, optional): The checkpoint of a run that only
            runs the model (a test): its errors say so
            (:func:`running_line`).
    """
    try:
        return 0, action()
    except LaunchError as error:
        print(error, file=sys.stderr)
        return 2, None
    except CHECK_ERRORS as error:
        if checkpoint is not None:
            error = running_line(error, config, checkpoint)
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
