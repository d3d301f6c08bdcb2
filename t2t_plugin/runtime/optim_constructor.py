import functools
from typing import Callable, Optional

from mmengine.logging import MMLogger
from mmpretrain.engine.optimizers import (
    LearningRateDecayOptimWrapperConstructor,
)
from mmpretrain.registry import OPTIM_WRAPPER_CONSTRUCTORS
from torch import nn


@OPTIM_WRAPPER_CONSTRUCTORS.register_module()
class BackboneLayerDecayOptimWrapperConstructor(
    LearningRateDecayOptimWrapperConstructor
):
    """Layer-wise learning-rate decay for detectors and segmentors.

    mmpretrain's ``LearningRateDecayOptimWrapperConstructor`` asks the model
    for ``get_layer_depth``, which only classifiers have; this one asks the
    backbone (:meth:`T2TViT.get_layer_depth`): a backbone parameter at depth
    ``d`` of ``n`` trains at ``lr * layer_decay_rate ** (n - 1 - d)``, the
    neck and heads at ``lr``. Other ``paramwise_cfg`` options are
    mmpretrain's. Use it from mmdet / mmseg configs as
    ``constructor='mmpretrain.BackboneLayerDecayOptimWrapperConstructor'``.
    """

    def add_params(
        self,
        params: list[dict],
        module: nn.Module,
        prefix: str = '',
        get_layer_depth: Optional[Callable] = None,
        **kwargs,
    ) -> None:
        if get_layer_depth is None and not hasattr(module, 'get_layer_depth'):
            backbone = getattr(module, 'backbone', None)
            if not hasattr(backbone, 'get_layer_depth'):
                raise TypeError(
                    f'Layer-wise lr decay needs a backbone with '
                    f'get_layer_depth (e.g. T2TViT); {type(module).__name__}'
                    f' has {type(backbone).__name__}. Remove the '
                    '`constructor` from optim_wrapper or change the '
                    'backbone.'
                )
            get_layer_depth = functools.partial(
                backbone.get_layer_depth, prefix='backbone.'
            )
        super().add_params(
            params, module, prefix, get_layer_depth=get_layer_depth, **kwargs
        )
        if prefix == '' and params:
            scales = [group['lr_scale'] for group in params]
            MMLogger.get_current_instance().info(
                'Layer-wise lr decay '
                f'{self.paramwise_cfg.get("layer_decay_rate", 1.0)}: '
                f'parameter groups train at base_lr x {min(scales):.3g} '
                '(T2T module) up to '
                f'base_lr x {max(scales):.3g} (neck, heads); the log shows '
                "base_lr and, as lr, the first group's rate "
                f'(x {params[0]["lr_scale"]:.3g}).'
            )
