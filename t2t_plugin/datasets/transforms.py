"""Transforms registered in mmpretrain's ``TRANSFORMS`` registry."""

from typing import Optional

import mmcv
import numpy as np
from mmcv.transforms import BaseTransform
from mmpretrain.registry import TRANSFORMS


@TRANSFORMS.register_module()
class ConvertImage(BaseTransform):
    """Make ``results['img']`` an 8-bit image of ``channels`` channels.

    mmpretrain's ``ImageClassificationInferencer`` reads every file in
    colour and passes arrays on as they are. First in a test pipeline, this
    makes every file and array reach the model as the dataset's images do:
    16 bits scaled to 8 (``round(v / 257)``, as OpenCV reads them), alpha
    dropped, colour made grey (OpenCV's weights) or grey repeated; other
    types and shapes are refused with a message saying what was expected.

    Required keys: ``img``. Modified keys: ``img``, ``img_shape``.

    Args:
        channels (int): 1 (grey) or 3 (BGR). Defaults to 3.
    """

    def __init__(self, channels: int = 3) -> None:
        if channels not in (1, 3):
            raise ValueError(f'channels must be 1 or 3, got {channels}.')
        self.channels = channels

    def transform(self, results: dict) -> Optional[dict]:
        """Convert ``results['img']`` (see :meth:`convert`)."""
        results['img'] = self.convert(results['img'])
        results['img_shape'] = results['img'].shape[:2]
        return results

    def convert(self, image: np.ndarray) -> np.ndarray:
        """The conversion of :meth:`transform` on one array."""
        if not isinstance(image, np.ndarray):
            raise TypeError(
                'An image must be a numpy array, got '
                f'{type(image).__name__}; give a file path or '
                'np.asarray(image).'
            )
        if image.ndim not in (2, 3) or (
            image.ndim == 3 and image.shape[2] not in (1, 3, 4)
        ):
            raise ValueError(
                'An image must be an (H, W), (H, W, 3) BGR or (H, W, 4) BGRA '
                f'array, got shape {image.shape}.'
            )
        if image.size == 0:
            raise ValueError(
                f'The image is empty (shape {image.shape}); '
                'give an image of at least one pixel.'
            )
        wide_int = (
            image.dtype.kind in 'iu'
            and image.dtype != np.uint8
            and image.min() >= 0
            and image.max() <= 65535
        )
        if image.dtype == np.uint16 or (wide_int and image.max() > 255):
            # 16-bit data: uint16, or int32 as older Pillow reads a 16-bit
            # PNG ('I' mode)
            image = (image / 257).round().astype(np.uint8)
        elif wide_int:
            image = image.astype(np.uint8)  # 8-bit values in a wider type
        elif image.dtype != np.uint8:
            raise ValueError(
                f'Image arrays must be uint8 (0-255) or 16-bit integers '
                f'(0-65535), got {image.dtype}; convert floats in [0, 1] with '
                '(image * 255).round().astype(np.uint8).'
            )
        if image.ndim == 3 and image.shape[2] == 4:
            image = image[..., :3]  # alpha plays no part in classification
        if image.ndim == 3 and image.shape[2] == 1:
            image = image[..., 0]
        is_grey = image.ndim == 2
        if self.channels == 1 and not is_grey:
            return mmcv.bgr2gray(np.ascontiguousarray(image))
        if self.channels == 3 and is_grey:
            return mmcv.gray2bgr(image)
        return np.ascontiguousarray(image)

    def __repr__(self) -> str:
        return f'{type(self).__name__}(channels={self.channels})'
