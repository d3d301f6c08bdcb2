"""Model analysis: complexity counts, what the model sees, curves."""

from .complexity import PAPER_MACS, ModelComplexity, count_complexity
from .curves import find_scalar_files, load_scalars, plot_curves
from .token_maps import (
    attention_pool_maps,
    cls_attention_maps,
    collect_token_maps,
)

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
