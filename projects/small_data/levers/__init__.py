"""The small-data levers under study, registered in mmpretrain's
``MODELS`` on import (``custom_imports=dict(imports=
['projects.small_data.levers'])``): parts of the product subclassed
through its extension points, each measured in
``projects/small_data/README.md``."""

from .conv_stem import ConvStemTokenLayer
from .distillation_classifier import DistillationClassifier
from .drloc_head import DRLocClsHead
from .locality_attention import (
    LocalitySelfAttention,
    LocalityTransformerLayer,
)

__all__ = [
    'ConvStemTokenLayer',
    'DRLocClsHead',
    'DistillationClassifier',
    'LocalitySelfAttention',
    'LocalityTransformerLayer',
]
