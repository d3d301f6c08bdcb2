"""Options several tools share (``--device``, ``--max-tokens``), checked
before a model loads: a refusal is one line and exit code 2, as argparse's
own; and the config of a tool that only runs a model, checked before the
model is built."""

import argparse
from pathlib import Path
from typing import NoReturn, Optional, Union

from mmengine.config import Config

from t2t_preflight.config import (
    ConfigError,
    arch_problem,
    load_config,
    misspelt_keys,
)
from t2t_preflight.inputs import missing_checkpoint

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


def load_model_config(
    config: Union[str, Path],
    cfg_options: Optional[dict] = None,
    checkpoint: Optional[str] = None,
) -> Config:
    """The config of a tool that only runs a model (inference, export,
    drawing, counting) with its ``--cfg-options``, checked before the model
    is built or anything written, by the owners of each answer: an unknown
    arch, a key of the model that its class does not take (with the
    nearest one), then a ``checkpoint`` file that is not there. Raises
    :class:`~t2t_preflight.config.ConfigError` with one line.

    Args:
        config (str | Path): The config file: a recipe, or the one a run
            saved in its work dir.
        cfg_options (dict, optional): ``--cfg-options``; the config's
            variables (``num_classes``, ``img_size``) reach their keys.
        checkpoint (str, optional): The weights the tool reads.
    """
    cfg = load_config(config, cfg_options)
    problem = arch_problem(cfg) or misspelt_keys(cfg)
    if problem:
        raise ConfigError(problem)
    if checkpoint is not None:
        check_checkpoint(checkpoint)
    return cfg


def check_checkpoint(checkpoint: str) -> None:
    """Raise :class:`~t2t_preflight.config.ConfigError` for a checkpoint
    file that is not there (:func:`~t2t_preflight.inputs.missing_checkpoint`),
    before a tool writes anything or builds its model."""
    problem = missing_checkpoint(checkpoint)
    if problem:
        raise ConfigError(problem)
