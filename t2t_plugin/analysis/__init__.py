"""Model analysis: complexity counts and pictures of what the model sees."""
from .attention_maps import cls_attention_maps
from .complexity import PAPER_MACS, ModelComplexity, count_complexity
from .token_maps import (
    collect_token_maps,
    default_block_indices,
    resolve_block_indices,
)

__all__ = [
    'PAPER_MACS', 'ModelComplexity', 'cls_attention_maps',
    'collect_token_maps', 'count_complexity', 'default_block_indices',
    'resolve_block_indices'
]
