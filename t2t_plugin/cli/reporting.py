"""How ``tools/train.py`` and ``tools/test.py`` start a run: their own
checks before the Runner is built, and one line with an exit code for
what stops it (the run's checks are hooks that every tool gets)."""

import errno
import os
import os.path as osp
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Callable, Optional

from mmengine.config import Config
from mmpretrain.registry import DATASETS
from rich.console import Console
from rich.progress import track

from .. import doc_pages
from ..engine.checkpoint import CheckpointError, CheckpointMismatchError
from ..engine.config import ConfigError, load_config
from ..engine.hooks import RunCheckError, TrainingStopped
from ..engine.hooks.checkpoint_check_hook import init_checkpoints
from .launch import dist_failure_message, prepare_launcher

# What a wrong config or option raises while mmengine builds the run
# (model, datasets, loops, optimizer): a user mistake, not a bug.
BUILD_ERRORS = (AssertionError, ValueError, TypeError, KeyError)
# What the run's checks raise: their messages are one line for the user.
CHECK_ERRORS = (
    RunCheckError,
    TrainingStopped,
    CheckpointError,
    CheckpointMismatchError,
    FileNotFoundError,
)
# What loading a model raises on a user mistake (SyntaxError: a broken
# config, ImportError: a missing toolbox).
LOAD_ERRORS = (OSError, ValueError, TypeError, SyntaxError, ImportError)
# Datasets that read ``data_root/<split>`` when ``split`` is given.
_SPLIT_FOLDER_DATASETS = ('ImageNet', 'ImageNet21k')


def _dataset_paths(dataset: dict) -> Iterator[str]:
    """Local paths a dataset config reads, outermost first."""
    if 'dataset' in dataset:  # RepeatDataset, ClassBalancedDataset, ...
        yield from _dataset_paths(dataset['dataset'])
    for child in dataset.get('datasets', ()):  # ConcatDataset
        yield from _dataset_paths(child)
    root = dataset.get('data_root') or ''
    if '://' in root:
        return
    if root:
        yield root
    prefix = dataset.get('data_prefix') or ''
    prefixes = prefix.values() if isinstance(prefix, dict) else [prefix]
    for value in [dataset.get('ann_file'), *prefixes]:
        if isinstance(value, str) and value and '://' not in value:
            yield osp.join(root, value)
    kind = str(dataset.get('type', '')).split('.')[-1]
    if kind in _SPLIT_FOLDER_DATASETS and dataset.get('split') and root:
        yield osp.join(root, dataset['split'])
    # CIFAR classes read a fixed sub-folder of data_root.
    base_folder = getattr(
        DATASETS.get(kind) if kind else None, 'base_folder', None
    )
    if root and isinstance(base_folder, str):
        yield osp.join(root, base_folder)


def find_missing_inputs(
    cfg: Config,
    dataloaders: Optional[list[str]] = None,
    check_load_from: bool = True,
    check_init_cfg: bool = True,
) -> list[str]:
    """One line per missing dataset path or checkpoint of a config (a
    missing root without the paths below it), checked before the Runner
    is built: datasets report a missing folder deep inside it.

    Args:
        cfg (Config): The config of the run.
        dataloaders (list[str], optional): Dataloader keys to check.
            Defaults to the training, validation and test loaders.
        check_load_from (bool): Also check ``load_from``. Defaults to True.
        check_init_cfg (bool): Also check the model's ``init_cfg``
            checkpoints. Defaults to True.
    """
    keys = dataloaders or [f'{s}_dataloader' for s in ('train', 'val', 'test')]
    if cfg.get('default_scope') in ('mmdet', 'mmseg'):
        data_doc = checkpoint_doc = doc_pages.DENSE_PREDICTION
    else:
        data_doc = doc_pages.DATA_PREPARATION
        checkpoint_doc = doc_pages.TRAINING
    messages, seen = [], set()

    def report(path: str, what: str, doc: str) -> None:
        if path not in seen and not osp.exists(path):
            seen.add(path)
            messages.append(f'{what} not found: expected {path} (see {doc}).')

    for key in keys:
        loader = cfg.get(key)
        if not isinstance(loader, dict) or 'dataset' not in loader:
            continue
        for path in _dataset_paths(loader['dataset']):
            report(path, 'Dataset', data_doc)
            if path in seen:
                break  # the deeper paths of a missing root add nothing
    checkpoints = (
        list(init_checkpoints(cfg.get('model', {}))) if check_init_cfg else []
    )
    if check_load_from and cfg.get('load_from'):
        checkpoints.append(cfg.load_from)
    for path in checkpoints:
        if '://' not in path:
            report(path, 'Checkpoint', checkpoint_doc)
    return messages


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


def _loop_start(path: str) -> str:
    """A looping path cut at the link that closes the loop."""
    parts = path.split(os.sep)
    for index, part in enumerate(parts):
        if part and part in parts[index + 1 :]:
            return os.sep.join(parts[: parts.index(part, index + 1)])
    return path


def os_error_line(error: OSError, cfg: Config) -> Optional[str]:
    """One line for the OSErrors a user can act on, else None."""
    where = error.filename or cfg.get('work_dir')
    if error.errno == errno.ENOSPC:
        return (
            f'No space left on the device while writing {where}: free some '
            'space, then resume with --resume (the last complete checkpoint '
            'is kept).'
        )
    if error.errno == errno.ELOOP:
        return (
            f'Cannot read {_loop_start(str(where))}: a symbolic link loop '
            '(a link to a folder above it); remove or replace the link.'
        )
    if error.errno in (errno.EACCES, errno.EROFS):
        return f'Cannot write {where}: {error.strerror}.'
    return None


def configure_run(
    args: Any,
    merge_args: Callable[[Config, Any], Config],
    problems: Callable[[Config, Any], list[str]],
) -> tuple[Optional[Config], int]:
    """The config of ``args.config`` with ``merge_args`` applied and the
    launcher set up, or None and the exit code after printing why not.

    Args:
        args: The parsed command line (``config``, ``launcher``).
        merge_args: Applies the options to the config.
        problems: The lines that stop the run before it is built.
    """
    try:
        cfg = merge_args(load_config(args.config), args)
    except ConfigError as error:  # the config itself, a missing file too
        print(error, file=sys.stderr)
        return None, 2
    except (ValueError, KeyError) as error:
        print(f'Invalid options for {args.config}: {error}', file=sys.stderr)
        return None, 2
    lines = problems(cfg, args)
    if lines:
        print('\n'.join(lines), file=sys.stderr)
        return None, 1
    error = prepare_launcher(cfg, args.launcher)
    if error:
        print(error, file=sys.stderr)
        return None, 2
    return cfg, 0


def run_reported(
    action: Callable, cfg: Config, config: str, building: bool = False
) -> tuple[int, Any]:
    """Run ``action`` (building the Runner, or its ``train`` / ``test``):
    the exit code and what it returned. The errors of the run's checks and
    of the machine become one line and exit code 1 (130 for Ctrl-C);
    anything else keeps its traceback.

    Args:
        action (Callable): What to run.
        cfg (Config): The run's config.
        config (str): Its file, for the messages.
        building (bool): ``action`` builds the Runner: a wrong config's
            errors (:data:`BUILD_ERRORS`) are one line too, unless
            ``T2T_DEBUG=1``.
    """
    try:
        return 0, action()
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
    except OSError as error:
        message = os_error_line(error, cfg)
        if message is None:
            raise
    except RuntimeError as error:
        message = dist_failure_message(error, cfg)
        if message is None:
            raise
    print(message, file=sys.stderr)
    return 1, None
