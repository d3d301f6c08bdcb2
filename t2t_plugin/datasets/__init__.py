"""Datasets and transforms registered in mmpretrain's registries."""
from .cifar import LocalCIFAR10, LocalCIFAR100
from .digits import DigitsDataset
from .transforms import ConvertImage

__all__ = ['ConvertImage', 'DigitsDataset', 'LocalCIFAR10', 'LocalCIFAR100']
