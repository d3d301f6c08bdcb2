"""Checks of a tool's inputs that need no model, made before a model is
built or loaded: the device, an input size against a token budget, the
folder or file the results go to."""

import inspect
import math
from collections.abc import Callable
from pathlib import Path
from typing import Optional, Union

import torch
from mmengine.config import Config

from t2t_preflight.errors import ArgumentRefused
from t2t_preflight.outputs import output_problem


def check_device(device: str) -> None:
    """Refuse (:class:`ArgumentRefused`) a device that torch does not know
    or that this machine does not have, before a model is moved there."""
    try:
        parsed = torch.device(device)
    except RuntimeError:
        raise ArgumentRefused(
            f"--device {device} is not a device; give 'cpu', 'cuda' or "
            "'cuda:N' (N from 0)."
        ) from None
    if parsed.type == 'cpu':
        return
    if parsed.type != 'cuda':
        raise ArgumentRefused(
            f"--device {device}: the tools run on 'cpu' or 'cuda[:N]'."
        )
    if not torch.cuda.is_available():
        raise ArgumentRefused(
            f'--device {device}: this machine has no CUDA device '
            '(torch.cuda.is_available() is False); use --device cpu.'
        )
    count = torch.cuda.device_count()
    if parsed.index is not None and parsed.index >= count:
        raise ArgumentRefused(
            f'--device {device}: this machine has {count} CUDA device(s), '
            f'cuda:0 to cuda:{count - 1}.'
        )


def token_count(height: int, width: int, stride: int) -> int:
    """Tokens of an ``(height, width)`` input at the soft splits'
    ``stride``."""
    return math.ceil(height / stride) * math.ceil(width / stride)


def config_stride(cfg: Config) -> int:
    """The total stride of a config's T2T-ViT soft splits (the
    ``T2TModule`` default for a config that does not set them)."""
    from ..models.t2t import T2TModule

    backbone = cfg.get('model', {}).get('backbone') or {}
    strides = (backbone.get('t2t_cfg') or {}).get('strides')
    if strides is None:
        strides = inspect.signature(T2TModule).parameters['strides'].default
    return math.prod(strides)


def config_num_layers(cfg: Config) -> int:
    """The encoder blocks of a config's T2T-ViT backbone, from its arch."""
    from ..models import T2TViT

    backbone = cfg.get('model', {}).get('backbone') or {}
    arch = backbone.get(
        'arch', inspect.signature(T2TViT).parameters['arch'].default
    )
    return T2TViT.resolve_arch(arch)['num_layers']


def check_shape_budget(
    shape: tuple[int, int],
    stride: int,
    max_tokens: int,
    option: Optional[str] = None,
) -> None:
    """Refuse (:class:`ArgumentRefused`) an input size of more than
    ``max_tokens`` tokens, before a model is built and run at that size;
    ``option`` names it (default ``--shape H W``)."""
    height, width = shape
    option = option or f'--shape {height} {width}'
    tokens = token_count(height, width, stride)
    if tokens > max_tokens:
        flag = option.split()[0]
        raise ArgumentRefused(
            f'{option} is {tokens} tokens at stride {stride}, above the '
            f'budget of {max_tokens}; give a smaller {flag} or raise '
            '--max-tokens.'
        )


def check_writable(
    path: Union[str, Path],
    option: str,
    file: bool = False,
    inputs: Optional[dict[str, str]] = None,
    replaces: Optional[tuple[str, Callable[[str], bool]]] = None,
) -> None:
    """Check that the folder ``path`` (or, with ``file``, the file) can be
    written (:func:`~t2t_preflight.outputs.output_problem`, with the same
    arguments; ValueError if not), then make that folder (the file's
    folder), before the work whose results go there."""
    problem = output_problem(str(path), option, file, inputs, replaces)
    if problem:
        raise ValueError(problem)
    folder = Path(path).parent if file else Path(path)
    folder.mkdir(parents=True, exist_ok=True)
