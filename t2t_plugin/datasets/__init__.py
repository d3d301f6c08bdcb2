"""Datasets and transforms registered in mmpretrain's registries, and the
safe reader of pickled data files."""

from .cifar import LocalCIFAR10, LocalCIFAR100
from .digits import DigitsDataset
from .safe_pickle import UnsafePickleError, load_data_pickle
from .skip_bad_images import SkipBadImages
from .transforms import ConvertImage

__all__ = [
    'ConvertImage',
    'DigitsDataset',
    'LocalCIFAR10',
    'LocalCIFAR100',
    'SkipBadImages',
    'UnsafePickleError',
    'load_data_pickle',
]
