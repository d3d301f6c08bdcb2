from typing import Optional

from mmengine.hooks import Hook
from mmengine.registry import HOOKS

from ...datasets.skip_bad_images import SkipBadImages, base_datasets
from .run_checks import built_loaders, t2t_module
from .training_stopped import TrainingStopped


class TooManyBadImagesError(TrainingStopped):
    """More different images were skipped than ``max_bad_images``."""


@HOOKS.register_module()
class BadImageHook(Hook):
    """Skip the images a run cannot use, count them, and stop past a limit.

    Before the run it puts :class:`~t2t_plugin.datasets.SkipBadImages` in
    front of the pipeline of every dataset the run reads (training,
    validation, test; any toolbox's ``BaseDataset``), with the backbone's
    channels and total stride, so that images the model cannot take are
    skipped too. It summarises the skipped images in one line per epoch,
    evaluation or test, and stops the run once more than
    ``max_bad_images`` different images were skipped.

    Args:
        max_bad_images (int): Distinct bad images that stop the run.
            Defaults to 100.
    """

    priority = 'NORMAL'

    def __init__(self, max_bad_images: int = 100) -> None:
        if not isinstance(max_bad_images, int) or max_bad_images < 0:
            raise ValueError(
                'BadImageHook: max_bad_images must be a whole number >= 0, '
                f'got {max_bad_images!r}.'
            )
        self.max_bad_images = max_bad_images
        self.wrappers: dict[str, list[SkipBadImages]] = {}
        self.bad: set = set()
        self.reports: list[tuple[str, str]] = []

    def before_run(self, runner) -> None:
        """Wrap the pipelines of the run's datasets."""
        # mmdet's and mmseg's data preprocessors pad any size and channels
        # are the model's business there: only classifiers are checked.
        scope = runner.cfg.get('default_scope', 'mmpretrain')
        t2t = t2t_module(runner) if scope == 'mmpretrain' else None
        limits = dict(
            in_channels=getattr(t2t, 'in_channels', None),
            size_multiple=getattr(t2t, 'total_stride', None),
        )
        for key, loader in built_loaders(runner).items():
            self.wrappers[key] = [
                SkipBadImages.wrap(dataset, **limits)
                for dataset in base_datasets(loader.dataset)
            ]

    def _collect(self, key: str, runner) -> None:
        for wrapper in self.wrappers.get(key, ()):
            reports = wrapper.drain()
            self.reports.extend(reports)
            self.bad.update(path for path, _ in reports)
        if len(self.bad) > self.max_bad_images:
            where = (
                f'at iteration {runner.iter + 1}'
                if key == 'train_dataloader'
                else f'in {key.split("_")[0]}'
            )
            raise TooManyBadImagesError(
                f'Run stopped {where}: {len(self.bad)} different images '
                f'could not be used (more than max_bad_images='
                f'{self.max_bad_images}), e.g. '
                f'{", ".join(sorted(self.bad)[:3])}; check the dataset (see '
                'the warnings in the log).'
            )

    def _summarise(self, runner, what: str) -> None:
        if not self.reports:
            return
        paths = sorted({path for path, _ in self.reports})
        shown = ', '.join(paths[:10]) + (' ...' if len(paths) > 10 else '')
        runner.logger.warning(
            f'{what}: skipped {len(self.reports)} sample(s) from '
            f'{len(paths)} image(s) that could not be used (each replaced '
            f'by the next image): {shown}'
        )
        self.reports = []

    def after_train_iter(
        self, runner, batch_idx: int, data_batch=None, outputs=None
    ) -> None:
        self._collect('train_dataloader', runner)

    def after_train_epoch(self, runner) -> None:
        self._summarise(runner, f'Epoch {runner.epoch + 1}')

    def after_val_iter(
        self, runner, batch_idx: int, data_batch=None, outputs=None
    ) -> None:
        self._collect('val_dataloader', runner)

    def after_val_epoch(self, runner, metrics: Optional[dict] = None) -> None:
        self._summarise(runner, 'Evaluation')

    def after_test_iter(
        self, runner, batch_idx: int, data_batch=None, outputs=None
    ) -> None:
        self._collect('test_dataloader', runner)

    def after_test_epoch(self, runner, metrics: Optional[dict] = None) -> None:
        self._summarise(runner, 'Test')
