"""Checks of a run before its first step, and the guards it runs with.

mmengine finds many user mistakes only deep inside training (a misspelt
optimizer key at the first step, ``val_interval=0`` at the end of the first
epoch, another model's checkpoint at the first optimizer step), and some
never (a misspelt top-level key is ignored; a dataset whose class folders
differ from the checkpoint's classes scores 0 % with exit 0). The tools call
these functions so that each such mistake is one line before the run
starts.
"""

import difflib
import math
import os
import os.path as osp
import re
from collections.abc import Iterable, Sequence
from typing import Callable, Optional

import numpy as np
from mmengine.config import Config
from mmengine.runner import Runner
from mmengine.runner.checkpoint import _load_checkpoint

from ..engine import CheckpointMismatchError, checkpoint_read_error

# Hooks every training run gets, unless its config already has them.
SAFETY_HOOKS = (
    'NonFiniteGuardHook',
    'RandomStateHook',
    'BadImageHook',
    'RankHeartbeatHook',
)

# Top-level keys the Runner and the tools read besides the config's own.
_RUNNER_KEYS = (
    'model',
    'work_dir',
    'train_dataloader',
    'val_dataloader',
    'test_dataloader',
    'train_cfg',
    'val_cfg',
    'test_cfg',
    'auto_scale_lr',
    'optim_wrapper',
    'param_scheduler',
    'val_evaluator',
    'test_evaluator',
    'default_hooks',
    'custom_hooks',
    'data_preprocessor',
    'load_from',
    'resume',
    'launcher',
    'env_cfg',
    'log_processor',
    'log_level',
    'visualizer',
    'default_scope',
    'randomness',
    'experiment_name',
    'cfg',
    'custom_imports',
    'model_wrapper_cfg',
    'compile',
    'gpu_ids',
    'runner_type',
    'vis_backends',
    'find_unused_parameters',
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


def _hook_types(hooks: Iterable) -> list[str]:
    return [
        str(hook.get('type', '')).split('.')[-1]
        for hook in hooks
        if isinstance(hook, dict)
    ]


def add_training_guards(cfg: Config) -> None:
    """Give a training config the non-finite guard, the random-state, the
    bad-image and the rank-heartbeat hooks (``custom_hooks``) unless it
    registers them, and wrap an mmpretrain training set in
    ``SkipBadImages``.

    Args:
        cfg (Config): The run's config, changed in place.
    """
    present = _hook_types((cfg.get('default_hooks') or {}).values())
    present += _hook_types(cfg.get('custom_hooks') or [])
    missing = [name for name in SAFETY_HOOKS if name not in present]
    if missing:
        cfg.custom_hooks = list(cfg.get('custom_hooks') or []) + [
            dict(type=name) for name in missing
        ]
    loader = cfg.get('train_dataloader')
    dataset = loader.get('dataset') if isinstance(loader, dict) else None
    # mmdet / mmseg datasets are built from their own registries, which
    # the wrapper (an mmpretrain dataset) does not search.
    if (
        isinstance(dataset, dict)
        and cfg.get('default_scope', 'mmpretrain') == 'mmpretrain'
        and str(dataset.get('type', '')).split('.')[-1] != 'SkipBadImages'
    ):
        wrapper = dict(type='SkipBadImages', dataset=dataset)
        # --cfg-options train_dataloader.dataset.max_bad_images=N
        if 'max_bad_images' in dataset:
            wrapper['max_bad_images'] = dataset.pop('max_bad_images')
        loader['dataset'] = wrapper


def misspelt_option_key(cfg: Config, options: Optional[dict]) -> Optional[str]:
    """One line for a ``--cfg-options`` key whose top level is unknown.

    mmengine adds such a key silently (``train_dataloder.batch_size=8``
    changes nothing the run reads). A key is accepted when the config or
    the Runner knows its first part.

    Args:
        cfg (Config): The config before the options are merged.
        options (dict, optional): The parsed ``--cfg-options``.

    Returns:
        str | None: The message, or None when every key is known.
    """
    known = set(cfg.keys()) | set(_RUNNER_KEYS)
    for key in options or {}:
        top = key.split('.')[0]
        if top in known:
            continue
        close = difflib.get_close_matches(top, sorted(known), n=1)
        hint = (
            f'; did you mean {close[0]!r}?'
            if close
            else ('; add it to the config first if it is meant to be new.')
        )
        return f'--cfg-options {key}: the config has no key {top!r}{hint}'
    return None


def newest_intact_checkpoint(work_dir: str) -> Optional[str]:
    """The checkpoint ``--resume`` should continue from.

    ``last_checkpoint`` when it names a readable file; otherwise (empty,
    stale or missing file) the newest ``epoch_N.pth`` / ``iter_N.pth`` of
    the work dir that reads completely.

    Args:
        work_dir (str): The run's work dir.

    Returns:
        str | None: The path, or None when there is nothing to resume.
    """
    record = osp.join(work_dir, 'last_checkpoint')
    if osp.isfile(record):
        with open(record) as f:
            named = f.read().strip()
        if (
            named
            and osp.isfile(named)
            and checkpoint_read_error(named) is None
        ):
            return named
    if not osp.isdir(work_dir):
        return None
    found = []
    for name in os.listdir(work_dir):
        match = re.fullmatch(r'(epoch|iter)_(\d+)\.pth', name)
        if match:
            found.append((int(match.group(2)), osp.join(work_dir, name)))
    for _, path in sorted(found, reverse=True):
        if checkpoint_read_error(path) is None:
            return path
    return None


def _custom_dataset_empty_classes(dataset) -> list[str]:
    """Classes without a sample in a folder-style mmpretrain CustomDataset
    (one class per sub-folder: an empty folder still takes a label)."""
    from mmpretrain.datasets import CustomDataset

    if not isinstance(dataset, CustomDataset) or dataset.ann_file:
        return []
    classes = dataset.metainfo.get('classes') or ()
    if not classes:
        return []
    counts = np.bincount(
        np.asarray(dataset.get_gt_labels(), dtype=np.int64),
        minlength=len(classes),
    )
    return [name for name, count in zip(classes, counts) if count == 0]


def _unwrap(dataset):
    while hasattr(dataset, 'dataset') and not hasattr(
        dataset, 'load_data_list'
    ):
        dataset = dataset.dataset
    return dataset


def _classes(dataset) -> Optional[list]:
    classes = getattr(dataset, 'metainfo', {}).get('classes')
    return list(classes) if classes is not None else None


def _pipeline_sizes(pipeline: Sequence) -> Optional[list]:
    """The fixed ``(h, w)`` sizes a pipeline gives every sample, or None
    when the size depends on the image."""
    size = None
    for transform in pipeline or ():
        if not isinstance(transform, dict):
            return None
        kind = str(transform.get('type', '')).split('.')[-1]
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


def _pipeline_channels(pipeline: Sequence) -> Optional[int]:
    """Channels the pipeline's image loader gives, when it says."""
    for transform in pipeline or ():
        if (
            isinstance(transform, dict)
            and str(transform.get('type', '')).split('.')[-1]
            == 'LoadImageFromFile'
        ):
            color = transform.get('color_type', 'color')
            return {'color': 3, 'grayscale': 1}.get(color)
    return None


def _backbone(runner: Runner):
    model = getattr(runner.model, 'module', runner.model)
    return getattr(model, 'backbone', None)


def check_pipelines(runner: Runner, loaders: Sequence[str]) -> Optional[str]:
    """One line when a pipeline's fixed image size cannot be tiled by the
    T2T-ViT soft splits, or its images have other channels than the
    backbone takes.

    Args:
        runner (Runner): The built runner.
        loaders (Sequence[str]): Dataloader config keys to check.
    """
    backbone = _backbone(runner)
    t2t = getattr(backbone, 'tokens_to_token', None)
    if t2t is None:
        return None
    preprocessor = getattr(
        getattr(runner.model, 'module', runner.model),
        'data_preprocessor',
        None,
    )
    mean = getattr(preprocessor, 'mean', None)
    for key in loaders:
        dataset_cfg = (runner.cfg.get(key) or {}).get('dataset') or {}
        while 'pipeline' not in dataset_cfg and 'dataset' in dataset_cfg:
            dataset_cfg = dataset_cfg['dataset']
        pipeline = dataset_cfg.get('pipeline')
        size = _pipeline_sizes(pipeline)
        if size is not None:
            try:
                t2t.output_sizes(size)
            except ValueError as error:
                return f'{key}.dataset.pipeline: {error}'
        channels = _pipeline_channels(pipeline)
        if channels is not None and channels != t2t.in_channels:
            return (
                f'{key}.dataset.pipeline loads {channels}-channel '
                f'images, but the backbone takes in_channels='
                f'{t2t.in_channels}; set model.backbone.in_channels or '
                "LoadImageFromFile's color_type to match."
            )
    if mean is not None and mean.numel() not in (1, t2t.in_channels):
        return (
            f'data_preprocessor normalises {mean.numel()} channels, but '
            f'the backbone takes in_channels={t2t.in_channels}; give '
            'mean and std one value per channel.'
        )
    return None


def check_dataset_classes(
    runner: Runner, loaders: Sequence[str]
) -> Optional[str]:
    """One line when a folder dataset has empty class folders (which shift
    every label after them) or the loaders disagree on the classes."""
    first = None
    for key in loaders:
        dataset = _unwrap(getattr(runner, key).dataset)
        empty = _custom_dataset_empty_classes(dataset)
        if empty:
            root = osp.join(
                dataset.data_root or '',
                dataset.data_prefix.get('img_path', ''),
            )
            return (
                f'{key}: class folder(s) {", ".join(empty)} in {root} '
                'hold no images but still take a label index, shifting '
                'every label after them; remove the empty folders or '
                'add their images.'
            )
        classes = _classes(dataset)
        if classes is None:
            continue
        if first is None:
            first = (key, classes)
        elif classes != first[1]:
            return (
                f'{key} has the classes {classes}, but {first[0]} has '
                f'{first[1]}; both must list the same classes in the '
                'same order.'
            )
    return None


def check_training_config(cfg: Config) -> Optional[str]:
    """One line for training options mmengine would fail on late."""
    train_cfg = cfg.get('train_cfg') or {}
    interval = train_cfg.get('val_interval', 1)
    if cfg.get('val_cfg') is not None and (
        not isinstance(interval, int) or interval < 1
    ):
        return (
            f'train_cfg.val_interval must be a whole number >= 1, got '
            f'{interval!r}; use --no-validate to skip evaluation.'
        )
    max_epochs = train_cfg.get('max_epochs', 1)
    if not isinstance(max_epochs, int) or max_epochs < 1:
        return (
            f'train_cfg.max_epochs must be a whole number >= 1, got '
            f'{max_epochs!r}.'
        )
    return None


def build_optimizer_now(runner: Runner) -> Optional[str]:
    """Build the optimizer before training; one line if the config's
    optimizer settings are wrong (unknown key, negative learning rate).

    The Runner builds it at the start of ``train()`` anyway and keeps an
    already built wrapper.
    """
    try:
        runner.optim_wrapper = runner.build_optim_wrapper(runner.optim_wrapper)
    except (TypeError, ValueError, KeyError) as error:
        message = ' '.join(str(error).split())
        return (
            f'optim_wrapper: {type(error).__name__}: {message}; check '
            'the optimizer settings of the config and --cfg-options.'
        )
    for group in getattr(runner.optim_wrapper, 'param_groups', []):
        lr = group.get('lr')
        if isinstance(lr, (int, float)) and (lr < 0 or not math.isfinite(lr)):
            return (
                f'optim_wrapper: the learning rate is {lr}; it must be '
                'a finite number >= 0.'
            )
    return None


def _state_dict_of(checkpoint: dict) -> dict:
    state = checkpoint.get('state_dict', checkpoint)
    return (
        {
            (key[7:] if key.startswith('module.') else key): value
            for key, value in state.items()
        }
        if isinstance(state, dict)
        else {}
    )


def _shape_mismatches(model, state_dict: dict) -> list[str]:
    own = model.state_dict()
    problems = [
        f'{key}: checkpoint {tuple(value.shape)}, model '
        f'{tuple(own[key].shape)}'
        for key, value in state_dict.items()
        if key in own
        and hasattr(value, 'shape')
        and tuple(value.shape) != tuple(own[key].shape)
    ]
    missing = [key for key in own if key not in state_dict]
    if missing:
        problems.append(f'{len(missing)} weight(s) missing, e.g. {missing[0]}')
    return problems


def class_mismatch(
    checkpoint: dict, classes: Optional[list], path: str
) -> Optional[str]:
    """One line when a checkpoint's classes differ from a dataset's.

    Args:
        checkpoint (dict): The loaded checkpoint.
        classes (list, optional): The dataset's class names.
        path (str): The checkpoint file, for the message.

    Returns:
        str | None: The message, or None when they agree or either side
        does not say.
    """
    meta = checkpoint.get('meta') or {}
    saved = (meta.get('dataset_meta') or {}).get('classes')
    if saved is None or classes is None or list(saved) == list(classes):
        return None
    return (
        f'{path} was trained on {len(saved)} classes {list(saved)}, '
        f'but the dataset has {len(classes)} classes {list(classes)}; '
        'the labels would not match (check the dataset folders or the '
        'checkpoint).'
    )


def guard_checkpoint_loading(runner: Runner, loader: str) -> None:
    """Turn checkpoint problems at load time into CheckpointMismatchError.

    Wraps ``runner.load_checkpoint`` (used for ``load_from``, by
    ``test.py`` and by resume) and ``runner.resume``:

    * a ``ValueError`` / ``RuntimeError`` of the model's loading (another
      arch's position table, a strict load's missing keys) carries the
      checkpoint path;
    * the checkpoint's ``meta.dataset_meta.classes`` must equal those of
      the dataset of ``loader`` when resuming or testing (a ``load_from``
      for fine-tuning may have other classes: a warning says so);
    * ``--resume`` needs a training checkpoint (epoch, optimizer) whose
      weights have the model's shapes.

    Args:
        runner (Runner): The built runner.
        loader (str): ``'train_dataloader'`` or ``'test_dataloader'``.
    """
    load: Callable = runner.load_checkpoint
    resume: Callable = runner.resume
    strict_classes = loader == 'test_dataloader'

    def classes() -> Optional[list]:
        return _classes(_unwrap(getattr(runner, loader).dataset))

    def load_checked(filename: str, *args, **kwargs) -> dict:
        try:
            checkpoint = load(filename, *args, **kwargs)
        except CheckpointMismatchError:
            raise
        except (ValueError, RuntimeError, KeyError) as error:
            message = ' '.join(str(error).split())
            raise CheckpointMismatchError(
                f'{filename} does not fit the model: {message}'
            ) from error
        problem = class_mismatch(checkpoint, classes(), filename)
        if problem and strict_classes:
            raise CheckpointMismatchError(problem)
        if problem and not runner._resume:
            # load_from: fine-tuning on other classes is a normal use
            runner.logger.warning(f'load_from: {problem}')
        return checkpoint

    def resume_checked(filename: str, *args, **kwargs) -> None:
        checkpoint = _load_checkpoint(filename, map_location='cpu')
        meta = checkpoint.get('meta') if isinstance(checkpoint, dict) else {}
        if (
            not isinstance(meta, dict)
            or 'epoch' not in meta
            or 'optimizer' not in checkpoint
        ):
            raise CheckpointMismatchError(
                f'{filename} holds weights only (no epoch, optimizer or '
                'scheduler state), so training cannot resume from it; '
                f'start a new run from its weights with --cfg-options '
                f'load_from={filename} instead of --resume.'
            )
        model = getattr(runner.model, 'module', runner.model)
        problems = _shape_mismatches(model, _state_dict_of(checkpoint))
        if problems:
            raise CheckpointMismatchError(
                f'{filename} is the training checkpoint of another model '
                f'({"; ".join(problems[:3])}); resume only from a checkpoint '
                'of this config.'
            )
        problem = class_mismatch(checkpoint, classes(), filename)
        if problem:
            raise CheckpointMismatchError(problem)
        return resume(filename, *args, **kwargs)

    runner.load_checkpoint = load_checked
    runner.resume = resume_checked


def check_training_runner(runner: Runner) -> Optional[str]:
    """All checks of a built training runner; one line or None.

    Builds the optimizer, checks the datasets' classes and pipelines, and
    guards checkpoint loading (``load_from`` and resume).
    """
    loaders = ['train_dataloader'] + (
        ['val_dataloader']
        if runner.cfg.get('val_cfg') is not None
        and runner.cfg.get('val_dataloader') is not None
        else []
    )
    error = (
        build_optimizer_now(runner)
        or check_dataset_classes(runner, loaders)
        or check_pipelines(runner, loaders)
    )
    if error is None:
        guard_checkpoint_loading(runner, 'train_dataloader')
    return error


def check_test_runner(runner: Runner) -> Optional[str]:
    """All checks of a built test runner; one line or None."""
    loaders = ['test_dataloader']
    error = check_dataset_classes(runner, loaders) or check_pipelines(
        runner, loaders
    )
    if error is None:
        guard_checkpoint_loading(runner, 'test_dataloader')
    return error
