"""T2T-ViT for OpenMMLab: importing this package registers its models
in mmpretrain's registries and its model index in mmpretrain's ModelHub."""
from . import datasets, engine, models  # noqa: F401
from .model_index import register_model_index
from .version import __version__

register_model_index()

__all__ = ['__version__']
