import logging
import multiprocessing
import os.path as osp
import warnings
from collections.abc import Iterator
from typing import Any, Callable, NamedTuple, Optional

import torch
from mmengine.logging import print_log
from PIL import Image


def base_datasets(dataset: Any) -> Iterator[Any]:
    """The datasets that read samples, inside any wrappers
    (``RepeatDataset``, ``ConcatDataset``, ``ClassBalancedDataset``,
    ``SampleSeededDataset``, mmdet's ``MultiImageMixDataset``, ...).

    A wrapper is looked through before its own attributes are: one that
    forwards ``pipeline`` or has a pipeline of its own (a mix of samples
    already loaded) would otherwise stand for the dataset that reads the
    files, whatever the order of wrapping."""
    if hasattr(dataset, 'datasets'):
        for child in dataset.datasets:
            yield from base_datasets(child)
    elif getattr(dataset, 'dataset', None) is not None:
        yield from base_datasets(dataset.dataset)
    elif hasattr(dataset, 'pipeline') and hasattr(dataset, 'get_data_info'):
        yield dataset


def image_size(path: Any) -> tuple[int, int]:
    """``(width, height)`` of an image file from its header alone: OSError,
    SyntaxError or ValueError for a file Pillow cannot identify, and
    Pillow's decompression-bomb check made strict: its
    ``DecompressionBombError`` for more pixels than
    ``PIL.Image.MAX_IMAGE_PIXELS`` (Pillow itself only warns up to twice
    that), the one limit of training and of tools/infer.py.

    OpenCV, mmcv's default decoder, decodes up to 2**30 pixels: a
    20000x20000 PNG of about a megabyte takes gigabytes before any resize
    of the pipeline.
    """
    with warnings.catch_warnings():
        warnings.simplefilter('error', Image.DecompressionBombWarning)
        try:
            with Image.open(path) as image:
                return image.size
        except (Image.DecompressionBombError, Image.DecompressionBombWarning):
            raise Image.DecompressionBombError(
                f'more pixels than the {Image.MAX_IMAGE_PIXELS} that are '
                'decoded at most (PIL.Image.MAX_IMAGE_PIXELS); resize the '
                'image'
            ) from None


def oversized_image(path: Any) -> Optional[str]:
    """Why a local image file is too large to decode (:func:`image_size`);
    None for a file Pillow cannot identify (the pipeline's reader decides)
    or a path that is not a local file."""
    if isinstance(path, str) and osp.isfile(path):
        try:
            image_size(path)
        except Image.DecompressionBombError as error:
            return str(error)
        except (OSError, SyntaxError, ValueError):
            pass
    return None


class BadImage(NamedTuple):
    """An image :class:`SkipBadImages` could not use."""

    path: str
    problem: str
    # whether it is the image of the sample asked for (that sample was
    # replaced) rather than one tried in its place
    asked_for: bool


class SkipBadImages:
    """The pipeline of a dataset, replacing a sample that cannot be used by
    the next usable one.

    An unreadable image, one of more pixels than Pillow decodes at most
    (read from its header, before it is decoded), one the backbone's
    strides cannot tile or with the wrong channels would otherwise end a
    run, and its rerun would die at the same image. It is reported in one
    warning line and replaced by the next sample (not a random one: the
    generators stay as they were, for an exact resume). ``RunGuardHook``
    wraps every dataset of a run, gathers the reports from the workers and
    stops the run past its limit.

    Not mmengine's ``BaseDataset(max_refetch=...)``: it replaces only a
    sample whose pipeline returns None, while mmcv's ``LoadImageFromFile``
    raises on an unreadable file (an ``AssertionError`` even with
    ``ignore_empty=True`` for bytes it cannot decode); it raises in
    ``test_mode`` (validation and test); it draws the replacement from
    numpy's global generator, which a resume does not replay; and it says
    nothing about what it skipped.

    Args:
        dataset: The dataset whose pipeline is wrapped.
        pipeline (Callable): Its pipeline.
        in_channels (int, optional): Channels a sample must have.
            Defaults to None (any).
        size_multiple (int, optional): Both image sides must be multiples
            of it (the backbone's total stride). Defaults to None (any).
    """

    def __init__(
        self,
        dataset: Any,
        pipeline: Callable,
        in_channels: Optional[int] = None,
        size_multiple: Optional[int] = None,
    ) -> None:
        self.dataset = dataset
        self.pipeline = pipeline
        self.in_channels = in_channels
        self.size_multiple = size_multiple
        # Filled in data-loader workers, drained by RunGuardHook in the
        # main process (a queue made before the workers start).
        self.reports = multiprocessing.get_context().Queue()

    @classmethod
    def wrap(cls, dataset: Any, **kwargs) -> 'SkipBadImages':
        """Put the wrapper in front of ``dataset``'s pipeline (once)."""
        if not isinstance(dataset.pipeline, cls):
            dataset.pipeline = cls(dataset, dataset.pipeline, **kwargs)
        return dataset.pipeline

    def _problem(self, sample: Any) -> Optional[str]:
        inputs = sample.get('inputs') if isinstance(sample, dict) else None
        if not isinstance(inputs, torch.Tensor) or inputs.dim() != 3:
            return None
        channels, height, width = inputs.shape
        if self.in_channels is not None and channels != self.in_channels:
            return f'{channels} channels, the model takes {self.in_channels}'
        multiple = self.size_multiple  # the soft splits' total stride
        if multiple and (height % multiple or width % multiple):
            return (
                f'{height}x{width} pixels after the pipeline, not '
                f'multiples of the stride {multiple}'
            )
        return None

    def __call__(self, data_info: dict) -> Any:
        size = len(self.dataset)
        index = data_info.get('sample_idx', 0)
        for attempt in range(size):
            path = str(data_info.get('img_path') or f'sample {index}')
            try:
                problem = oversized_image(data_info.get('img_path'))
                if problem is None:
                    sample = self.pipeline(data_info)
                    problem = self._problem(sample)
            # Readers fail with any type (OSError, cv2.error, an assertion
            # of mmcv's loader, a transform's ValueError on a tiny image);
            # the message goes into the report, the run goes on.
            except Exception as error:
                problem = (
                    ' '.join(str(error).split())[:200] or type(error).__name__
                )
            if problem is None:
                return sample
            print_log(
                f'Skipped {path}: {problem}',
                logger='current',
                level=logging.WARNING,
            )
            self.reports.put(BadImage(path, problem, attempt == 0))
            index = (index + 1) % size
            data_info = self.dataset.get_data_info(index)
        raise RuntimeError(
            'No usable sample in the dataset: every image '
            'failed to load (see the warnings above).'
        )

    def drain(self) -> tuple[BadImage, ...]:
        """The reports made since the last call, in the main process."""
        reports = []
        while True:
            try:
                reports.append(self.reports.get_nowait())
            except Exception:  # queue.Empty: nothing more for now
                break
        return tuple(reports)
