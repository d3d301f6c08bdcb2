"""T2T-ViT for OpenMMLab: importing this package registers its models
in mmpretrain's registries and its model index in mmpretrain's ModelHub."""

import warnings

# Set before the imports below, which import mmpretrain and mmcv.
# mmengine 0.10 resolves ``mmpretrain::`` / ``mmdet::`` config bases with
# pkg_resources, whose import warns on every run; the pin that keeps it
# (setuptools<81) is ours, so the warning tells a user nothing.
warnings.filterwarnings(
    'ignore', message='pkg_resources is deprecated', category=UserWarning
)
# mmcv-lite warns on import that it lacks the deformable-attention op, which
# no model of this plugin uses (the dense path needs full mmcv and says so).
warnings.filterwarnings(
    'ignore',
    message='Fail to import ``MultiScaleDeformableAttention``',
    category=UserWarning,
)

from . import datasets, engine, models  # noqa: E402, F401
from .compat import warn_if_mmcv_ops_lack_cuda  # noqa: E402
from .model_index import register_model_index  # noqa: E402
from .version import __version__  # noqa: E402

register_model_index()
# mmdet/mmseg ops of a CPU-only mmcv fail on CUDA tensors: say so early.
warn_if_mmcv_ops_lack_cuda()

__all__ = ['__version__']
