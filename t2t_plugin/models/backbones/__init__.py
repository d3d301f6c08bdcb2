from .t2t_vit import T2TViT

__all__ = ['T2TViT']
