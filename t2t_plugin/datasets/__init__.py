"""Datasets registered in mmpretrain's ``DATASETS`` registry, and the safe
reader of pickled data files."""
from .cifar import LocalCIFAR10, LocalCIFAR100
from .digits import DigitsDataset
from .safe_pickle import UnsafePickleError, load_data_pickle
from .skip_bad_images import SkipBadImages

__all__ = [
    'DigitsDataset', 'LocalCIFAR10', 'LocalCIFAR100', 'SkipBadImages',
    'UnsafePickleError', 'load_data_pickle'
]
