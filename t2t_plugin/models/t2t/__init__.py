from .soft_split import SoftSplit
from .t2t_module import T2TModule
from .token_performer import PerformerAttention, TokenPerformer
from .token_transformer import TokenTransformer

__all__ = [
    'PerformerAttention',
    'SoftSplit',
    'T2TModule',
    'TokenPerformer',
    'TokenTransformer',
]
