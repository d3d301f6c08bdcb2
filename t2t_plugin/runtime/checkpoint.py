"""Checkpoint files that survive crashes and never run code when read.

mmengine writes checkpoints in place (a kill leaves a truncated file) and
its loaders unpickle anything; here writes are atomic, and every scheme of
``CheckpointLoader`` reads through :func:`read_checkpoint`, whose allow-list
admits mmengine's training checkpoints (``HistoryBuffer``, numpy arrays).
"""

import argparse
import codecs
import collections
import functools
import io
import logging
import os
import os.path as osp
import pickle
import re
import tempfile
import urllib.error
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Callable, Optional, Union
from urllib.parse import urlparse

import numpy as np
import torch
from mmengine import fileio
from mmengine.dist import get_dist_info
from mmengine.logging import HistoryBuffer, print_log
from mmengine.runner import checkpoint as mmengine_checkpoint

from t2t_preflight.errors import CheckpointError, DataFileError
from t2t_preflight.inputs import missing_checkpoint

from ..compat import (
    HAS_ADD_SAFE_GLOBALS,
    mmcls_backbone_weights,
    mmengine_home,
    numpy_pickle_globals,
    safe_globals,
    torch_weights_only_globals,
)
from ..converters.mmpretrain import mmpretrain_to_plugin
from ..converters.official import official_to_plugin, strip_module_prefix
from .checkpoint_fit import (  # noqa: F401 (the tools' name)
    CheckpointSource,
    load_state_dict_strictly,
    note_source,
)
from .safe_pickle import AllowListUnpickler

# The process umask can only be read by setting it; read it once, before
# any thread could create files under a temporary umask of 0.
_UMASK = os.umask(0)
os.umask(_UMASK)

# AtomicLocalBackend's temporary files: '.<target name>.<8 random
# characters of tempfile.mkstemp>.tmp' next to the target.
_STALE_TEMP = re.compile(r'^\..+\.[a-z0-9_]{8}\.tmp$')


_HISTORY_BUFFER_STATS = ('min', 'max', 'current', 'mean')


def _history_buffer_attribute(owner: type, name: str) -> Callable:
    """``getattr`` while unpickling, limited to the statistics methods a
    pickled :class:`HistoryBuffer` names (the real one reaches anything)."""
    if owner is not HistoryBuffer or name not in _HISTORY_BUFFER_STATS:
        owner_name = getattr(owner, '__qualname__', type(owner).__name__)
        raise pickle.UnpicklingError(
            f'GLOBAL builtins.getattr({owner_name}, {name!r}) is refused: '
            'only HistoryBuffer statistics methods are allowed.'
        )
    return getattr(HistoryBuffer, name)


def checkpoint_safe_globals() -> list[Union[object, tuple[object, str]]]:
    """The globals of mmengine training checkpoints, none of which runs
    code a file could choose, as ``add_safe_globals`` takes them."""
    # numpy >= 1.25 gives each dtype its own class (``Float64DType``, ...)
    dtype_classes = {
        type(np.dtype(code))
        for code in np.typecodes['AllFloat'] + np.typecodes['AllInteger'] + '?'
    }
    # what rebuilds pickled arrays and scalars (numpy 1 and 2 name the same)
    rebuilders = dict.fromkeys(
        found
        for (module, _), found in numpy_pickle_globals().items()
        if module.endswith('.multiarray')
    )
    return [
        HistoryBuffer,
        # MultiStepLR's milestones (torch < 2.4 does not allow it itself)
        collections.Counter,
        np.ndarray,
        np.dtype,
        *sorted(dtype_classes, key=str),
        *rebuilders,
        (_history_buffer_attribute, 'builtins.getattr'),
    ]


class AtomicLocalBackend(fileio.LocalBackend):
    """Local file backend whose writes are all-or-nothing, for
    ``CheckpointHook(backend_args=dict(backend='atomic_local'))``."""

    def put(self, obj: bytes, filepath: Union[str, Path]) -> None:
        """Write ``obj`` to a temporary file renamed over ``filepath``."""
        folder = osp.dirname(osp.abspath(filepath))
        os.makedirs(folder, exist_ok=True)
        fd, tmp_path = tempfile.mkstemp(
            dir=folder, prefix=f'.{osp.basename(filepath)}.', suffix='.tmp'
        )
        try:
            with os.fdopen(fd, 'wb') as f:
                f.write(obj)
                f.flush()
                os.fsync(f.fileno())
            # mkstemp makes the file private (0600); give it the mode an
            # in-place write would have, so that others can read checkpoints.
            mode = (
                os.stat(filepath).st_mode & 0o7777
                if osp.exists(filepath)
                else 0o666 & ~_UMASK
            )
            os.chmod(tmp_path, mode)
            os.replace(tmp_path, filepath)
        except BaseException:
            if osp.exists(tmp_path):
                os.remove(tmp_path)
            raise

    def put_text(
        self, obj: str, filepath: Union[str, Path], encoding: str = 'utf-8'
    ) -> None:
        """Write text to ``filepath`` atomically."""
        self.put(obj.encode(encoding), filepath)


def remove_stale_temp_files(folder: str) -> list[str]:
    """Delete (and return) the ``.epoch_N.pth.XXXXXXXX.tmp`` files that a
    hard kill during a save left directly in ``folder``."""
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


class _CheckpointUnpickler(AllowListUnpickler):
    """The rule of torch's safe loader, for torch < 2.4 (which cannot
    extend its allow-list): torch's allowed globals, those of
    :func:`checkpoint_safe_globals` and ``argparse.Namespace``."""

    @functools.cached_property
    def allowed(self) -> dict[tuple[str, str], Any]:
        by_path = torch_weights_only_globals()
        # numpy arrays of protocol 2 files carry their bytes as latin-1 text
        by_path['_codecs.encode'] = codecs.encode
        for entry in [*checkpoint_safe_globals(), argparse.Namespace]:
            obj, path = (
                entry
                if isinstance(entry, tuple)
                else (entry, f'{entry.__module__}.{entry.__name__}')
            )
            by_path[path] = obj
        return {tuple(p.rsplit('.', 1)): obj for p, obj in by_path.items()}


class _RestrictedPickle:
    """The ``pickle_module`` of ``torch.load`` on torch < 2.4."""

    Unpickler = _CheckpointUnpickler
    load = pickle.load


def _torch_load(
    path: str,
    trust_pickle: bool = False,
    damaged_hint: str = '',
    data: Optional[bytes] = None,
) -> Any:
    """``torch.load`` onto the CPU (of ``data``, the bytes of pavi or s3,
    if given), failures as one CheckpointError line."""
    source = path if data is None else io.BytesIO(data)
    try:
        if not trust_pickle and not HAS_ADD_SAFE_GLOBALS:
            return torch.load(
                source,
                map_location='cpu',
                weights_only=False,
                pickle_module=_RestrictedPickle,
            )
        # timm training checkpoints (official releases of other sizes) keep
        # their argparse options beside the weights.
        with safe_globals([argparse.Namespace]):
            return torch.load(
                source, map_location='cpu', weights_only=not trust_pickle
            )
    # A damaged file fails anywhere in torch's readers, with any type.
    except Exception as error:
        text = str(error)
        blocked = _refused_object(error)
        if blocked:
            raise CheckpointError(
                f'Cannot read checkpoint {path}: it holds Python objects '
                f"that torch's safe loader refuses ({blocked}); save "
                'the weights alone (state_dict + meta), or convert it with '
                'tools/model_converters/t2t_vit_official_to_plugin.py '
                '--trust-pickle if it comes from a source you trust.'
            ) from None
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        short = lines[0].split('. ')[0][:120] if lines else ''
        detail = type(error).__name__ + (f': {short}' if short else '')
        raise CheckpointError(
            f'Cannot read checkpoint {path}: not a complete PyTorch '
            f'checkpoint ({detail}){damaged_hint}.'
        ) from None


def _refused_object(error: Exception) -> Optional[str]:
    """The object that the safe loader refused, as ``'GLOBAL x.y'`` or
    ``'a x.y object'``, or None when ``error`` is no refusal (a damaged
    file)."""
    text = str(error)
    if isinstance(error, DataFileError):  # torch < 2.4: our unpickler's
        return 'GLOBAL ' + error.problem.split()[-1]
    # torch names a refused global 'GLOBAL x.y' or 'Unsupported global:
    # GLOBAL x.y was not ...', depending on the version; the getattr
    # stand-in adds its arguments
    found = re.search(r'GLOBAL ([\w.]+(?:\([^)]*\))?)', text)
    if found:
        return f'GLOBAL {found.group(1)}'
    # an allowed constructor (numpy's dtype) made an object of a type that
    # torch's loader does not build: 'Can only build ..., but got <class>'
    found = re.search(r"but got <class '([\w.]+)'>", text)
    if found:
        return f'a {found.group(1)} object'
    return None


def read_checkpoint(
    path_or_url: Union[str, Path],
    trust_pickle: bool = False,
    convert_official: bool = True,
) -> dict[str, Any]:
    """Read a checkpoint file or URL onto the CPU, safely: the one place
    that reads, checks the structure of and converts a checkpoint.

    Every path ends in ``torch.load(weights_only=True)`` plus the allow-list
    of :func:`checkpoint_safe_globals`: ``http(s)://`` URLs through torch's
    hub cache, mmengine's other schemes resolved as mmengine resolves them.
    Foreign layouts come back in this plugin's (:func:`plugin_layout`),
    and the weights remember the file (and the arch it records) for the
    models' load hooks (:func:`~t2t_plugin.models.checkpoint_checks.
    check_fit`), so that every refusal names it.

    Args:
        path_or_url (str | Path): A local file or a URL.
        trust_pickle (bool): Read local files with the full unpickler (runs
            any code the file holds). Defaults to False.
        convert_official (bool): Convert foreign layouts. Defaults to True;
            the converter tool reads official releases as they are.

    Raises:
        CheckpointError: If the file is missing, damaged, holds objects the
            safe loader refuses, or is not a dict of the parts
            :func:`check_structure` checks.
    """
    path = str(path_or_url)
    if path.startswith(('http://', 'https://')):
        checkpoint = _read_download(path)
    elif '://' in path:
        checkpoint = _read_scheme(path)
    else:
        path = osp.expanduser(path)
        missing = missing_checkpoint(path)
        if missing:
            raise CheckpointError(missing)
        checkpoint = _torch_load(path, trust_pickle)
    if not isinstance(checkpoint, Mapping):
        raise CheckpointError(
            f'Cannot read checkpoint {path}: it holds a '
            f'{type(checkpoint).__name__}, not a checkpoint dict; save one '
            "with torch.save({'state_dict': model.state_dict()}, path)."
        )
    check_structure(checkpoint, path)
    if not convert_official:
        return dict(checkpoint)
    checkpoint = plugin_layout(checkpoint, path)
    _note_weights(checkpoint, path)
    return checkpoint


def plugin_layout(checkpoint: Mapping[str, Any], path: str) -> dict[str, Any]:
    """``checkpoint`` in this plugin's layout: official releases renamed
    (:func:`~t2t_plugin.converters.official_to_plugin`), runs of
    mmpretrain's ``T2T_ViT`` given the arch record of their math
    (:func:`~t2t_plugin.converters.mmpretrain_to_plugin`), and the
    ``module.`` prefix of DDP-wrapped weights dropped.

    Raises:
        CheckpointError: For a layout that is recognised but cannot be
            converted.
    """
    try:
        official = official_to_plugin(checkpoint)
    except ValueError as error:
        raise CheckpointError(
            f'Cannot convert official checkpoint {osp.basename(path)}: {error}'
        ) from None
    if official is not None:
        return official
    try:
        converted = mmpretrain_to_plugin(checkpoint)
    except ValueError as error:
        raise CheckpointError(
            f"Cannot convert checkpoint {path} of mmpretrain's T2T_ViT: "
            f'{error}.'
        ) from None
    checkpoint = converted or checkpoint
    # only the model's weights: an ``ema_state_dict`` is an AveragedModel's,
    # whose own ``module.`` prefix its EMAHook expects
    if not isinstance(checkpoint.get('state_dict'), Mapping):
        return _unwrapped(checkpoint)
    return dict(checkpoint, state_dict=_unwrapped(checkpoint['state_dict']))


def _unwrapped(weights: Mapping[str, Any]) -> Mapping[str, Any]:
    # DDP's prefix; weights without it stay as read (with their _metadata)
    if any(key.startswith('module.') for key in weights):
        return strip_module_prefix(weights)
    return weights


# The entries of an mmengine checkpoint that hold weights.
_WEIGHT_ENTRIES = ('state_dict', 'ema_state_dict')


def _note_weights(checkpoint: Mapping[str, Any], path: str) -> None:
    meta = checkpoint.get('meta')
    arch = meta.get('t2t_arch') if isinstance(meta, Mapping) else None
    # the model's weights last: a Pretrained init reads them
    entries = [checkpoint.get(key) for key in reversed(_WEIGHT_ENTRIES)]
    for weights in [e for e in entries if isinstance(e, Mapping)] or [
        checkpoint
    ]:
        note_source(
            weights, CheckpointSource(path, arch or {}, tuple(weights))
        )


def check_structure(
    checkpoint: Mapping[str, Any], source: str = 'the checkpoint'
) -> None:
    """Refuse the parts of a checkpoint dict that mmengine and mmpretrain
    read without a check (a traceback later, or class names taken from a
    number); ``source`` names it.

    Raises:
        CheckpointError: If its weights are no dict named by strings, or
            its meta, dataset meta, class names or arch record are of
            another type.
    """
    weights = checkpoint.get('state_dict', checkpoint)
    if not isinstance(weights, Mapping):
        raise CheckpointError(
            f"The 'state_dict' of {source} is a {type(weights).__name__}, "
            'not a dict of weights; save model.state_dict() there.'
        )
    keys = [key for key in weights if not isinstance(key, str)]
    if keys:
        raise CheckpointError(
            f'The weights of {source} are not all named by strings (a key '
            f'{keys[0]!r}); save model.state_dict(), whose keys are the '
            'weight names.'
        )
    meta = checkpoint.get('meta', {})
    if not isinstance(meta, Mapping):
        raise CheckpointError(
            f"The 'meta' of {source} is a {type(meta).__name__}, not a dict; "
            "save a dict there (mmengine's meta) or leave it out."
        )
    for part, what in (
        ('dataset_meta', "the dataset's metainfo"),
        ('t2t_arch', 'the arch as config keys and values'),
    ):
        value = meta.get(part, {})
        if not isinstance(value, Mapping):
            raise CheckpointError(
                f'The meta[{part!r}] of {source} is a '
                f'{type(value).__name__}, not a dict; save {what} there or '
                'leave it out.'
            )
    classes = meta.get('dataset_meta', {}).get('classes', [])
    if not isinstance(classes, (list, tuple)) or not all(
        isinstance(name, str) for name in classes
    ):
        shown = repr(classes)
        shown = shown if len(shown) <= 40 else shown[:37] + '...'
        raise CheckpointError(
            f"The meta['dataset_meta']['classes'] of {source} is {shown}, "
            'not a list of class names; save the names there or leave it '
            'out.'
        )


def checkpoint_weights(
    checkpoint: Mapping[str, Any],
) -> Mapping[str, torch.Tensor]:
    """The weights of a checkpoint that :func:`read_checkpoint` returned:
    its ``state_dict``, or itself."""
    return checkpoint.get('state_dict', checkpoint)


def hub_cache_path(url: str) -> str:
    """Where torch's hub keeps the download of an ``http(s)://`` URL (as
    ``load_state_dict_from_url``)."""
    name = osp.basename(urlparse(url).path)
    return osp.join(torch.hub.get_dir(), 'checkpoints', name)


def _read_download(url: str) -> Any:
    """Read ``url`` from torch's hub cache, downloaded first if missing
    (mmengine's ``load_from_http`` would run the code of a crafted file)."""
    path = hub_cache_path(url)

    def download() -> None:
        if osp.isfile(path):
            return
        try:
            os.makedirs(osp.dirname(path), exist_ok=True)
            # writes to a temporary file and renames it: no half files here
            torch.hub.download_url_to_file(url, path, progress=False)
        except (OSError, urllib.error.URLError, ValueError) as error:
            reason = getattr(error, 'reason', None) or error
            raise CheckpointError(
                f'Cannot download {url} ({reason}); download it where there '
                f'is a network and place it at {path}.'
            ) from None

    # as mmengine's load_from_http: rank 0 downloads, the others wait
    rank, world_size = get_dist_info()
    if rank == 0:
        download()
    if world_size > 1:
        torch.distributed.barrier()
    if rank > 0:
        download()
    return _torch_load(
        path,
        damaged_hint=f', a damaged download of {url}: delete {path} to '
        'download it again',
    )


# Every other scheme of mmengine 0.10, as CheckpointLoader matches them
# (re.match). mmengine's loaders of these call torch.load themselves: each
# is read here whole, the name lookup mmengine's, the reading ours.
_RELEASE_LISTS = {
    'torchvision://': mmengine_checkpoint.get_torchvision_models,
    'modelzoo://': mmengine_checkpoint.get_torchvision_models,
    'open-mmlab://': mmengine_checkpoint.get_external_models,
    'openmmlab://': mmengine_checkpoint.get_external_models,
    'mmcls://': mmengine_checkpoint.get_mmcls_models,
}
_CEPH = (r'(\S+\:)?s3://', r'(\S+\:)?petrel://')
CHECKPOINT_SCHEMES = (*_RELEASE_LISTS, 'pavi://', *_CEPH)


def _read_scheme(path: str) -> Any:
    scheme = path[: path.index('://') + 3]
    if scheme in _RELEASE_LISTS:
        return _read_release(path, scheme)
    if scheme == 'pavi://':
        try:
            from pavi import modelcloud
        except ImportError:
            raise CheckpointError(
                f'Cannot read checkpoint {path}: pavi:// needs the pavi '
                'package (pip install pavi).'
            ) from None
        model = modelcloud.get(path[len('pavi://') :])
        with tempfile.TemporaryDirectory() as folder:
            model.download(osp.join(folder, model.name))
            data = Path(folder, model.name).read_bytes()
        return _torch_load(path, data=data)
    if any(re.match(prefix, path) for prefix in _CEPH):
        try:
            backend = fileio.get_file_backend(
                path, backend_args={'backend': 'petrel'}
            )
        except ImportError as error:
            raise CheckpointError(
                f'Cannot read checkpoint {path}: {error}'
            ) from None
        return _torch_load(path, data=backend.get(path))
    schemes = ['http://', 'https://', *CHECKPOINT_SCHEMES]
    raise CheckpointError(
        f'Cannot read checkpoint {path}: unknown scheme; give a local file '
        f'or a URL of {", ".join(sorted(schemes))}.'
    )


def _read_release(path: str, scheme: str) -> Any:
    name = path[len(scheme) :]
    renamed = scheme.startswith('open') and (
        mmengine_checkpoint.get_deprecated_model_names().get(name)
    )
    if renamed:
        print_log(
            f'{path} is deprecated in favor of {scheme}{renamed}',
            logger='current',
            level=logging.WARNING,
        )
        name, path = renamed, scheme + renamed
    releases = _RELEASE_LISTS[scheme]()
    if name not in releases:
        raise CheckpointError(
            f'Cannot read checkpoint {path}: {scheme} has no model named '
            f"{name!r} in mmengine's list; give a name of that list, a "
            'local file or a URL.'
        )
    if releases[name].startswith(('http://', 'https://')):
        checkpoint = _read_download(releases[name])
    else:  # open-mmlab://: a file of MMENGINE_HOME
        local = osp.join(mmengine_home(), releases[name])
        if not osp.isfile(local):
            raise CheckpointError(
                f'Checkpoint not found: {local} (where {path} points).'
            )
        checkpoint = _torch_load(local)
    if scheme == 'mmcls://' and isinstance(checkpoint, Mapping):
        # as mmengine: the backbone's weights, without the 'backbone.' prefix
        return mmcls_backbone_weights(checkpoint)
    return checkpoint


def load_from_t2t_plugin(filename: str, map_location: Any = None) -> dict:
    """mmengine's loader of every scheme: :func:`read_checkpoint`, moved to
    ``map_location`` when that names a device. (mmengine names the loader
    in its line ``Loads checkpoint by t2t_plugin backend from path: ...``,
    its name after ``load_from_``.)"""
    checkpoint = read_checkpoint(filename)
    # A callable map_location (the Runner's default on GPUs) is left out:
    # load_state_dict copies every tensor onto its parameter's device.
    if (
        isinstance(map_location, (str, torch.device))
        and str(map_location) != 'cpu'
    ):
        checkpoint = _to_device(checkpoint, map_location)
        _note_weights(checkpoint, filename)
    return checkpoint


def _to_device(checkpoint: Any, device: Any) -> Any:
    # mappings only: the RNG states in lists of random_state stay on the CPU
    if isinstance(checkpoint, torch.Tensor):
        return checkpoint.to(device)
    if isinstance(checkpoint, Mapping):
        return type(checkpoint)(
            (k, _to_device(v, device)) for k, v in checkpoint.items()
        )
    return checkpoint
