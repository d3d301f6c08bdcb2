"""What the installed torch (2.1 up to the pinned release) and mmcv can do,
checked in one place: a missing newer feature costs one warning line.
Features are detected by name, so that a backport counts."""

import warnings
from collections.abc import Iterable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch
from mmengine.utils import digit_version

from t2t_preflight import doc_pages


class MissingFeatureWarning(UserWarning):
    """A feature of newer torch or mmcv that this installation lacks."""


# torch >= 2.4: extend the allow-list of ``torch.load(weights_only=True)``
HAS_ADD_SAFE_GLOBALS = hasattr(torch.serialization, 'add_safe_globals')
# torch >= 2.5: the same, for the duration of a ``with`` block
HAS_SAFE_GLOBALS_CONTEXT = hasattr(torch.serialization, 'safe_globals')
# torch >= 2.3: one GradScaler class for every device type
HAS_DEVICE_GRAD_SCALER = hasattr(torch.amp, 'GradScaler')
# torch >= 2.6: torch.load refuses arbitrary objects unless told otherwise
WEIGHTS_ONLY_BY_DEFAULT = digit_version(torch.__version__) >= digit_version(
    '2.6.0'
)
_warned = set()


def warn_once(message: str) -> None:
    """Warn with ``message`` the first time it comes up in this process."""
    if message in _warned:
        return
    _warned.add(message)
    warnings.warn(message, MissingFeatureWarning, stacklevel=3)


def missing_torch_feature(feature: str, since: str, effect: str) -> str:
    """One line: this torch lacks ``feature`` (new in ``since``)."""
    return (
        f'torch {torch.__version__} has no {feature} '
        f'(torch >= {since}): {effect}.'
    )


def add_safe_globals(safe_globals: Iterable) -> bool:
    """Allow ``safe_globals`` in ``torch.load(weights_only=True)``; False
    before torch 2.4, where the checkpoint reader uses its own allow-list."""
    if HAS_ADD_SAFE_GLOBALS:
        torch.serialization.add_safe_globals(list(safe_globals))
    return HAS_ADD_SAFE_GLOBALS


def safe_globals(allowed: Iterable) -> AbstractContextManager:
    """``torch.serialization.safe_globals``, or a no-op before torch 2.5
    (files holding ``allowed`` objects are then refused, with a warning)."""
    if HAS_SAFE_GLOBALS_CONTEXT:
        return torch.serialization.safe_globals(list(allowed))
    warn_once(
        missing_torch_feature(
            'torch.serialization.safe_globals',
            '2.5',
            'files holding objects besides tensors need --trust-pickle',
        )
    )
    return nullcontext()


def grad_scaler(device_type: str) -> 'torch.cuda.amp.GradScaler':
    """A float16 loss scaler for ``device_type``; before torch 2.3 the CUDA
    one, and a ValueError for the CPU."""
    if HAS_DEVICE_GRAD_SCALER:
        return torch.amp.GradScaler(device_type)
    if device_type == 'cuda':
        return torch.cuda.amp.GradScaler()
    raise ValueError(
        missing_torch_feature(
            'float16 training on CPU', '2.3', 'use bf16 or fp32 on CPU'
        )
    )


def profiler_event_start_ns(event: Any) -> int:
    """Start of a Kineto event in ns (``start_us()`` before torch 2.2)."""
    if hasattr(event, 'start_ns'):
        return event.start_ns()
    return event.start_us() * 1000


def warn_if_mmcv_ops_lack_cuda() -> None:
    """Warn once when torch sees a GPU and mmcv's compiled ops are CPU-only
    (mmcv-lite has no ops, which then nothing uses)."""
    if not torch.cuda.is_available():
        return
    try:
        from mmcv import _ext
    except ImportError:
        return
    if _ext.get_compiling_cuda_version() == 'not available':
        warn_once(
            'mmcv was built without CUDA ops, but torch sees a GPU: mmdet '
            'and mmseg models will fail on CUDA tensors (nms, roi_align); '
            f'install a CUDA build of mmcv ({doc_pages.INSTALL}).'
        )


# Private names of torch, mmengine, mmpretrain, numpy and Python, used
# here only, each for want of a public one; tests/test_runtime/test_compat.py
# fails when a release renames or changes one.


def is_view(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` shares the memory of another (its ``_base``)."""
    return tensor._base is not None


def numpy_pickle_globals() -> dict[tuple[str, str], Any]:
    """The private numpy functions a pickled array or scalar names, by
    ``(module, name)`` under numpy 1's and numpy 2's module names (either
    numpy reads both)."""
    # numpy 1.26 has only a stub of ``numpy._core``; numpy 2 warns on
    # ``numpy.core``
    try:
        from numpy._core import multiarray, numeric
    except ImportError:
        from numpy.core import multiarray, numeric
    found = {}
    for core in ('numpy.core', 'numpy._core'):
        found[(f'{core}.multiarray', '_reconstruct')] = multiarray._reconstruct
        found[(f'{core}.multiarray', 'scalar')] = multiarray.scalar
        found[(f'{core}.numeric', '_frombuffer')] = numeric._frombuffer
    return found


def python3_module(module: str) -> str:
    """The Python 3 name of a module a protocol-2 pickle names
    (``__builtin__`` -> ``builtins``), as ``pickle`` maps it itself."""
    import _compat_pickle

    return _compat_pickle.IMPORT_MAPPING.get(module, module)


def torch_weights_only_globals() -> dict[str, Any]:
    """torch's allow-list of ``torch.load(weights_only=True)`` by dotted
    path, which the reader extends itself before torch 2.4."""
    from torch import _weights_only_unpickler

    return dict(_weights_only_unpickler._get_allowed_globals())


def rebuild_tensor() -> Any:
    """The function a pickled tensor names, for the safe unpickler."""
    return torch._utils._rebuild_tensor_v2


def default_store() -> 'torch.distributed.Store':
    """The key-value store of the default process group."""
    return torch.distributed.distributed_c10d._get_default_store()


def mmengine_home() -> str:
    """Where mmengine keeps the files of ``open-mmlab://`` names."""
    from mmengine.runner import checkpoint

    return checkpoint._get_mmengine_home()


def mmcls_backbone_weights(checkpoint: dict) -> dict:
    """What mmengine's ``mmcls://`` loader makes of a checkpoint (the
    backbone's weights, bare), for the reader to keep its meaning."""
    from mmengine.runner import checkpoint as mmengine_checkpoint

    return mmengine_checkpoint._process_mmcls_checkpoint(checkpoint)


def set_runner_timestamp(runner: Any, timestamp: str) -> None:
    """Rename a run's timestamp, which mmengine's Runner sets in
    ``setup_env`` without a setter."""
    runner._timestamp = timestamp


def unbuilt_train_dataloader(runner: Any) -> Any:
    """The Runner's train dataloader (config or loader) before its loop is
    built; the public property builds the loop."""
    return runner._train_dataloader


def set_train_dataloader(runner: Any, dataloader: Any) -> None:
    """Replace the dataloader the Runner builds its training loop from."""
    runner._train_dataloader = dataloader


def model_dataset_meta(model: Any) -> dict:
    """The dataset meta mmpretrain's ``get_model`` attaches to a model."""
    return getattr(model, '_dataset_meta', None) or {}


def set_model_dataset_meta(model: Any, meta: dict) -> None:
    """Attach a dataset meta as ``get_model`` does, for the inferencers."""
    model._dataset_meta = meta


def model_config(model: Any) -> Any:
    """The config ``get_model`` attaches to a model, which mmpretrain's
    inferencers build their pipeline from."""
    return model._config
