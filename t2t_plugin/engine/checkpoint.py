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

Every checkpoint a process reads goes through :func:`read_checkpoint`:
safe unpickling (``weights_only``, or the restricted unpickler of
:class:`_CheckpointUnpickler` on torch < 2.4), one :class:`CheckpointError`
whose message is one line, official T2T-ViT releases turned into this
plugin's layout by the pure converter (:func:`~t2t_plugin.converters.
official.official_to_plugin`). Every scheme of mmengine's
``CheckpointLoader`` (local files, ``http(s)://``, ``torchvision://``,
``open-mmlab://``, ``mmcls://``, ``pavi://``, ``s3://``) is routed through
it (see the comment at the registration), so ``load_from``, resume,
``init_cfg=dict(type='Pretrained')`` (mmpretrain, mmdet, mmseg) and
mmpretrain's ``get_model`` and Inferencers read files without running
code. ``http(s)://`` files are
downloaded once into torch's hub cache, as torch would, and read from there
by the same safe reader. Whether the weights fit is the models' own
business: their load-state-dict hooks
(:mod:`t2t_plugin.models.checkpoint_checks`) refuse wrong shapes, NaN
weights and missing weights through every loader.
"""

import argparse
import codecs
import functools
import io
import logging
import os
import os.path as osp
import pickle
import re
import tempfile
import urllib.error
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import (
    Any,
    Callable,
    Optional,
    Union,
)
from urllib.parse import urlparse

import numpy as np
import torch
from mmengine.dist import get_dist_info
from mmengine.fileio import LocalBackend, get_file_backend, register_backend
from mmengine.logging import HistoryBuffer, print_log
from mmengine.runner import CheckpointLoader, Runner
from mmengine.runner import checkpoint as mmengine_checkpoint

from ..compat import HAS_ADD_SAFE_GLOBALS, add_safe_globals, safe_globals
from ..converters.official import official_to_plugin, strip_module_prefix
from ..datasets.safe_pickle import AllowListUnpickler, UnsafePickleError
from ..models.checkpoint_checks import (
    CheckpointError,
    CheckpointMismatchError,
    mark_checkpoint_file,
)

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
            'checkpoint: only HistoryBuffer statistics methods are allowed.'
        )
    return getattr(HistoryBuffer, name)


def checkpoint_safe_globals() -> list[Union[object, tuple[object, str]]]:
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
    dtype_classes = {
        type(np.dtype(code))
        for code in np.typecodes['AllFloat'] + np.typecodes['AllInteger'] + '?'
    }
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
            suffix=_TEMP_SUFFIX,
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
        """Write text to ``filepath`` atomically.

        Args:
            obj (str): Text to write.
            filepath (str | Path): Target file.
            encoding (str): Text encoding. Defaults to ``'utf-8'``.
        """
        self.put(obj.encode(encoding), filepath)


register_backend('atomic_local', AtomicLocalBackend, force=True)


def remove_stale_temp_files(folder: str) -> list[str]:
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


def _blocked_global(text: str) -> Optional[str]:
    # torch names the refused global as 'GLOBAL x.y' or 'Unsupported global:
    # GLOBAL x.y was not ...', depending on the version.
    found = re.search(r'GLOBAL ([\w.]+)', text)
    return found.group(1) if found else None


class _CheckpointUnpickler(AllowListUnpickler):
    """An unpickler that resolves only the globals a checkpoint may hold.

    torch < 2.4 cannot extend the allow-list of its safe loader, and that
    loader refuses to rebuild any class of its own choosing (mmengine's
    ``HistoryBuffer`` among them), so training checkpoints could only be
    read unrestricted. This unpickler gives ``torch.load`` the same rule as
    the safe loader of newer torch: torch's own allowed globals, those of
    :func:`checkpoint_safe_globals` and ``argparse.Namespace``; any other
    global (the way a file runs code) is refused before it is resolved.
    """

    @property
    def allowed(self) -> dict[tuple[str, str], Any]:
        return _checkpoint_globals()


@functools.cache
def _checkpoint_globals() -> dict[tuple[str, str], Any]:
    from torch import _weights_only_unpickler

    by_path = dict(_weights_only_unpickler._get_allowed_globals())
    # numpy arrays of protocol 2 files carry their bytes as latin-1 text
    by_path['_codecs.encode'] = codecs.encode
    for entry in [*checkpoint_safe_globals(), argparse.Namespace]:
        obj, path = (
            entry
            if isinstance(entry, tuple)
            else (entry, f'{entry.__module__}.{entry.__name__}')
        )
        by_path[path] = obj
    return {tuple(path.rsplit('.', 1)): obj for path, obj in by_path.items()}


class _RestrictedPickle:
    """The ``pickle_module`` of ``torch.load`` on torch < 2.4."""

    Unpickler = _CheckpointUnpickler
    load = pickle.load


def _torch_load(
    path: str,
    trust_pickle: bool,
    damaged_hint: str = '',
    data: Optional[io.BytesIO] = None,
) -> Any:
    # ``data``: the bytes of ``path`` when a storage client hands them over
    # (pavi, s3); ``path`` then only names them in messages
    source = path if data is None else data
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
        blocked = (
            text
            if isinstance(error, UnsafePickleError)
            else _blocked_global(text)
        )
        if blocked:
            raise CheckpointError(
                f'Cannot read checkpoint {path}: it holds Python objects '
                f"that torch's safe loader refuses (GLOBAL {blocked}); save "
                'the weights alone (state_dict + meta), or convert it with '
                'tools/model_converters/t2t_vit_official_to_plugin.py '
                '--trust-pickle if it comes from a source you trust.'
            ) from None
        short = next(
            (line.strip() for line in text.splitlines() if line.strip()), ''
        )
        short = short.split('. ')[0][:120]
        detail = (
            f'{type(error).__name__}: {short}'
            if short
            else type(error).__name__
        )
        raise CheckpointError(
            f'Cannot read checkpoint {path}: not a complete PyTorch '
            f'checkpoint ({detail}){damaged_hint}.'
        ) from None


def read_checkpoint(
    path_or_url: Union[str, Path],
    trust_pickle: bool = False,
    convert_official: bool = True,
) -> dict[str, Any]:
    """Read a checkpoint file or URL onto the CPU, safely.

    Files are read with ``torch.load(weights_only=True)`` (plus the
    allow-list of :func:`checkpoint_safe_globals`), so that a file cannot
    run code; ``http(s)://`` URLs are downloaded to torch's hub cache
    first (:func:`download_checkpoint`); mmengine's other schemes
    (``torchvision://``, ``open-mmlab://``, ``mmcls://``, ``pavi://``,
    ``s3://``) resolve as mmengine resolves them and end in the same
    reader. Official T2T-ViT releases
    (``tokens_to_token.*`` keys) come back converted to this plugin's
    layout, as ``{'state_dict': ...}``.

    Args:
        path_or_url (str | Path): A local file or a URL.
        trust_pickle (bool): Read local files with the full unpickler
            (runs any code the file holds: only for files you trust).
            Defaults to False.
        convert_official (bool): Convert official releases. Defaults to
            True; the converter tool reads them as they are.

    Returns:
        dict: The checkpoint.

    Raises:
        CheckpointError: If the file is missing, damaged, holds objects the
            safe loader refuses, or is not a dict.
    """
    path = str(path_or_url)
    if path.startswith(('http://', 'https://')):
        checkpoint = _read_download(path)
    elif '://' in path:
        checkpoint = _read_scheme(path)
    else:
        path = osp.expanduser(path)
        if not osp.isfile(path):
            raise CheckpointError(f'Checkpoint not found: {path}.')
        checkpoint = _torch_load(path, trust_pickle)
    if not isinstance(checkpoint, Mapping):
        raise CheckpointError(
            f'Cannot read checkpoint {path}: it holds a '
            f'{type(checkpoint).__name__}, not a checkpoint dict; save one '
            "with torch.save({'state_dict': model.state_dict()}, path)."
        )
    if convert_official:
        checkpoint = _convert_if_official(checkpoint, osp.basename(path))
    # the models' load hooks name the file in their messages
    return mark_checkpoint_file(checkpoint, path)


def _convert_if_official(
    checkpoint: Mapping[str, Any], file_name: str
) -> dict[str, Any]:
    try:
        converted = official_to_plugin(checkpoint)
    except ValueError as error:
        raise CheckpointError(
            f'Cannot convert official checkpoint {file_name}: {error}'
        ) from None
    return dict(checkpoint) if converted is None else converted


def checkpoint_state_dict(
    checkpoint: Mapping[str, Any], source: str = 'the checkpoint'
) -> 'OrderedDict[str, torch.Tensor]':
    """The weights of a checkpoint, without ``module.`` prefixes.

    Args:
        checkpoint (Mapping): A checkpoint (``state_dict`` inside, or a bare
            state dict).
        source (str): What to call it in errors. Defaults to
            ``'the checkpoint'``.

    Raises:
        CheckpointError: If it holds no dict of weights.
    """
    state_dict = checkpoint.get('state_dict', checkpoint)
    if not isinstance(state_dict, Mapping):
        raise CheckpointError(
            f"The 'state_dict' of {source} is a "
            f'{type(state_dict).__name__}, not a dict of weights; save '
            'model.state_dict() there.'
        )
    return strip_module_prefix(state_dict)


def non_finite_weights(state_dict: Mapping[str, Any]) -> list[str]:
    """Names of floating-point tensors holding NaN or infinity.

    Args:
        state_dict (Mapping): Weights by name.

    Returns:
        list[str]: The names, in the order of the state dict.
    """
    return [
        name
        for name, value in state_dict.items()
        if isinstance(value, torch.Tensor)
        and value.is_floating_point()
        and not bool(torch.isfinite(value).all())
    ]


def check_finite_weights(
    state_dict: Mapping[str, Any], source: str = 'the checkpoint'
) -> None:
    """Refuse weights holding NaN or infinity.

    A run that diverged saves such weights; tested or run, they score
    chance or NaN without any other sign.

    Args:
        state_dict (Mapping): Weights by name.
        source (str): What to call them in the error.

    Raises:
        CheckpointError: If any floating-point tensor is not finite.
    """
    bad = non_finite_weights(state_dict)
    if bad:
        raise CheckpointError(
            f'Checkpoint {source} holds NaN or infinite weights in '
            f'{len(bad)} tensor(s), e.g. {bad[:3]}; it comes from a run '
            'that diverged: take an earlier checkpoint.'
        )


def load_state_dict_strictly(
    model: torch.nn.Module,
    checkpoint: Mapping[str, Any],
    source: str = 'the checkpoint',
) -> None:
    """Load a checkpoint into a model; every weight must fit.

    Args:
        model (nn.Module): The model.
        checkpoint (Mapping): As :func:`read_checkpoint` returns it.
        source (str): What to call it in errors.

    Raises:
        CheckpointMismatchError: If weights are missing, unexpected or of
            another shape.
        CheckpointError: If the checkpoint holds no weights.
    """
    state_dict = checkpoint_state_dict(checkpoint, source)
    if source != 'the checkpoint':
        state_dict = mark_checkpoint_file(state_dict, source)
    try:
        result = model.load_state_dict(state_dict, strict=False)
    except CheckpointMismatchError:
        raise  # a load hook's line, which names the file
    except ValueError as error:
        raise CheckpointMismatchError(
            f'{source} does not fit the model: {error}'
        ) from None
    except RuntimeError as error:  # shapes differ
        problems = [
            line.strip().rstrip('.')
            for line in str(error).splitlines()
            if line.strip()
        ]
        raise CheckpointMismatchError(
            f'{source} does not fit the model: '
            f'{_shorten("; ".join(problems[1:] or problems))}.'
        ) from None
    if result.missing_keys or result.unexpected_keys:
        raise CheckpointMismatchError(
            f'{source} does not fit the model: '
            f'{len(result.missing_keys)} weights missing (e.g. '
            f'{result.missing_keys[:2]}), {len(result.unexpected_keys)} '
            f'unexpected (e.g. {result.unexpected_keys[:2]}); use the config '
            'the checkpoint was trained or converted for.'
        )


def _shorten(text: str, limit: int = 600) -> str:
    return text if len(text) <= limit else text[:limit] + ' ...'


def checkpoint_read_error(path: str) -> Optional[str]:
    """Why a checkpoint cannot be read, in one line, or None.

    Args:
        path (str): A local checkpoint file.

    Returns:
        str | None: The message of :class:`CheckpointError`, or None when
        the file loads.
    """
    try:
        read_checkpoint(path)
    except CheckpointError as error:
        return str(error)
    return None


def load_from_local(filename: str, map_location: Any = None) -> dict:
    """mmengine's local checkpoint scheme, through :func:`read_checkpoint`.

    mmengine reads ``load_from``, ``Pretrained`` initialisation and
    mmpretrain's ``get_model(pretrained=...)`` through its
    ``CheckpointLoader``; routing local files here gives all of them the
    same safe reading, one-line errors and official-layout conversion.
    """
    return _on_device(read_checkpoint(filename), map_location, filename)


def hub_cache_path(url: str, model_dir: Optional[str] = None) -> str:
    """Where torch's hub keeps the download of ``url``.

    Args:
        url (str): An ``http(s)://`` URL.
        model_dir (str, optional): Another cache folder. Defaults to
            ``$TORCH_HOME/hub/checkpoints``, as ``load_state_dict_from_url``.
    """
    folder = model_dir or osp.join(torch.hub.get_dir(), 'checkpoints')
    return osp.join(folder, osp.basename(urlparse(url).path))


def download_checkpoint(
    url: str, model_dir: Optional[str] = None, progress: bool = False
) -> str:
    """The file of ``url`` in torch's hub cache, downloaded if missing.

    Args:
        url (str): An ``http(s)://`` URL.
        model_dir (str, optional): See :func:`hub_cache_path`.
        progress (bool): Show a download bar. Defaults to False.

    Returns:
        str: The cached file.

    Raises:
        CheckpointError: If the download fails (offline, say): the message
            names the URL and the path to place the file at by hand.
    """
    path = hub_cache_path(url, model_dir)
    if osp.isfile(path):
        return path
    try:
        os.makedirs(osp.dirname(path), exist_ok=True)
        # writes to a temporary file and renames it: no half files here
        torch.hub.download_url_to_file(url, path, progress=progress)
    except (OSError, urllib.error.URLError, ValueError) as error:
        reason = getattr(error, 'reason', None) or error
        raise CheckpointError(
            f'Cannot download {url} ({reason}); download it where there is '
            f'a network and place it at {path}.'
        ) from None
    return path


def _read_download(
    url: str, model_dir: Optional[str] = None, progress: bool = False
) -> Any:
    # as mmengine's load_from_http: rank 0 downloads, the others wait
    rank, world_size = get_dist_info()
    if rank == 0:
        path = download_checkpoint(url, model_dir, progress)
    if world_size > 1:
        torch.distributed.barrier()
        if rank > 0:
            path = download_checkpoint(url, model_dir, progress)
    return _torch_load(
        path,
        trust_pickle=False,
        damaged_hint=f', a damaged download of {url}: delete {path} to '
        'download it again',
    )


def load_from_http(
    filename: str,
    map_location: Any = None,
    model_dir: Optional[str] = None,
    progress: bool = False,
) -> dict:
    """mmengine's ``http(s)://`` scheme, read safely.

    mmengine's own loader unpickles through torch's
    ``load_state_dict_from_url`` with ``weights_only=False``, so a crafted
    file in the hub cache under a release's name would run its code. This
    one keeps the same cache file, downloads it with
    ``torch.hub.download_url_to_file`` when missing and reads it through
    :func:`read_checkpoint`'s safe reader, official releases converted.
    """
    checkpoint = _read_download(filename, model_dir, progress)
    if not isinstance(checkpoint, Mapping):
        raise CheckpointError(
            f'{filename} holds a '
            f'{type(checkpoint).__name__}, not a '
            'checkpoint dict.'
        )
    checkpoint = _convert_if_official(checkpoint, filename.rsplit('/', 1)[-1])
    checkpoint = mark_checkpoint_file(checkpoint, filename)
    return _on_device(checkpoint, map_location, filename)


def _on_device(checkpoint: Any, map_location: Any, path: str) -> Any:
    # A callable map_location (the Runner's default on GPUs) is left out:
    # load_state_dict copies every tensor onto its parameter's device.
    if (
        isinstance(map_location, (str, torch.device))
        and str(map_location) != 'cpu'
    ):
        moved = _to_device(checkpoint, map_location)
        return mark_checkpoint_file(moved, path)
    return checkpoint


def _to_device(checkpoint: Any, device: Any) -> Any:
    if isinstance(checkpoint, torch.Tensor):
        return checkpoint.to(device)
    if isinstance(checkpoint, Mapping):
        return type(checkpoint)(
            (k, _to_device(v, device)) for k, v in checkpoint.items()
        )
    return checkpoint


# --- mmengine's other schemes, read by the same safe reader -------------
#
# mmengine resolves a name of torchvision://, open-mmlab:// or mmcls:// to a
# release URL (or a file under $MMENGINE_HOME) and then calls its own
# http loader or torch.load directly, not through CheckpointLoader; pavi://
# and s3:// / petrel:// hand torch.load a download. So each scheme is
# replaced whole: the name lookup is mmengine's, the reading ours.


def _release_of(path: str, scheme: str, releases: Mapping[str, str]) -> str:
    name = path[len(scheme) :]
    if name not in releases:
        raise CheckpointError(
            f'Cannot read checkpoint {path}: {scheme} has no model named '
            f"{name!r} in mmengine's list; give a name of that list, a "
            'local file or a URL.'
        )
    return releases[name]


def _read_release(path: str, release: str) -> Any:
    # a URL of the release site, or (open-mmlab://) a file of MMENGINE_HOME
    if release.startswith(('http://', 'https://')):
        return _read_download(release)
    local = osp.join(mmengine_checkpoint._get_mmengine_home(), release)
    if not osp.isfile(local):
        raise CheckpointError(
            f'Checkpoint not found: {local} (where {path} points).'
        )
    return _torch_load(local, trust_pickle=False)


def _read_torchvision(path: str) -> Any:
    scheme = path[: path.index('://') + 3]  # 'modelzoo://' is its old name
    releases = mmengine_checkpoint.get_torchvision_models()
    return _read_release(path, _release_of(path, scheme, releases))


def _read_openmmlab(path: str) -> Any:
    scheme = path[: path.index('://') + 3]
    renamed = mmengine_checkpoint.get_deprecated_model_names().get(
        path[len(scheme) :]
    )
    if renamed:
        print_log(
            f'{path} is deprecated in favor of {scheme}{renamed}',
            logger='current',
            level=logging.WARNING,
        )
        path = scheme + renamed
    releases = mmengine_checkpoint.get_external_models()
    return _read_release(path, _release_of(path, scheme, releases))


def _read_mmcls(path: str) -> Any:
    releases = mmengine_checkpoint.get_mmcls_models()
    checkpoint = _read_release(path, _release_of(path, 'mmcls://', releases))
    if not isinstance(checkpoint, Mapping):
        return checkpoint
    # as mmengine: the backbone's weights, without the 'backbone.' prefix
    return mmengine_checkpoint._process_mmcls_checkpoint(checkpoint)


def _read_pavi(path: str) -> Any:
    try:
        from pavi import modelcloud
    except ImportError:
        raise CheckpointError(
            f'Cannot read checkpoint {path}: pavi:// needs the pavi package '
            '(pip install pavi).'
        ) from None
    model = modelcloud.get(path[len('pavi://') :])
    with tempfile.TemporaryDirectory() as folder:
        download = osp.join(folder, model.name)
        model.download(download)
        with open(download, 'rb') as f:
            data = io.BytesIO(f.read())
    return _torch_load(path, trust_pickle=False, data=data)


def _read_ceph(path: str) -> Any:
    try:
        backend = get_file_backend(path, backend_args={'backend': 'petrel'})
    except ImportError as error:
        raise CheckpointError(
            f'Cannot read checkpoint {path}: {error}'
        ) from None
    return _torch_load(
        path, trust_pickle=False, data=io.BytesIO(backend.get(path))
    )


# Every scheme mmengine 0.10 registers besides local files and http(s),
# as CheckpointLoader matches them (re.match, longer prefixes first).
_SCHEME_READERS: dict[str, Callable[[str], Any]] = {
    'torchvision://': _read_torchvision,
    'modelzoo://': _read_torchvision,
    'open-mmlab://': _read_openmmlab,
    'openmmlab://': _read_openmmlab,
    'mmcls://': _read_mmcls,
    'pavi://': _read_pavi,
    r'(\S+\:)?s3://': _read_ceph,
    r'(\S+\:)?petrel://': _read_ceph,
}


def _read_scheme(path: str) -> Any:
    for prefix in sorted(_SCHEME_READERS, reverse=True):
        if re.match(prefix, path):
            return _SCHEME_READERS[prefix](path)
    schemes = ['http://', 'https://', *_SCHEME_READERS]
    raise CheckpointError(
        f'Cannot read checkpoint {path}: unknown scheme; give a local file '
        f'or a URL of {", ".join(sorted(schemes))}.'
    )


def load_from_remote(filename: str, map_location: Any = None) -> dict:
    """mmengine's ``torchvision://``, ``open-mmlab://``, ``mmcls://``,
    ``pavi://`` and ``s3://`` schemes, through :func:`read_checkpoint`.

    The names resolve as in mmengine (its lists of releases, the
    deprecated names, ``$MMENGINE_HOME/open_mmlab.json``); the file is
    read by the safe reader, so a crafted file in torch's hub cache or
    under ``$MMENGINE_HOME`` cannot run code.
    """
    return _on_device(read_checkpoint(filename), map_location, filename)


# Process-wide on purpose: mmengine picks a checkpoint loader by the path's
# scheme alone, with no per-model choice, and each of its own loaders
# unpickles with torch.load's default (code runs on torch < 2.6) or, for
# downloads, with weights_only=False (code runs on every torch). Checkpoints
# of other models read the same through these loaders (the same tensors and
# meta; tested with an mmpretrain ResNet), only files that would run code
# are refused.
CheckpointLoader.register_scheme('', load_from_local, force=True)
CheckpointLoader.register_scheme(
    ('http://', 'https://'), load_from_http, force=True
)
CheckpointLoader.register_scheme(
    list(_SCHEME_READERS), load_from_remote, force=True
)


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
            problems = [
                line.strip().rstrip('.')
                for line in str(error).splitlines()
                if line.strip()
            ]
            detail = '; '.join(problems[1:] or problems)
            if len(detail) > 600:  # e.g. hundreds of unexpected keys
                detail = detail[:600] + ' ...'
            raise CheckpointMismatchError(f'{detail}.') from error

    runner.load_checkpoint = load_strictly
