"""Transforms registered in mmpretrain's ``TRANSFORMS`` registry."""

from .convert_image import ConvertImage

__all__ = ['ConvertImage']
