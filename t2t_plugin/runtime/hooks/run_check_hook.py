from collections.abc import Iterator, Sequence
from typing import Optional

from mmengine.hooks import Hook
from mmengine.registry import HOOKS
from mmengine.runner import EpochBasedTrainLoop

from t2t_preflight.config import dataset_configs, entry
from t2t_preflight.inputs import (
    class_count_message,
    few,
    folder_dataset,
    head_classes,
)

from ...datasets.dataset_checks import (
    label_range_problem,
    linked_folders_problem,
)
from ..skip_bad_images import base_datasets
from .run_checks import (
    RunCheckError,
    bare_model,
    built_loaders,
    resumed_name,
    start_of,
    t2t_module,
    width_problem,
)

# Pipeline transforms that give every sample one fixed size, and the
# argument that holds it.
_FIXED_SIZE_TRANSFORMS = {
    'RandomResizedCrop': 'scale',
    'CenterCrop': 'crop_size',
    'RandomCrop': 'crop_size',
    'EfficientNetRandomCrop': 'scale',
    'EfficientNetCenterCrop': 'crop_size',
    'Resize': 'scale',
}
# Transforms after which the size depends on the image.
_FREE_SIZE_TRANSFORMS = ('ResizeEdge', 'RandomResize', 'RandomChoiceResize')


def _kind(transform: dict) -> str:
    return str(transform.get('type', '')).split('.')[-1]


def pipeline_size(pipeline: Sequence) -> Optional[tuple[int, int]]:
    """The fixed ``(h, w)`` a pipeline gives every sample, or None when the
    size depends on the image."""
    size = None
    for transform in pipeline or ():
        if not isinstance(transform, dict):
            return None
        kind = _kind(transform)
        if kind in _FREE_SIZE_TRANSFORMS:
            size = None
        elif kind in _FIXED_SIZE_TRANSFORMS:
            value = transform.get(_FIXED_SIZE_TRANSFORMS[kind])
            if kind == 'Resize' and (
                transform.get('keep_ratio') or value is None
            ):
                size = None
            elif isinstance(value, int):
                size = (value, value)
            elif isinstance(value, (tuple, list)) and len(value) == 2:
                # mmpretrain's RandomCrop takes (h, w), the others (w, h)
                size = (
                    tuple(value)
                    if kind == 'RandomCrop'
                    else (value[1], value[0])
                )
    return size


def pipeline_problem(pipeline: Sequence, t2t) -> Optional[str]:
    """Why the T2T module cannot take what a pipeline gives, or None."""
    size = pipeline_size(pipeline)
    if size is not None:
        try:
            t2t.output_sizes(size)
        except ValueError as error:
            return str(error)
    channels = None  # as the last transform that sets them gives them
    for transform in pipeline or ():
        kind = _kind(transform) if isinstance(transform, dict) else None
        if kind == 'LoadImageFromFile':
            color = transform.get('color_type', 'color')
            channels = {'color': 3, 'grayscale': 1}.get(color)
        elif kind == 'ConvertImage':
            channels = transform.get('channels', 3)
    if channels is not None and channels != t2t.in_channels:
        return (
            f'loads {channels}-channel images, but the backbone takes '
            f'in_channels={t2t.in_channels}; set model.backbone.in_channels '
            "or LoadImageFromFile's color_type to match."
        )
    return None


def _pipelines(cfg, key: str) -> Iterator[tuple[str, Sequence]]:
    """``(dotted key, pipeline)`` of the pipelines that give the samples of
    the loader ``key``: on each path through its wrappers, the outermost
    one (a wrapper's own pipeline, a mix of samples loaded by the one it
    wraps, is what the model gets)."""
    found: list[str] = []
    dataset = entry(cfg, key, 'dataset')
    for dotted, item in dataset_configs(f'{key}.dataset', dataset):
        inside = any(dotted.startswith(f'{outer}.') for outer in found)
        if 'pipeline' in item and not inside:
            found.append(dotted)
            yield f'{dotted}.pipeline', item['pipeline']


def _where(dataset) -> str:
    """The folder a dataset reads its images from: mmengine has joined
    ``data_root`` to a relative ``data_prefix`` already."""
    prefix = getattr(dataset, 'data_prefix', {}) or {}
    return prefix.get('img_path') or getattr(dataset, 'data_root', '') or ''


@HOOKS.register_module()
class RunCheckHook(Hook):
    """Check a run's data, model and loop settings before its first step.

    mmengine finds such mistakes late or never: class folders that do not
    match the head's classes, labels outside them, train and val sets of
    other classes, a crop size the soft splits cannot tile,
    ``val_interval=0`` (a division by zero after a whole epoch), a head or
    neck whose stated ``in_channels`` are not the backbone's widths
    (mmengine's first forward would fail deep in a traceback). Each is
    refused here in one :class:`RunCheckError` line. A dataset whose
    labels fit the head but whose class list is of another length (an
    annotation file on a subset of ImageNet's classes) is named in one
    warning line, and the run goes on.
    """

    priority = 'VERY_HIGH'
    checks_class_folders = True  # our tools ask before the Runner too

    def before_run(self, runner) -> None:
        """Check the model's widths and the datasets of the loops the run
        has built."""
        problem = width_problem(bare_model(runner))
        if problem:
            raise RunCheckError(problem)
        head = getattr(bare_model(runner), 'head', None)
        num_classes = getattr(head, 'num_classes', None)
        _, variable = head_classes(runner.cfg)
        t2t = t2t_module(runner)
        first = None
        for key, loader in built_loaders(runner).items():
            for dataset in base_datasets(loader.dataset):
                warning = self._check_dataset(
                    key, dataset, num_classes, variable
                )
                if warning:
                    runner.logger.warning(warning)
            classes = getattr(loader.dataset, 'metainfo', {}).get('classes')
            # labels that are folder indices on both sides mean other
            # classes; an annotation file's labels may still agree
            folders = all(map(folder_dataset, base_datasets(loader.dataset)))
            if classes is not None:
                if first is None:
                    first = (key, list(classes), folders)
                elif list(classes) != first[1]:
                    problem = (
                        f'{key} has {len(classes)} classes ({few(classes)}), '
                        f'but {first[0]} has {len(first[1])} '
                        f'({few(first[1])}); both must list the same '
                        'classes in the same order.'
                    )
                    if folders and first[2]:
                        raise RunCheckError(problem)
                    runner.logger.warning(problem)
            pipelines = _pipelines(runner.cfg, key) if t2t else ()
            for dotted, pipeline in pipelines:
                problem = pipeline_problem(pipeline, t2t)
                if problem:
                    raise RunCheckError(f'{dotted}: {problem}')
        loaders = built_loaders(runner)
        if 'train_dataloader' in loaders and 'val_dataloader' in loaders:
            for train in base_datasets(loaders['train_dataloader'].dataset):
                for val in base_datasets(loaders['val_dataloader'].dataset):
                    problem = linked_folders_problem(
                        train, val, 'val_dataloader'
                    )
                    if problem:
                        raise RunCheckError(problem)

    @staticmethod
    def _check_dataset(
        key: str, dataset, num_classes: Optional[int], variable: Optional[str]
    ) -> Optional[str]:
        """Check one dataset that reads samples, inside the wrappers of the
        loader ``key``: class folders against the head, other labels
        within it; the warning line for a class list of another length
        whose labels fit, or None."""
        classes = getattr(dataset, 'metainfo', {}).get('classes')
        if not isinstance(num_classes, int):
            return None
        # mmpretrain's ClassNumCheckHook makes this check with an assert (a
        # traceback) on every module that has a num_classes attribute, and
        # names no key to set
        if folder_dataset(dataset):
            problem = class_count_message(
                key, list(classes), num_classes, _where(dataset), variable
            )
            if problem:
                raise RunCheckError(problem)
            return None
        problem = label_range_problem(dataset, num_classes)
        if problem:
            raise RunCheckError(f'{key}: {problem}')
        if classes is None or len(classes) == num_classes:
            return None
        return (
            f'{key}: the dataset lists {len(classes)} classes '
            f'({few(classes)}), model.head.num_classes={num_classes}; its '
            'labels fit the head, so the run goes on.'
        )

    def before_train(self, runner) -> None:
        """Check the loop settings mmengine would fail on late."""
        loop = runner.train_loop
        interval = getattr(loop, 'val_interval', 1)
        # before_train: the loops of the run are built (val_loop is None
        # without validation)
        if runner.val_loop is not None and (
            not isinstance(interval, int) or interval < 1
        ):
            raise RunCheckError(
                f'train_cfg.val_interval must be a whole number >= 1, got '
                f'{interval!r}; use --no-validate to skip evaluation.'
            )
        by_epoch = isinstance(loop, EpochBasedTrainLoop)
        name = 'max_epochs' if by_epoch else 'max_iters'
        value = getattr(loop, name)
        if not isinstance(value, int) or value < 1:
            raise RunCheckError(
                f'train_cfg.{name} must be a whole number >= 1, got {value!r}.'
            )
        if start_of(runner).resumes and loop.iter >= loop.max_iters:
            done = (
                f'epoch {runner.epoch}'
                if by_epoch
                else f'iteration {runner.iter}'
            )
            raise RunCheckError(
                f'Nothing to resume: the {resumed_name(runner)} ends at '
                f'{done} and train_cfg.{name}={value}; raise it '
                '(--cfg-options) to train longer, or start a new run in '
                'another work dir.'
            )
