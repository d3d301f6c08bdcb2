from .soft_split import SoftSplit
from .t2t_module import TOKEN_LAYERS, T2TModule
from .token_convolution import TokenConvolution
from .token_performer import PerformerAttention, TokenPerformer
from .token_transformer import TokenTransformer

__all__ = [
    'TOKEN_LAYERS',
    'PerformerAttention',
    'SoftSplit',
    'T2TModule',
    'TokenConvolution',
    'TokenPerformer',
    'TokenTransformer',
]
