from .t2t_module import T2TModule
from .token_performer import PerformerAttention, TokenPerformer
from .token_transformer import TokenTransformer

__all__ = [
    'PerformerAttention', 'T2TModule', 'TokenPerformer', 'TokenTransformer'
]
