"""Reading pickled and YAML data files without running code from them:
mmengine's ``load`` (``ann_file``) reads ``.pkl`` with ``pickle.load``,
which calls whatever global a file names, and ``.yaml`` honouring
``!!python/...`` tags."""

import codecs
import collections
import io
import os.path as osp
import pickle
import re
from collections.abc import Mapping
from typing import Any, BinaryIO

import numpy as np
import torch
import yaml
from mmengine.fileio import PickleHandler, YamlHandler

from t2t_preflight.config import dataset_configs
from t2t_preflight.errors import DataFileError

from ..compat import numpy_pickle_globals, python3_module, rebuild_tensor

# (module, name) -> object: what rebuilds arrays, under the module names of
# numpy 1 and 2 (protocol 5 writes arrays as buffers for _frombuffer), and
# ``_codecs.encode``, a pure function Python 3 writes bytes with.
_ALLOWED = {
    ('numpy', 'ndarray'): np.ndarray,
    ('numpy', 'dtype'): np.dtype,
    ('_codecs', 'encode'): codecs.encode,
    **numpy_pickle_globals(),
}


class AllowListUnpickler(pickle.Unpickler):
    """An unpickler that resolves only the globals of :attr:`allowed`
    (``(module, name) -> object``, set by subclasses); any other global is
    refused with :class:`~t2t_preflight.errors.DataFileError` before it is
    resolved."""

    allowed: Mapping[tuple[str, str], Any] = _ALLOWED

    def find_class(self, module: str, name: str) -> Any:
        # protocol 2 files name Python 2 modules (``__builtin__``)
        module = python3_module(module)
        found = self.allowed.get((module, name))
        if found is None:
            raise DataFileError(f'holds the Python global {module}.{name}')
        return found


# What a damaged or cut pickle raises while it is read: the C unpickler's
# errors, and those of allowed constructors given garbage.
_DAMAGED_PICKLE = (
    pickle.UnpicklingError,
    EOFError,
    ValueError,
    TypeError,
    IndexError,
    KeyError,
    OverflowError,
)


def _tensor_storage(data: bytes) -> Any:
    # torch pickles a tensor's storage as a nested torch.save stream, read
    # back by torch.storage._load_from_bytes with weights_only=False; the
    # same stream read with weights_only=True holds storages only.
    return torch.load(io.BytesIO(data), weights_only=True)


class _DataUnpickler(AllowListUnpickler):
    """Data globals plus the containers pickle names by global and what a
    pickled tensor needs, as mmengine's ``DumpResults`` writes them; no
    persistent ids: a data file refers to nothing outside itself (pickle's
    own refusal is a bare UnpicklingError). Not on
    :class:`AllowListUnpickler`: torch.load sets its own
    ``persistent_load`` on the instance for checkpoints, which a method of
    the class would override."""

    allowed = {
        **_ALLOWED,
        ('builtins', 'set'): set,
        ('builtins', 'frozenset'): frozenset,
        ('builtins', 'complex'): complex,
        ('builtins', 'bytearray'): bytearray,
        ('collections', 'OrderedDict'): collections.OrderedDict,
        ('torch._utils', '_rebuild_tensor_v2'): rebuild_tensor(),
        ('torch.storage', '_load_from_bytes'): _tensor_storage,
    }

    def persistent_load(self, pid: Any) -> Any:
        raise DataFileError(
            'holds a persistent id (a reference to an object outside the file)'
        )


# The file extensions of the handlers registered below.
_HANDLED = ('.pkl', '.pickle', '.yaml', '.yml')


def annotation_files(dataset: Any) -> list[str]:
    """The ``ann_file`` paths of a dataset config (inside wrappers) that
    mmengine's ``load`` reads through the handlers of this module, joined
    to ``data_root`` as ``BaseDataset`` joins them."""
    return [
        osp.join(item.get('data_root') or '', item['ann_file'])
        for _, item in dataset_configs('', dataset)
        if isinstance(item.get('ann_file'), str)
        and item['ann_file'].endswith(_HANDLED)
    ]


def _refuse(problem: str) -> DataFileError:
    # mmengine's load hands its handlers an in-memory copy of the file and
    # no public way to its name: the refusal names the file where the
    # dataset's ann_file is known (SampleSeededRunner.build_dataloader)
    return DataFileError(
        f'{problem}, which a data file does not need; refusing to load it: '
        'replace it with a clean copy, or write it as JSON (.json), which '
        'holds data only.'
    )


class SafePickleHandler(PickleHandler):
    """mmengine's pickle handler, reading through an allow-list."""

    def load_from_fileobj(self, file, **kwargs):
        try:
            return _DataUnpickler(file, **kwargs).load()
        except DataFileError as error:
            raise _refuse(error.problem) from None
        except _DAMAGED_PICKLE as error:
            detail = ' '.join(str(error).split())[:120]
            kind = type(error).__name__ + (f': {detail}' if detail else '')
            raise DataFileError(
                f'is not a complete pickle file ({kind}); replace it with a '
                'clean copy, or write it as JSON (.json).'
            ) from None


def load_data_pickle(file: BinaryIO, path: str = '') -> Any:
    """Unpickle an open data file (Python 2 strings as latin-1 ``str``, as
    in the CIFAR files) through :class:`SafePickleHandler`'s allow-list:
    :class:`~t2t_preflight.errors.DataFileError` naming ``path``."""
    try:
        return SafePickleHandler().load_from_fileobj(file, encoding='latin1')
    except DataFileError as error:
        raise error.naming(path) from None


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
            raise _refuse(f'holds {tag}') from None
        except yaml.YAMLError as error:
            raise DataFileError(
                f'is not valid YAML ({_yaml_problem(error)}); fix the file, '
                'or write it as JSON (.json).'
            ) from None


def _yaml_problem(error: yaml.YAMLError) -> str:
    problem = getattr(error, 'problem', None) or type(error).__name__
    mark = getattr(error, 'problem_mark', None)
    if mark is None:
        return problem
    return f'{problem} at line {mark.line + 1}, column {mark.column + 1}'
