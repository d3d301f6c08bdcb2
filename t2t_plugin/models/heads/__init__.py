from .t2t_cls_head import T2TClsHead

__all__ = ['T2TClsHead']
