from .backbones import T2TViT
from .heads import T2TClsHead
from .necks import T2TFeaturePyramid
from .t2t import T2TModule

__all__ = [
    'T2TClsHead',
    'T2TFeaturePyramid',
    'T2TModule',
    'T2TViT',
]
