"""Datasets and transforms registered in mmpretrain's registries, the
safe reader of pickled data files, and safe pickle / YAML handlers for
mmengine's ``load`` (``ann_file``)."""

from .cifar import LocalCIFAR10, LocalCIFAR100
from .digits import DigitsDataset
from .safe_files import SafePickleHandler, SafeYamlHandler, UnsafeDataFileError
from .safe_pickle import UnsafePickleError, load_data_pickle
from .skip_bad_images import SkipBadImages
from .transforms import ConvertImage

__all__ = [
    'ConvertImage',
    'DigitsDataset',
    'LocalCIFAR10',
    'LocalCIFAR100',
    'SafePickleHandler',
    'SafeYamlHandler',
    'SkipBadImages',
    'UnsafeDataFileError',
    'UnsafePickleError',
    'load_data_pickle',
]
