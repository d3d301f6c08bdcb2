"""T2T-ViT for OpenMMLab: importing this package registers its models."""
from . import datasets, engine, models  # noqa: F401
from .version import __version__

__all__ = ['__version__']
