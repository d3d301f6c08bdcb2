"""The one config reader of the tools and APIs: every way
``Config.fromfile`` fails on a user's file (a syntax error, a ``mmdet::``
base of a toolbox that is not installed) becomes one :class:`ConfigError`
line."""

from pathlib import Path
from typing import Optional, Union

from mmengine.config import Config


class ConfigError(ValueError):
    """A config that cannot be loaded; the message is one line."""


def load_config(
    config: Union[str, Path, Config], cfg_options: Optional[dict] = None
) -> Config:
    """A config from a file (or a copy of a Config), with the overrides of
    ``--cfg-options`` merged in.

    Raises:
        ConfigError: If the file is missing or cannot be loaded, or an
            override does not apply.
    """
    if isinstance(config, Config):
        cfg = config.copy()
    elif isinstance(config, (str, Path)):
        if not Path(config).is_file():
            raise ConfigError(f'Config file not found: {config}.')
        try:
            cfg = Config.fromfile(str(config))
        # any failure of user-supplied config code
        except Exception as error:
            raise ConfigError(_describe(config, error)) from None
    else:
        raise ConfigError(
            'A config must be a file path or a Config, got '
            f'{type(config).__name__}.'
        )
    if cfg_options:
        try:
            cfg.merge_from_dict(cfg_options)
        except (KeyError, TypeError, ValueError) as error:
            raise ConfigError(
                f'Cannot apply the options {cfg_options} to {config}: {error}'
            ) from None
    return cfg


def _describe(path: Union[str, Path], error: Exception) -> str:
    """The ConfigError line of a failure of ``Config.fromfile``."""
    hint = ''
    if isinstance(error, ImportError) and any(
        name in str(error) for name in ('mmdet', 'mmseg')
    ):
        hint = ' (make install-dense installs mmdet and mmseg)'
    elif getattr(error, 'name', None) == 'pkg_resources':
        # mmengine 0.10 resolves `mmpretrain::` bases with pkg_resources,
        # which setuptools 81 removed
        hint = (
            ' (mmengine needs setuptools < 81 for `mmpretrain::` bases: '
            "pip install 'setuptools<81')"
        )
    if isinstance(error, SyntaxError):
        where = f'line {error.lineno}: ' if error.lineno else ''
        text = f'SyntaxError: {where}{error.msg}'
    else:
        text = f'{type(error).__name__}: {error}'
    return ' '.join(f'Cannot load config {path}: {text}{hint}'.split())
