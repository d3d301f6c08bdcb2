"""Checks of the tools' arguments that need no model: the device, an
input size against a token budget, the files of an image folder. Each
tool runs them before it loads or builds a model, and a refusal is one
line and exit code 2, as argparse's own."""

import argparse
import inspect
import math
import sys
from pathlib import Path
from typing import NoReturn, Optional, Union

import torch
from mmengine.config import Config

# 64x64 tokens, a 1024x1024 image at stride 16: attention memory grows with
# the square of the tokens, so a huge input is refused rather than left to
# exhaust the memory.
DEFAULT_MAX_TOKENS = 4096
# What OpenCV decodes, as mmcv's imread reads the files.
IMAGE_SUFFIXES = ('.jpg', '.jpeg', '.png', '.bmp', '.webp', '.tif', '.tiff')


class ArgumentRefused(ValueError):
    """An option value refused after parsing (against the config or the
    machine): tools report it as argparse does, in one line, exit code 2.
    """


def add_device_argument(parser: argparse.ArgumentParser) -> None:
    """``--device`` (default ``cpu``), checked by :func:`check_arguments`."""
    parser.add_argument(
        '--device', default='cpu', help="'cpu' (default), 'cuda' or 'cuda:N'"
    )


def add_max_tokens_argument(parser: argparse.ArgumentParser) -> None:
    """``--max-tokens``, the largest input a tool feeds the model."""
    parser.add_argument(
        '--max-tokens',
        type=int,
        default=DEFAULT_MAX_TOKENS,
        help='refuse inputs of more tokens (default '
        f'{DEFAULT_MAX_TOKENS}, a 1024x1024 input at stride 16)',
    )


def refuse(parser: argparse.ArgumentParser, error: Exception) -> NoReturn:
    """End the tool as argparse does for a bad option, in one line (no
    usage block) and exit code 2."""
    parser.exit(2, f'{parser.prog}: error: {error}\n')


def check_arguments(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> None:
    """The checks the tools share, on the options a tool has
    (``--device``, ``--max-tokens``): the first failure is
    :func:`refuse`-d."""
    try:
        if getattr(args, 'device', None) is not None:
            check_device(args.device)
        max_tokens = getattr(args, 'max_tokens', None)
        if max_tokens is not None and max_tokens < 1:
            raise ArgumentRefused(
                f'--max-tokens must be at least 1, got {max_tokens}'
            )
    except ValueError as error:
        refuse(parser, error)


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


def non_image_files(folder: Union[str, Path]) -> list[Path]:
    """Files of ``folder`` (and its sub-folders) that the tools do not
    read as images, by name; hidden ones left aside."""
    folder = Path(folder)
    return sorted(
        path
        for path in folder.rglob('*')
        if path.suffix.lower() not in IMAGE_SUFFIXES
        and path.is_file()
        and not is_hidden(path, folder)
    )


def is_hidden(path: Path, folder: Path) -> bool:
    """Whether ``path`` or a folder on its way from ``folder`` is hidden
    (a name starting with a dot)."""
    return any(part.startswith('.') for part in path.relative_to(folder).parts)


def report_left_out(folder: Union[str, Path], stream=None) -> None:
    """One line on ``stream`` (stderr) naming the files of ``folder`` that
    are left out as not images, if any: a count that silently skipped
    them would look complete."""
    left_out = non_image_files(folder)
    if not left_out:
        return
    names = ', '.join(str(path.relative_to(folder)) for path in left_out[:5])
    more = f' and {len(left_out) - 5} more' if len(left_out) > 5 else ''
    print(
        f'warning: {len(left_out)} file(s) of {folder} left out, not of an '
        f'image kind read here ({", ".join(IMAGE_SUFFIXES)}): {names}{more}',
        file=stream or sys.stderr,
    )
