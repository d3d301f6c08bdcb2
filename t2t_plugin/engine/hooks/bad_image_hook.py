from typing import Optional

from mmengine.hooks import Hook
from mmengine.registry import HOOKS

from .training_stopped import TrainingStopped


class TooManyBadImagesError(TrainingStopped):
    """More images were skipped than ``SkipBadImages.max_bad_images``."""


def _find_wrapper(dataset):
    while dataset is not None:
        if type(dataset).__name__ == 'SkipBadImages':
            return dataset
        dataset = vars(dataset).get('dataset')
    return None


@HOOKS.register_module()
class BadImageHook(Hook):
    """Count the images that ``SkipBadImages`` skipped, summarise them per
    epoch and stop training past its ``max_bad_images``.

    Before training it gives the wrapper the backbone's channels and total
    stride, so that images the model cannot take are skipped too. Does
    nothing when the training set is not wrapped.
    """

    priority = 'NORMAL'

    def __init__(self) -> None:
        self.wrapper = None
        self.bad: set = set()
        self.epoch_reports: list[tuple[str, str]] = []

    def before_train(self, runner) -> None:
        """Find the wrapper; hand it the backbone's input constraints."""
        self.wrapper = _find_wrapper(runner.train_dataloader.dataset)
        model = getattr(runner.model, 'module', runner.model)
        t2t = getattr(
            getattr(model, 'backbone', None), 'tokens_to_token', None
        )
        if self.wrapper is not None and t2t is not None:
            if self.wrapper.in_channels is None:
                self.wrapper.in_channels = t2t.in_channels
            if self.wrapper.size_multiple is None:
                self.wrapper.size_multiple = t2t.total_stride

    def after_train_iter(
        self,
        runner,
        batch_idx: int,
        data_batch=None,
        outputs: Optional[dict] = None,
    ) -> None:
        """Collect the reports; stop past the limit."""
        if self.wrapper is None:
            return
        reports = self.wrapper.drain()
        self.epoch_reports.extend(reports)
        self.bad.update(path for path, _ in reports)
        if len(self.bad) > self.wrapper.max_bad_images:
            raise TooManyBadImagesError(
                f'Training stopped at iteration {runner.iter + 1}: '
                f'{len(self.bad)} different images could not be used (more '
                f'than max_bad_images={self.wrapper.max_bad_images}), e.g. '
                f'{", ".join(sorted(self.bad)[:3])}; check the dataset (see '
                'the warnings in the log).'
            )

    def after_train_epoch(self, runner) -> None:
        """One summary line for the epoch's skipped images."""
        if not self.epoch_reports:
            return
        paths = sorted({path for path, _ in self.epoch_reports})
        shown = ', '.join(paths[:10]) + (' ...' if len(paths) > 10 else '')
        runner.logger.warning(
            f'Epoch {runner.epoch + 1}: skipped {len(self.epoch_reports)} '
            f'sample(s) from {len(paths)} image(s) that could not be used: '
            f'{shown}'
        )
        self.epoch_reports = []
