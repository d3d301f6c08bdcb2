"""Datasets and transforms registered in mmpretrain's registries, and the
checks of a dataset against the model."""

from .cifar import LocalCIFAR10, LocalCIFAR100
from .dataset_checks import label_range_problem, linked_folders_problem
from .digits import DigitsDataset
from .transforms import ConvertImage

__all__ = [
    'ConvertImage',
    'DigitsDataset',
    'LocalCIFAR10',
    'LocalCIFAR100',
    'label_range_problem',
    'linked_folders_problem',
]
