"""What the tools that only run a model check after ``import t2t_plugin``
(their config's first checks and options are
:mod:`t2t_preflight.arguments`', made before the import): the option
that needs torch (``--device``), answered in one line with exit code 2
as argparse's own, and the model's keys against the registered
classes."""

import argparse
import sys

from mmengine.config import Config

from t2t_preflight.config import import_custom_modules
from t2t_preflight.errors import ConfigError
from t2t_preflight.keys import misspelt_keys

from ..apis import check_device


def check_arguments(prog: str, args: argparse.Namespace) -> int:
    """The ``--device`` of a tool that has one: the exit code, 2 after the
    line ``{prog}: error: ...`` if refused, as argparse ends a tool for a
    bad option (no usage block); else 0. (``--max-tokens`` is checked as
    the options are parsed: ``t2t_preflight.arguments.positive_int``.)"""
    if getattr(args, 'device', None) is None:
        return 0
    try:
        check_device(args.device)
    except ValueError as error:
        print(f'{prog}: error: {error}', file=sys.stderr)
        return 2
    return 0


def check_model_keys(cfg: Config) -> Config:
    """``cfg`` of :func:`~t2t_preflight.arguments.read_model_config`
    with its ``custom_imports`` imported, once no key of a dict it builds
    is misspelt (:func:`~t2t_preflight.keys.misspelt_keys`, against the
    classes the registries build, with the nearest key). Raises
    :class:`~t2t_preflight.errors.ConfigError` with one line."""
    import_custom_modules(cfg)
    problem = misspelt_keys(cfg)
    if problem:
        raise ConfigError(problem)
    return cfg
