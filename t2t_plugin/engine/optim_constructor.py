import functools
from typing import Callable, Optional

from mmpretrain.engine.optimizers import (
    LearningRateDecayOptimWrapperConstructor,
)
from mmpretrain.registry import OPTIM_WRAPPER_CONSTRUCTORS
from torch import nn


@OPTIM_WRAPPER_CONSTRUCTORS.register_module()
class BackboneLayerDecayOptimWrapperConstructor(
        LearningRateDecayOptimWrapperConstructor):
    """Layer-wise learning-rate decay for detectors and segmentors.

    mmpretrain's ``LearningRateDecayOptimWrapperConstructor`` asks the model
    itself for ``get_layer_depth``, which only classifiers have. Detectors
    and segmentors have it on their backbone (:meth:`T2TViT.get_layer_depth`),
    so this constructor asks the backbone: a backbone parameter at depth
    ``d`` of ``n`` trains at ``lr * layer_decay_rate ** (n - 1 - d)``, and
    every parameter outside the backbone (neck, heads) at ``lr``. The other
    ``paramwise_cfg`` options are mmpretrain's (``norm_decay_mult``,
    ``bias_decay_mult``, ``flat_decay_mult``, ``custom_keys`` for weight
    decay).

    Use it from mmdet / mmseg configs as
    ``constructor='mmpretrain.BackboneLayerDecayOptimWrapperConstructor'``.
    """

    def add_params(self,
                   params: list[dict],
                   module: nn.Module,
                   prefix: str = '',
                   get_layer_depth: Optional[Callable] = None,
                   **kwargs) -> None:
        if get_layer_depth is None and not hasattr(module, 'get_layer_depth'):
            backbone = getattr(module, 'backbone', None)
            if not hasattr(backbone, 'get_layer_depth'):
                raise TypeError(
                    f'Layer-wise lr decay needs a backbone with '
                    f'get_layer_depth (e.g. T2TViT); {type(module).__name__}'
                    f' has {type(backbone).__name__}. Remove the '
                    '`constructor` from optim_wrapper or change the '
                    'backbone.')
            get_layer_depth = functools.partial(
                backbone.get_layer_depth, prefix='backbone.')
        super().add_params(
            params, module, prefix, get_layer_depth=get_layer_depth, **kwargs)
