"""T2T-ViT for OpenMMLab: importing this package registers its models."""
import warnings

from . import datasets, engine, models  # noqa: F401
from .version import __version__

# mmengine 0.10 resolves ``mmpretrain::`` / ``mmdet::`` config bases with
# pkg_resources, whose import warns on every run; the pin that keeps it
# (setuptools<81) is ours, so the warning tells a user nothing.
warnings.filterwarnings(
    'ignore', message='pkg_resources is deprecated', category=UserWarning)

__all__ = ['__version__']
