"""Checkpoint files that survive crashes and load on torch >= 2.6.

Two problems of mmengine 0.10 on recent torch are handled here:

* ``torch.load`` defaults to ``weights_only=True`` since torch 2.6, and the
  restricted unpickler refuses mmengine's full training checkpoints (the
  message hub stores :class:`~mmengine.logging.HistoryBuffer` objects with
  numpy arrays inside). Instead of switching the safety off, the few plain
  data types such checkpoints contain are added to torch's allow-list; any
  other global in a file (the code-execution risk ``weights_only`` guards
  against) is still refused.
* mmengine writes a checkpoint in place, so a run killed while saving leaves
  a truncated ``epoch_N.pth`` that ``--resume auto`` then picks up. The
  ``atomic_local`` file backend writes to a temporary file in the same
  folder and renames it over the target (``os.replace`` is atomic on POSIX
  and Windows). The temporary file gets the permissions an ordinary write
  would give (the target's, or ``0o666`` less the umask), and a run removes
  the temporary files that a hard kill left behind
  (:func:`remove_stale_temp_files`).

The tools also check a checkpoint before using it
(:func:`checkpoint_read_error`) and load test checkpoints strictly
(:func:`load_checkpoints_strictly`), so that a broken file or the checkpoint
of another model is one clear line instead of a long traceback or a silent
score of random weights.
"""
import os
import os.path as osp
import pickle
import re
import tempfile
from pathlib import Path
from typing import Callable, List, Optional, Tuple, Union

import numpy as np
import torch
from mmengine.fileio import LocalBackend, register_backend
from mmengine.logging import HistoryBuffer
from mmengine.runner import Runner

from ..compat import add_safe_globals

_STATISTICS_METHODS = ('min', 'max', 'current', 'mean')

# The process umask can only be read by setting it; read it once, before
# any thread could create files under a temporary umask of 0.
_UMASK = os.umask(0)
os.umask(_UMASK)

# AtomicLocalBackend's temporary files: '.<target name>.<8 random
# characters of tempfile.mkstemp>.tmp' next to the target.
_TEMP_SUFFIX = '.tmp'
_STALE_TEMP = re.compile(r'^\..+\.[a-z0-9_]{8}\.tmp$')


def _history_buffer_attribute(owner: type, name: str) -> Callable:
    """Stand-in for ``getattr`` while unpickling, limited to HistoryBuffer.

    A pickled :class:`HistoryBuffer` refers to its built-in statistics
    methods as ``getattr(HistoryBuffer, name)``. Allowing the real
    ``getattr`` would let a file reach any attribute of any allowed object,
    so only these four methods are resolved.
    """
    if owner is not HistoryBuffer or name not in _STATISTICS_METHODS:
        raise pickle.UnpicklingError(
            f'Refusing getattr({owner!r}, {name!r}) while loading a '
            'checkpoint: only HistoryBuffer statistics methods are allowed.')
    return getattr(HistoryBuffer, name)


def checkpoint_safe_globals() -> List[Union[object, Tuple[object, str]]]:
    """Globals of mmengine training checkpoints that are safe to unpickle.

    Returns:
        list: :class:`HistoryBuffer` (a logged scalar's history), the numpy
        helpers that rebuild its arrays and scalars, and the restricted
        ``getattr`` of :func:`_history_buffer_attribute`, in the form
        :func:`torch.serialization.add_safe_globals` takes, plus numpy's
        dtype classes. None of them runs code that a file could choose.
    """
    # numpy 2 moved the pickling helpers from ``numpy.core`` to
    # ``numpy._core`` (numpy 1.26 re-exports them there); a file names the
    # module of the numpy that wrote it.
    try:
        from numpy._core import multiarray
    except ImportError:
        from numpy.core import multiarray
    # numpy >= 1.25 gives each dtype its own class (``Float64DType``, ...),
    # which the file names when it restores a dtype's state.
    dtype_classes = {type(np.dtype(code)) for code in
                     np.typecodes['AllFloat'] + np.typecodes['AllInteger'] +
                     '?'}
    return [
        HistoryBuffer,
        np.ndarray,
        np.dtype,
        *sorted(dtype_classes, key=str),
        multiarray._reconstruct,
        multiarray.scalar,
        (_history_buffer_attribute, 'builtins.getattr'),
    ]


def allow_mmengine_checkpoints() -> None:
    """Let ``torch.load(weights_only=True)`` read mmengine checkpoints."""
    add_safe_globals(checkpoint_safe_globals())


class AtomicLocalBackend(LocalBackend):
    """Local file backend whose writes are all-or-nothing.

    Use it through ``backend_args=dict(backend='atomic_local')`` of
    ``CheckpointHook`` (set in ``configs/_base_/default_runtime.py``).
    """

    def put(self, obj: bytes, filepath: Union[str, Path]) -> None:
        """Write ``obj`` to ``filepath`` atomically.

        Args:
            obj (bytes): Data to write.
            filepath (str | Path): Target file; missing folders are made.
        """
        folder = osp.dirname(osp.abspath(filepath))
        os.makedirs(folder, exist_ok=True)
        fd, tmp_path = tempfile.mkstemp(
            dir=folder,
            prefix=f'.{osp.basename(filepath)}.',
            suffix=_TEMP_SUFFIX)
        try:
            with os.fdopen(fd, 'wb') as f:
                f.write(obj)
                f.flush()
                os.fsync(f.fileno())
            # mkstemp makes the file private (0600); give it the mode an
            # in-place write would have, so that others can read checkpoints.
            mode = (os.stat(filepath).st_mode & 0o7777
                    if osp.exists(filepath) else 0o666 & ~_UMASK)
            os.chmod(tmp_path, mode)
            os.replace(tmp_path, filepath)
        except BaseException:
            if osp.exists(tmp_path):
                os.remove(tmp_path)
            raise

    def put_text(self,
                 obj: str,
                 filepath: Union[str, Path],
                 encoding: str = 'utf-8') -> None:
        """Write text to ``filepath`` atomically.

        Args:
            obj (str): Text to write.
            filepath (str | Path): Target file.
            encoding (str): Text encoding. Defaults to ``'utf-8'``.
        """
        self.put(obj.encode(encoding), filepath)


register_backend('atomic_local', AtomicLocalBackend, force=True)


def remove_stale_temp_files(folder: str) -> List[str]:
    """Delete the temporary files that AtomicLocalBackend left in a folder.

    A run killed hard (SIGKILL, power loss) while saving leaves its hidden
    ``.epoch_N.pth.XXXXXXXX.tmp``; nothing reads it again. Only files of
    that pattern directly inside ``folder`` are removed.

    Args:
        folder (str): A work dir; a missing folder has nothing to remove.

    Returns:
        list[str]: The paths removed.
    """
    if not osp.isdir(folder):
        return []
    removed = []
    for name in sorted(os.listdir(folder)):
        path = osp.join(folder, name)
        if _STALE_TEMP.match(name) and osp.isfile(path):
            try:
                os.remove(path)
            except FileNotFoundError:  # another rank removed it first
                continue
            removed.append(path)
    return removed


def checkpoint_read_error(path: str) -> Optional[str]:
    """Why ``torch.load`` cannot read a checkpoint, in one line, or None.

    Args:
        path (str): A local checkpoint file.

    Returns:
        str | None: ``'Cannot read checkpoint PATH: ...'`` for a truncated,
        corrupt or foreign file, or for one that holds objects the safe
        unpickler refuses; None when the file loads.
    """
    try:
        torch.load(path, map_location='cpu')
    # A damaged file fails anywhere in torch's readers, with any type.
    except Exception as error:
        text = str(error)
        # torch's weights_only failure: advice first, the reason after it.
        marker = 'WeightsUnpickler error:'
        if marker in text:
            text = text.split(marker, 1)[1]
        short = next((line.strip() for line in text.splitlines()
                      if line.strip()), '')
        if short.startswith('Unsupported global'):
            return (f'Cannot read checkpoint {path}: it holds objects that '
                    "torch's safe loader refuses "
                    f"({short.split(' was not ')[0]}); load only mmengine "
                    'checkpoints or plain state dicts.')
        short = short.split('. ')[0][:120]
        detail = f'{type(error).__name__}: {short}' if short else type(
            error).__name__
        return (f'Cannot read checkpoint {path}: not a complete PyTorch '
                f'checkpoint ({detail}).')
    return None


class CheckpointMismatchError(RuntimeError):
    """A checkpoint whose weights do not fit the model of the config."""


def load_checkpoints_strictly(runner: Runner) -> None:
    """Make a Runner load ``load_from`` with ``strict=True``.

    The runner keeps loading through its own ``load_checkpoint`` (after
    ``before_run``, with the ``after_load_checkpoint`` hooks, so that
    ``EMAHook`` sees the checkpoint); only missing, unexpected or
    wrongly-shaped weights now raise :class:`CheckpointMismatchError`
    instead of a warning in the log.

    Args:
        runner (Runner): An mmengine Runner, before ``test()`` or ``val()``.
    """
    load = runner.load_checkpoint

    def load_strictly(filename: str, **kwargs) -> dict:
        kwargs['strict'] = True
        try:
            return load(filename, **kwargs)
        except RuntimeError as error:
            # mmengine's message: a header line, then one line per problem.
            problems = [line.strip().rstrip('.')
                        for line in str(error).splitlines() if line.strip()]
            detail = '; '.join(problems[1:] or problems)
            if len(detail) > 600:  # e.g. hundreds of unexpected keys
                detail = detail[:600] + ' ...'
            raise CheckpointMismatchError(f'{detail}.') from error

    runner.load_checkpoint = load_strictly
