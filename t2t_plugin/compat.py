"""What the installed torch (2.1 up to the pinned release) and mmcv can do,
checked in one place: a missing newer feature costs one warning line.
Features are detected by name, so that a backport counts."""

import warnings
from collections.abc import Iterable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Optional

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


def mmcv_cuda_ops_problem(
    cuda_available: bool, compiled_cuda: Optional[str]
) -> Optional[str]:
    """Why mmcv's compiled ops will fail on this machine's GPU, or None.

    Args:
        cuda_available (bool): ``torch.cuda.is_available()``.
        compiled_cuda (str, optional): mmcv's
            ``get_compiling_cuda_version()``, or None for mmcv-lite.
    """
    if not cuda_available or compiled_cuda != 'not available':
        return None
    return (
        'mmcv was built without CUDA ops, but torch sees a GPU: mmdet '
        'and mmseg models will fail on CUDA tensors (nms, roi_align); '
        f'install a CUDA build of mmcv ({doc_pages.INSTALL}).'
    )


def warn_if_mmcv_ops_lack_cuda() -> None:
    """Warn once when torch sees a GPU and mmcv's ops are CPU-only."""
    if not torch.cuda.is_available():
        return
    try:
        from mmcv import _ext
    except ImportError:  # mmcv-lite: no ops, nothing will use them
        return
    problem = mmcv_cuda_ops_problem(True, _ext.get_compiling_cuda_version())
    if problem:
        warn_once(problem)
