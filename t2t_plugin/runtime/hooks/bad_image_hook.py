from mmengine.hooks import Hook
from mmengine.registry import HOOKS
from mmengine.runner import EpochBasedTrainLoop

from ...datasets.option_checks import check_int
from ..sample_seeded_runner import LoaderGuard
from ..skip_bad_images import BadImage, SkipBadImages, base_datasets
from .run_checks import TrainingStopped, t2t_module


class TooManyBadImagesError(TrainingStopped):
    """More different images were skipped than ``max_bad_images``."""


@HOOKS.register_module()
class BadImageHook(Hook, LoaderGuard):
    """Skip the images a run cannot use, count them, and stop past a limit.

    Before training, each validation and test it puts
    :class:`~t2t_plugin.datasets.SkipBadImages` in front of the pipeline
    of every dataset the loop reads (inside any dataset wrappers;
    ``SampleSeededRunner`` has it guard the training loader before an
    iteration-based loop starts the loader's workers), with the
    backbone's channels and total stride, so that images the model cannot
    take are skipped too. One line per epoch, evaluation or test sums up
    the skipped images.

    Args:
        max_bad_images (int): Distinct bad images that stop the run.
            Defaults to 100.
    """

    priority = 'NORMAL'

    def __init__(self, max_bad_images: int = 100) -> None:
        check_int('BadImageHook', 'max_bad_images', max_bad_images, 0)
        self.max_bad_images = max_bad_images
        self.wrappers: dict[str, list[SkipBadImages]] = {}
        self.bad: set = set()
        # by mode: an iteration-based run validates before its one
        # after_train_epoch, which sums up the training's reports
        self.reports: dict[str, list[BadImage]] = {}

    def guard(self, runner, loader, key: str) -> None:
        """Guard the pipelines of the datasets ``loader`` reads (the
        ``key`` loader of the run), before it is first iterated: its
        workers copy the datasets when they start."""
        # mmdet's and mmseg's data preprocessors pad any size and channels
        # are the model's business there: only classifiers are checked.
        scope = runner.cfg.get('default_scope', 'mmpretrain')
        t2t = t2t_module(runner) if scope == 'mmpretrain' else None
        limits = dict(
            in_channels=getattr(t2t, 'in_channels', None),
            size_multiple=getattr(t2t, 'total_stride', None),
        )
        self.wrappers[key] = [
            SkipBadImages.wrap(dataset, **limits)
            for dataset in base_datasets(loader.dataset)
        ]

    def _wrap(self, runner, mode: str) -> None:
        loader = getattr(runner, f'{mode}_dataloader')
        self.guard(runner, loader, f'{mode}_dataloader')

    def before_train(self, runner) -> None:
        """Wrap the pipelines of the training datasets."""
        self._wrap(runner, 'train')

    def before_val(self, runner) -> None:
        """Wrap the pipelines of the validation datasets."""
        self._wrap(runner, 'val')

    def before_test(self, runner) -> None:
        """Wrap the pipelines of the test datasets."""
        self._wrap(runner, 'test')

    def _after_iter(
        self, runner, batch_idx, data_batch=None, outputs=None, mode='train'
    ) -> None:
        """Collect the skipped images; stop past the limit."""
        for wrapper in self.wrappers.get(f'{mode}_dataloader', ()):
            reports = wrapper.drain()
            self.reports.setdefault(mode, []).extend(reports)
            self.bad.update(report.path for report in reports)
        if len(self.bad) > self.max_bad_images:
            where = (
                f'at iteration {runner.iter + 1}'
                if mode == 'train'
                else f'in {mode}'
            )
            raise TooManyBadImagesError(
                f'Run stopped {where}: {len(self.bad)} different images '
                f'could not be used (more than max_bad_images='
                f'{self.max_bad_images}), e.g. '
                f'{", ".join(sorted(self.bad)[:3])}; check the dataset (see '
                'the warnings in the log).'
            )

    def _after_epoch(self, runner, mode: str = 'train') -> None:
        """Sum up the images skipped since the last line."""
        reports = self.reports.pop(mode, [])
        if not reports:
            return
        what = dict(val='Evaluation', test='Test').get(mode)
        if what is None:
            by_epoch = isinstance(runner.train_loop, EpochBasedTrainLoop)
            what = f'Epoch {runner.epoch + 1}' if by_epoch else 'Training'
        paths = sorted({report.path for report in reports})
        shown = ', '.join(paths[:10]) + (' ...' if len(paths) > 10 else '')
        # a bad image tried in place of another is not one more sample
        samples = sum(report.asked_for for report in reports)
        runner.logger.warning(
            f'{what}: skipped '
            f'{samples} sample(s) from {len(paths)} image(s) that '
            f'could not be used (each replaced by the next image): {shown}'
        )
