"""mmengine's data-file readers for pickle and YAML, made safe.

``mmengine.fileio.load`` (which ``BaseDataset`` uses for ``ann_file``,
mmpretrain's analysis tools for predictions) reads ``.pkl`` with
``pickle.load`` and ``.yaml`` with a loader that honours ``!!python/...``
tags: a crafted annotation file runs code as the dataset is built. The
handlers here read the same files without that: pickles through an
allow-list unpickler (plain containers, numbers, strings, numpy arrays and
torch tensors, as mmengine's own ``DumpResults`` writes them), YAML through
``yaml.SafeLoader``. Writing is left as it is.
"""

import collections
import io
import re
import sys
from typing import Any, Optional

import torch
import yaml
from mmengine.fileio import PickleHandler, YamlHandler, register_handler

from .safe_pickle import _ALLOWED, AllowListUnpickler, UnsafePickleError


class UnsafeDataFileError(UnsafePickleError):
    """A data file that would run code when read; the message is one line."""


def _tensor_storage(data: bytes) -> Any:
    # torch pickles a tensor's storage as a nested torch.save stream, read
    # back by torch.storage._load_from_bytes with weights_only=False; the
    # same stream read with weights_only=True holds storages only.
    return torch.load(io.BytesIO(data), weights_only=True)


# (module, name) -> object: the data globals of CIFAR-like files, the
# containers pickle names by global, and what a pickled tensor needs.
_ANNOTATION_ALLOWED = {
    **_ALLOWED,
    ('builtins', 'set'): set,
    ('builtins', 'frozenset'): frozenset,
    ('builtins', 'complex'): complex,
    ('builtins', 'bytearray'): bytearray,
    ('collections', 'OrderedDict'): collections.OrderedDict,
    ('torch._utils', '_rebuild_tensor_v2'): torch._utils._rebuild_tensor_v2,
    ('torch.storage', '_load_from_bytes'): _tensor_storage,
}

_SAFE_FORMAT = 'write it as JSON (.json), which holds data only'


class _AnnotationUnpickler(AllowListUnpickler):
    allowed = _ANNOTATION_ALLOWED


def _path_being_loaded() -> str:
    """The file ``mmengine.fileio.load`` is reading, for messages.

    mmengine hands its handlers an in-memory copy of the file, not its
    name; the name is the ``file`` argument of ``load`` two frames up.
    """
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name == 'load' and 'mmengine' in (
            frame.f_code.co_filename
        ):
            file = frame.f_locals.get('file')
            return str(file) if isinstance(file, str) else ''
        frame = frame.f_back
    return ''


def _refuse(path: str, what: str) -> UnsafeDataFileError:
    return UnsafeDataFileError(
        f'{path or "A data file"} holds {what}, which a data file does not '
        f'need; refusing to load it: {_SAFE_FORMAT}.'
    )


class SafePickleHandler(PickleHandler):
    """mmengine's pickle handler, reading through an allow-list."""

    def load_from_fileobj(self, file, path: Optional[str] = None, **kwargs):
        try:
            return _AnnotationUnpickler(file, **kwargs).load()
        except UnsafePickleError as error:
            raise _refuse(
                path or _path_being_loaded(), f'the Python global {error}'
            ) from None

    def load_from_path(self, filepath, **kwargs):
        with open(filepath, 'rb') as f:
            return self.load_from_fileobj(f, path=str(filepath), **kwargs)


class SafeYamlHandler(YamlHandler):
    """mmengine's YAML handler, reading with ``yaml.SafeLoader``."""

    def load_from_fileobj(self, file, path: Optional[str] = None, **kwargs):
        kwargs['Loader'] = yaml.SafeLoader
        try:
            return yaml.load(file, **kwargs)
        except yaml.constructor.ConstructorError as error:
            found = re.search(r"tag '([^']+)'", str(error.problem))
            tag = f'the YAML tag {found.group(1)}' if found else 'a YAML tag'
            raise _refuse(path or _path_being_loaded(), tag) from None

    def load_from_path(self, filepath, mode: str = 'r', **kwargs):
        with open(filepath, mode) as f:
            return self.load_from_fileobj(f, path=str(filepath), **kwargs)


# Process-wide on purpose: mmengine picks a file handler by the file's
# extension alone, with no per-dataset choice, and BaseDataset reads
# ann_file through it; files of data only read the same as before.
register_handler(['pkl', 'pickle'])(SafePickleHandler)
register_handler(['yaml', 'yml'])(SafeYamlHandler)
