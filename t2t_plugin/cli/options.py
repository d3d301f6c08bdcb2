"""Options several tools share (``--device``, ``--max-tokens``), checked
before a model loads: a refusal is one line and exit code 2, as argparse's
own."""

import argparse
from typing import NoReturn

from ..apis import DEFAULT_MAX_TOKENS, ArgumentRefused, check_device


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
