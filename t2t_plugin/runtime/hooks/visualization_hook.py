import math
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

import numpy as np
from mmengine.fileio import join_path
from mmengine.runner import EpochBasedTrainLoop
from mmengine.visualization import Visualizer
from mmpretrain.engine.hooks import VisualizationHook
from mmpretrain.registry import HOOKS
from mmpretrain.structures import DataSample

from ...analysis.figures import MIN_PICTURE_SIDE, upscale


@HOOKS.register_module()
class ReadableVisualizationHook(VisualizationHook):
    """mmpretrain's :class:`VisualizationHook` (same arguments, what
    ``--show-dir`` switches on), drawing pictures people can read.

    Upstream draws each image at its own size (an 8x8 or 32x32 PNG, with
    text too small to read), names the file after the image's file name
    alone (images of one name in two class folders overwrite each other)
    and numbers images without a path by ``batch index x batch size``
    (the smaller last batch overwrites earlier ones). Here small images are
    scaled up by a whole factor (pixels stay sharp) to at least
    ``min_side`` pixels, grey ones drawn as grey, files are named
    ``<folder>_<stem>_<step>.png`` after the image's folder (its class
    folder in a ``CustomDataset``), and images are counted as they come.

    Args:
        min_side (int): The smallest side of a drawn picture. Defaults to
            224.
        **kwargs: :class:`VisualizationHook` arguments (``enable``,
            ``interval``, ``show``, ``out_dir``, ...).
    """

    def __init__(self, min_side: int = MIN_PICTURE_SIDE, **kwargs) -> None:
        super().__init__(**kwargs)
        self.min_side = min_side
        self._seen = 0

    def before_val_epoch(self, runner) -> None:
        self._seen = 0

    def before_test_epoch(self, runner) -> None:
        self._seen = 0

    def after_val_iter(
        self,
        runner,
        batch_idx: int,
        data_batch: dict,
        outputs: Sequence[DataSample],
    ) -> None:
        # the step of the training run, as upstream numbers its pictures
        by_epoch = isinstance(runner.train_loop, EpochBasedTrainLoop)
        step = runner.epoch if by_epoch else runner.iter
        self.draw_batch(data_batch, outputs, step)

    def after_test_iter(
        self,
        runner,
        batch_idx: int,
        data_batch: dict,
        outputs: Sequence[DataSample],
    ) -> None:
        self.draw_batch(data_batch, outputs, step=0)

    def draw_batch(
        self,
        data_batch: dict,
        data_samples: Sequence[DataSample],
        step: int = 0,
    ) -> None:
        """Draw every ``interval``-th sample of a batch with its label and
        prediction."""
        start, self._seen = self._seen, self._seen + len(data_samples)
        if not self.enable:
            return
        visualizer = Visualizer.get_current_instance()
        first = math.ceil(start / self.interval) * self.interval
        for index in range(first, self._seen, self.interval):
            sample = data_samples[index - start]
            picture = data_batch['inputs'][index - start]
            picture = picture.permute(1, 2, 0).cpu().numpy().astype(np.uint8)
            if picture.shape[2] == 1:
                picture = np.repeat(picture, 3, axis=2)
            name = sample_name(sample, index)
            draw_args = dict(self.draw_args)
            if self.out_dir is not None:
                draw_args['out_file'] = join_path(
                    self.out_dir, f'{name}_{step}.png'
                )
            visualizer.visualize_cls(
                image=upscale(picture, self.min_side),
                data_sample=sample,
                step=step,
                name=name,
                **draw_args,
            )


def sample_name(sample: DataSample, index: int) -> str:
    """``<folder>_<stem>`` of a sample's image file, else its index."""
    path: Optional[str] = sample.get('img_path')
    if not path:
        return str(index)
    path = Path(path)
    return f'{path.parent.name}_{path.stem}' if path.parent.name else path.stem
