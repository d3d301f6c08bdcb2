"""Datasets and transforms registered in mmpretrain's registries, the
per-sample seeding of random augmentation and safe readers of data files."""

from .cifar import LocalCIFAR10, LocalCIFAR100
from .dataset_checks import label_range_problem, linked_folders_problem
from .digits import DigitsDataset
from .safe_pickle import (
    DataFileError,
    SafePickleHandler,
    SafeYamlHandler,
    UnsafeDataFileError,
    UnsafePickleError,
    load_data_pickle,
)
from .sample_seeding import (
    SampleSeededDataset,
    SampleSeedSampler,
    own_generator,
    sample_seed,
    sample_seeded_loader,
)
from .skip_bad_images import SkipBadImages
from .transforms import ConvertImage

__all__ = [
    'ConvertImage',
    'DataFileError',
    'DigitsDataset',
    'LocalCIFAR10',
    'LocalCIFAR100',
    'SafePickleHandler',
    'SafeYamlHandler',
    'SampleSeedSampler',
    'SampleSeededDataset',
    'SkipBadImages',
    'UnsafeDataFileError',
    'UnsafePickleError',
    'label_range_problem',
    'linked_folders_problem',
    'load_data_pickle',
    'sample_seed',
    'own_generator',
    'sample_seeded_loader',
]
