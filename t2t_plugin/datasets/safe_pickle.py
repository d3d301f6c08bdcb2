"""Reading pickled data files without running code from them.

``pickle.load`` calls whatever global a file names (``os.system`` through a
``__reduce__`` payload, for one), so a crafted dataset file executes code as
soon as the dataset is built. Data files such as the CIFAR batches only need
plain containers and numpy arrays; :func:`load_data_pickle` resolves exactly
the globals that rebuild those and refuses every other one. torch's
``weights_only`` unpickler does not fit here: it is made for checkpoints,
allows torch types instead of numpy's, and its numpy allow-list is global
state shared with checkpoint loading.
"""

import _compat_pickle
import codecs
import pickle
from collections.abc import Mapping
from typing import Any, BinaryIO

import numpy as np


class UnsafePickleError(pickle.UnpicklingError, ValueError):
    """A pickled data file names a global that data files do not need.

    Also a ValueError: the tools report it as a user mistake, in one line.
    """


def _numpy_globals() -> dict[tuple[str, str], Any]:
    """The numpy functions and classes that rebuild arrays, by the module
    names numpy 1 (``numpy.core``) and numpy 2 (``numpy._core``) write."""
    # numpy 1.26 has only a stub of ``numpy._core``; numpy 2 warns on
    # ``numpy.core``
    try:
        from numpy._core import multiarray, numeric
    except ImportError:
        from numpy.core import multiarray, numeric
    found = {}
    for module in ('numpy.core', 'numpy._core'):
        found[(f'{module}.multiarray', '_reconstruct')] = (
            multiarray._reconstruct
        )
        found[(f'{module}.multiarray', 'scalar')] = multiarray.scalar
        # protocol 5 writes arrays as buffers rebuilt by _frombuffer
        found[(f'{module}.numeric', '_frombuffer')] = numeric._frombuffer
    found[('numpy', 'ndarray')] = np.ndarray
    found[('numpy', 'dtype')] = np.dtype
    return found


# (module, name) -> object. Python 3 writes bytes with protocol 2 as
# ``_codecs.encode(text, 'latin1')``, a pure function.
_ALLOWED = {**_numpy_globals(), ('_codecs', 'encode'): codecs.encode}


class AllowListUnpickler(pickle.Unpickler):
    """An unpickler that resolves only the globals of :attr:`allowed`.

    Subclasses set ``allowed``, ``(module, name) -> object``; any other
    global a file names is refused with :class:`UnsafePickleError` before
    it is resolved, so nothing in the file runs.
    """

    allowed: Mapping[tuple[str, str], Any] = {}

    def find_class(self, module: str, name: str) -> Any:
        # protocol 2 files name Python 2 modules (``__builtin__``)
        module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        found = self.allowed.get((module, name))
        if found is None:
            raise UnsafePickleError(f'{module}.{name}')
        return found


class _DataUnpickler(AllowListUnpickler):
    """Unpickler that only resolves the globals of :data:`_ALLOWED`."""

    allowed = _ALLOWED


def load_data_pickle(file: BinaryIO, path: str = '') -> Any:
    """Unpickle a data file that may hold only data.

    Dicts, lists, tuples, str, bytes, numbers and numpy arrays load; any
    other global the file names is refused before it is called, so nothing
    in the file runs.

    Args:
        file (BinaryIO): The open file.
        path (str): Its path, for the error message. Defaults to ``''``.

    Returns:
        Any: The unpickled object. Python 2 strings come back as latin-1
        ``str`` (the encoding of the CIFAR files).

    Raises:
        UnsafePickleError: The file names a global outside the allow-list
            (``'PATH holds MODULE.NAME, not data; refusing to load it.'``).
    """
    try:
        value = _DataUnpickler(file, encoding='latin1').load()
    except UnsafePickleError as error:
        raise UnsafePickleError(
            f'{path or "The pickle file"} holds {error}, which is not data; '
            'refusing to load it (replace the file with a clean copy of the '
            'dataset).'
        ) from None
    return value
