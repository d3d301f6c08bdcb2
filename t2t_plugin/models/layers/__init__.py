from .ffn import FFN
from .position_encoding import resize_pos_embed, sinusoid_position_table
from .self_attention import SelfAttention
from .transformer_layer import TransformerLayer

__all__ = [
    'FFN',
    'SelfAttention',
    'TransformerLayer',
    'resize_pos_embed',
    'sinusoid_position_table',
]
