"""The start of a run of ``t2t_plugin``, importable without it: reading a
config with its ``--cfg-options``, the command-line options of the tools,
and every check of a config that needs no model (:mod:`.checks`).

``import t2t_plugin`` registers the models, and with them imports torch
and mmpretrain's models (seconds); this package imports only the standard
library and ``mmengine.config``, so that a tool answers a wrong key,
folder or file before that. ``t2t_plugin`` uses it too: one reader, one
check of each decision.
"""

from .checks import check_config
from .config import load_config
from .errors import ConfigError

__all__ = [
    'ConfigError',
    'check_config',
    'load_config',
]
