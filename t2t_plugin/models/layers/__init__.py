from .ffn import FFN
from .position_encoding import sinusoid_position_table
from .self_attention import SelfAttention
from .transformer_layer import TransformerLayer

__all__ = [
    'FFN',
    'SelfAttention',
    'TransformerLayer',
    'sinusoid_position_table',
]
