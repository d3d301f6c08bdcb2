"""Model analysis: complexity counts, what the model sees, curves.

The complexity counts, which know the model's modules, load on first use:
the runtime reads the curves without importing ``t2t_plugin.models``."""

import importlib
from typing import Any

from .curves import find_scalar_files, load_scalars, plot_curves
from .token_maps import (
    attention_pool_maps,
    cls_attention_maps,
    collect_token_maps,
)

_COMPLEXITY = ('PAPER_MACS', 'ModelComplexity', 'count_complexity')


def __getattr__(name: str) -> Any:
    if name in _COMPLEXITY:
        return getattr(importlib.import_module('.complexity', __name__), name)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


__all__ = [
    'PAPER_MACS',
    'ModelComplexity',
    'attention_pool_maps',
    'cls_attention_maps',
    'collect_token_maps',
    'count_complexity',
    'find_scalar_files',
    'load_scalars',
    'plot_curves',
]
