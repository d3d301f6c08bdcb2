"""Datasets registered in mmpretrain's ``DATASETS`` registry."""
from .cifar import LocalCIFAR10, LocalCIFAR100
from .digits import DigitsDataset

__all__ = ['DigitsDataset', 'LocalCIFAR10', 'LocalCIFAR100']
