import logging
import multiprocessing
from typing import Any, Optional, Union

import torch
from mmengine.logging import print_log
from mmpretrain.registry import DATASETS


@DATASETS.register_module()
class SkipBadImages:
    """Dataset wrapper that skips samples which cannot be used for training.

    One unreadable image (truncated, zero bytes, not an image), an image of
    a size the backbone's strides cannot tile, or one with the wrong number
    of channels would otherwise end a run mid-epoch with a long traceback,
    and the rerun dies at the same image. Such a sample is reported as one
    warning line and replaced by the next usable sample of the dataset.
    ``BadImageHook`` gathers the reports from the data-loader workers,
    summarises them at the end of each epoch and stops training when more
    than ``max_bad_images`` different images were skipped.
    ``tools/train.py`` wraps the training set of mmpretrain configs in it.

    Args:
        dataset (dict | Dataset): The dataset, or its config.
        max_bad_images (int): Distinct bad images that stop training.
            Defaults to 100.
        in_channels (int, optional): Channels a sample must have; set by
            ``BadImageHook`` from the backbone. Defaults to None (any).
        size_multiple (int, optional): Both image sides must be multiples
            of it; set by ``BadImageHook`` from the backbone's total
            stride. Defaults to None (any size).
    """

    def __init__(
        self,
        dataset: Union[dict, Any],
        max_bad_images: int = 100,
        in_channels: Optional[int] = None,
        size_multiple: Optional[int] = None,
    ) -> None:
        self.dataset = (
            DATASETS.build(dataset) if isinstance(dataset, dict) else dataset
        )
        self.max_bad_images = max_bad_images
        self.in_channels = in_channels
        self.size_multiple = size_multiple
        # Filled in data-loader workers, drained by BadImageHook in the
        # main process (a queue made before the workers start).
        self.reports = multiprocessing.get_context().Queue()

    @property
    def metainfo(self) -> dict:
        return self.dataset.metainfo

    def __len__(self) -> int:
        return len(self.dataset)

    def __getattr__(self, name: str) -> Any:
        # get_data_info, full_init, ... of the wrapped dataset; 'dataset'
        # itself is looked up here only while unpickling
        if name == 'dataset':
            raise AttributeError(name)
        return getattr(self.dataset, name)

    def _path(self, index: int) -> str:
        try:
            info = self.dataset.get_data_info(index)
        except Exception:  # any dataset: the index names the sample then
            info = {}
        return str(info.get('img_path') or f'sample {index}')

    def _problem(self, sample: Any) -> Optional[str]:
        inputs = sample.get('inputs') if isinstance(sample, dict) else None
        if not isinstance(inputs, torch.Tensor) or inputs.dim() != 3:
            return None
        channels, height, width = inputs.shape
        if self.in_channels is not None and channels != self.in_channels:
            return f'{channels} channels, the model takes {self.in_channels}'
        multiple = self.size_multiple
        # The T2T soft splits tile exactly the sides that are multiples of
        # their total stride.
        if multiple and (height % multiple or width % multiple):
            return (
                f'{height}x{width} pixels after the pipeline, not '
                f'multiples of the stride {multiple}'
            )
        return None

    def __getitem__(self, index: int) -> Any:
        for _ in range(len(self)):
            try:
                sample = self.dataset[index]
                problem = self._problem(sample)
            # Readers fail with any type (OSError, cv2.error, an assertion
            # of mmcv's loader, a transform's ValueError on a tiny image);
            # the message goes into the report, the run goes on.
            except Exception as error:
                sample = None
                problem = (
                    ' '.join(str(error).split())[:200] or type(error).__name__
                )
            if problem is None:
                return sample
            path = self._path(index)
            print_log(
                f'Skipped {path}: {problem}',
                logger='current',
                level=logging.WARNING,
            )
            self.reports.put((path, problem))
            # the next sample, not a random one: the random generators stay
            # as they were (exact resume)
            index = (index + 1) % len(self)
        raise RuntimeError(
            'No usable sample in the dataset: every image '
            'failed to load (see the warnings above).'
        )

    def drain(self) -> tuple[tuple[str, str], ...]:
        """The reports made since the last call, in the main process."""
        reports = []
        while True:
            try:
                reports.append(self.reports.get_nowait())
            except Exception:  # queue.Empty: nothing more for now
                break
        return tuple(reports)
