"""Reading pickled and YAML data files without running code from them:
mmengine's ``load`` (``ann_file``) reads ``.pkl`` with ``pickle.load``,
which calls whatever global a file names, and ``.yaml`` honouring
``!!python/...`` tags."""

import _compat_pickle
import codecs
import collections
import io
import pickle
import re
import sys
from collections.abc import Mapping
from typing import Any, BinaryIO

import numpy as np
import torch
import yaml
from mmengine.fileio import PickleHandler, YamlHandler, register_handler

# numpy 1.26 has only a stub of ``numpy._core``; numpy 2 warns on
# ``numpy.core``
try:
    from numpy._core import multiarray, numeric
except ImportError:
    from numpy.core import multiarray, numeric


class UnsafePickleError(pickle.UnpicklingError, ValueError):
    """A pickled data file names a global that data files do not need (a
    ValueError too: the tools report it as a user mistake, in one line)."""


class UnsafeDataFileError(UnsafePickleError):
    """A data file that would run code when read; the message is one line."""


# (module, name) -> object: what rebuilds arrays, under the module names of
# numpy 1 and 2 (protocol 5 writes arrays as buffers for _frombuffer), and
# ``_codecs.encode``, a pure function Python 3 writes bytes with.
_ALLOWED = {
    ('numpy', 'ndarray'): np.ndarray,
    ('numpy', 'dtype'): np.dtype,
    ('_codecs', 'encode'): codecs.encode,
}
for _core in ('numpy.core', 'numpy._core'):
    _ALLOWED[(f'{_core}.multiarray', '_reconstruct')] = multiarray._reconstruct
    _ALLOWED[(f'{_core}.multiarray', 'scalar')] = multiarray.scalar
    _ALLOWED[(f'{_core}.numeric', '_frombuffer')] = numeric._frombuffer


class AllowListUnpickler(pickle.Unpickler):
    """An unpickler that resolves only the globals of :attr:`allowed`
    (``(module, name) -> object``, set by subclasses); any other global is
    refused with :class:`UnsafePickleError` before it is resolved."""

    allowed: Mapping[tuple[str, str], Any] = _ALLOWED

    def find_class(self, module: str, name: str) -> Any:
        # protocol 2 files name Python 2 modules (``__builtin__``)
        module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        found = self.allowed.get((module, name))
        if found is None:
            raise UnsafePickleError(f'{module}.{name}')
        return found


def load_data_pickle(file: BinaryIO, path: str = '') -> Any:
    """Unpickle an open data file that may hold only data: containers, str,
    bytes, numbers and numpy arrays (Python 2 strings as latin-1 ``str``,
    as in the CIFAR files); any other global raises
    :class:`UnsafePickleError`, naming ``path``."""
    try:
        return AllowListUnpickler(file, encoding='latin1').load()
    except UnsafePickleError as error:
        raise UnsafePickleError(
            f'{path or "The pickle file"} holds {error}, which is not data; '
            'refusing to load it (replace the file with a clean copy of the '
            'dataset).'
        ) from None


def _tensor_storage(data: bytes) -> Any:
    # torch pickles a tensor's storage as a nested torch.save stream, read
    # back by torch.storage._load_from_bytes with weights_only=False; the
    # same stream read with weights_only=True holds storages only.
    return torch.load(io.BytesIO(data), weights_only=True)


class _AnnotationUnpickler(AllowListUnpickler):
    """Data globals plus the containers pickle names by global and what a
    pickled tensor needs, as mmengine's ``DumpResults`` writes them."""

    allowed = {
        **_ALLOWED,
        ('builtins', 'set'): set,
        ('builtins', 'frozenset'): frozenset,
        ('builtins', 'complex'): complex,
        ('builtins', 'bytearray'): bytearray,
        ('collections', 'OrderedDict'): collections.OrderedDict,
        ('torch._utils', '_rebuild_tensor_v2'): (
            torch._utils._rebuild_tensor_v2
        ),
        ('torch.storage', '_load_from_bytes'): _tensor_storage,
    }


def _refuse(what: str) -> UnsafeDataFileError:
    # mmengine's load hands its handlers an in-memory copy of the file: its
    # name is the ``file`` argument of ``load`` up the stack
    frame = sys._getframe(2)
    while frame is not None and not (
        frame.f_code.co_name == 'load'
        and 'mmengine' in frame.f_code.co_filename
    ):
        frame = frame.f_back
    file = frame.f_locals.get('file') if frame is not None else None
    path = file if isinstance(file, str) else ''
    return UnsafeDataFileError(
        f'{path or "A data file"} holds {what}, which a data file does not '
        'need; refusing to load it: write it as JSON (.json), which holds '
        'data only.'
    )


class SafePickleHandler(PickleHandler):
    """mmengine's pickle handler, reading through an allow-list."""

    def load_from_fileobj(self, file, **kwargs):
        try:
            return _AnnotationUnpickler(file, **kwargs).load()
        except UnsafePickleError as error:
            raise _refuse(f'the Python global {error}') from None


# libyaml's parser where PyYAML has it, as mmengine's own handler: an
# ``mmdet::`` or ``mmseg::`` config base reads every model-index file of
# the toolbox (3,774 for one detection config, which loads 6x slower with
# the pure-Python parser).
_SAFE_LOADER = getattr(yaml, 'CSafeLoader', yaml.SafeLoader)


class SafeYamlHandler(YamlHandler):
    """mmengine's YAML handler, reading with PyYAML's safe loader."""

    def load_from_fileobj(self, file, **kwargs):
        kwargs['Loader'] = _SAFE_LOADER
        try:
            return yaml.load(file, **kwargs)
        except yaml.constructor.ConstructorError as error:
            found = re.search(r"tag '([^']+)'", str(error.problem))
            tag = f'the YAML tag {found.group(1)}' if found else 'a YAML tag'
            raise _refuse(tag) from None


# Process-wide on purpose: mmengine picks a file handler by the file's
# extension alone, with no per-dataset choice, and BaseDataset reads
# ann_file through it; files of data only read the same as before.
register_handler(['pkl', 'pickle'])(SafePickleHandler)
register_handler(['yaml', 'yml'])(SafeYamlHandler)
