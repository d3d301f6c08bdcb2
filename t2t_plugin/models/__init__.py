from .backbones import T2TViT
from .classifiers import DistillationClassifier
from .heads import T2TClsHead
from .necks import T2TFeaturePyramid
from .t2t import T2TModule

__all__ = [
    'DistillationClassifier',
    'T2TClsHead',
    'T2TFeaturePyramid',
    'T2TModule',
    'T2TViT',
]
