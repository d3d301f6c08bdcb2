"""T2T-ViT for OpenMMLab: importing this package registers its models."""
from . import datasets, engine, models  # noqa: F401
from .compat import warn_if_mmcv_ops_lack_cuda
from .version import __version__

# mmdet/mmseg ops of a CPU-only mmcv fail on CUDA tensors: say so early.
warn_if_mmcv_ops_lack_cuda()

__all__ = ['__version__']
