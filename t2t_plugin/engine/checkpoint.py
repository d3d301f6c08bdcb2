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
  and Windows).
"""
import os
import os.path as osp
import pickle
import tempfile
from pathlib import Path
from typing import Callable, List, Tuple, Union

import numpy as np
import torch
from mmengine.fileio import LocalBackend, register_backend
from mmengine.logging import HistoryBuffer

_STATISTICS_METHODS = ('min', 'max', 'current', 'mean')


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
    # ``numpy._core``; a file names the module of the numpy that wrote it.
    multiarray = getattr(np, '_core', np.core).multiarray
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
    torch.serialization.add_safe_globals(checkpoint_safe_globals())


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
            dir=folder, prefix=f'.{osp.basename(filepath)}.', suffix='.tmp')
        try:
            with os.fdopen(fd, 'wb') as f:
                f.write(obj)
                f.flush()
                os.fsync(f.fileno())
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
