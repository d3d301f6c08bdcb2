import errno
import fcntl
import json
import os
import os.path as osp
import socket
from collections.abc import Iterator, Sequence
from typing import Any, Optional

from mmengine.dist import is_main_process
from mmengine.hooks import Hook
from mmengine.registry import HOOKS
from mmengine.runner import EpochBasedTrainLoop

from t2t_preflight import doc_pages
from t2t_preflight.config import dataset_configs, entry
from t2t_preflight.errors import CheckpointError, RunCheckError
from t2t_preflight.inputs import (
    checkpoint_problem,
    class_count_message,
    few,
    folder_dataset,
    head_classes,
    init_checkpoints,
)
from t2t_preflight.outputs import output_problem

from ...datasets.dataset_checks import (
    label_range_problem,
    linked_folders_problem,
)
from ..checkpoint import remove_stale_temp_files
from ..checkpoint_fit import (
    RUN_ADVICE,
    whole_model_error,
)
from ..sample_seeded_runner import checkpoint_folders
from ..skip_bad_images import base_datasets
from .run_checks import (
    bare_model,
    built_loaders,
    is_training,
    resumed_name,
    run_mode,
    start_of,
    t2t_module,
    width_problem,
)

LOCK_FILE = 'train.lock'

# The work-dir locks this process holds (path -> open file); the system
# gives a lock back when its process ends, and a run that failed in a
# process that goes on (a notebook, a tool called in-process) gives it
# back with release_locks().
_HELD: dict[str, Any] = {}


def release_locks(work_dir: Optional[str] = None) -> None:
    """Give back the lock of ``work_dir``, or of every run of this
    process if it is None."""
    paths = list(_HELD) if work_dir is None else [lock_path(work_dir)]
    for path in paths:
        lock = _HELD.pop(path, None)
        if lock is not None:
            lock.close()


def lock_path(work_dir: str) -> str:
    """The file a training into ``work_dir`` holds locked."""
    return osp.join(work_dir, LOCK_FILE)


def lock_work_dir(work_dir: str) -> None:
    """Hold ``<work_dir>/train.lock`` for this process, with its process
    id and host in it for the message of a run refused.

    A POSIX record lock (``fcntl.lockf``), which the system gives back
    when the process ends, however it ends: unlike ``flock``'s, it is
    not shared with the data-loader workers the process forks, which
    would hold it past the end of their run (or its kill)."""
    path = lock_path(work_dir)
    if path in _HELD:
        return
    lock = open(path, 'a+')  # noqa: SIM115  held until the run ends
    try:
        fcntl.lockf(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        if error.errno not in (errno.EACCES, errno.EAGAIN):
            lock.close()
            raise
        lock.seek(0)
        try:
            holder = json.load(lock)
        except ValueError:  # the holder has not written it yet
            holder = {}
        lock.close()
        raise RunCheckError(
            f'{work_dir} is in use by another training (process '
            f'{holder.get("pid")} on {holder.get("host")}, see {path}); '
            'choose another --work-dir, or wait until it has ended.'
        ) from None
    lock.truncate(0)
    json.dump(dict(pid=os.getpid(), host=socket.gethostname()), lock)
    lock.flush()
    _HELD[path] = lock


def class_mismatch(checkpoint: dict, classes, path: str) -> Optional[str]:
    """One line when a checkpoint's classes differ from a dataset's, or
    None when they agree or either side does not say."""
    meta = checkpoint.get('meta') or {}
    saved = (meta.get('dataset_meta') or {}).get('classes')
    if saved is None or classes is None or list(saved) == list(classes):
        return None
    return (
        f'{path} was trained on {len(saved)} classes ({few(saved)}), but '
        f'the dataset has {len(classes)} classes ({few(classes)})'
    )


def group_sizes(param_groups: Any) -> list[int]:
    """How many parameters each optimizer group holds ([] if unknown)."""
    if not isinstance(param_groups, list):
        return []
    return [
        len(group['params'])
        for group in param_groups
        if isinstance(group, dict) and isinstance(group.get('params'), list)
    ]


def optimizer_mismatch(path: str, saved: Any, now: Any) -> Optional[str]:
    """One line if the optimizer state of checkpoint ``path`` (its
    ``param_groups``) was saved for other parameters than the run's
    optimizer holds (``now``), else None."""
    saved_groups = (
        saved.get('param_groups') if isinstance(saved, dict) else None
    )
    before, after = group_sizes(saved_groups), group_sizes(now)
    if not before or not after or before == after:
        return None
    return (
        f'The checkpoint {path} holds the optimizer state of '
        f'{sum(before)} parameters in {len(before)} groups, this run '
        f'optimises {sum(after)} in {len(after)}: the trainable parts of '
        'the model differ (e.g. a training-only loss switched on or off). '
        'Resume with the config it was trained with, or start a new '
        f'training from its weights with load_from={path} instead of '
        '--resume.'
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
    """Check a run before its first step: its data, model, loop settings,
    the checkpoint it starts from and what it writes.

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

    The checkpoint the run starts from and the ``init_cfg`` checkpoints
    must exist (``start_point`` chooses what a resume without a file
    continues from; under mmengine's Runner, a checkpoint
    ``last_checkpoint`` names that is cut short or lies outside the work
    dir is refused). As it loads, a resumed checkpoint must be a training
    checkpoint of these classes and of the run's optimizer groups, a
    tested one have the dataset's classes; fine-tuning on other classes
    gets one warning line.

    The ``--out`` and ``--show-dir`` paths must be writable, and a
    training holds ``<work_dir>/train.lock`` (``fcntl.lockf``: the system
    gives it back when the process ends), which refuses a second training
    into the work dir; once it holds the lock, it removes the temporary
    files a hard kill left beside checkpoints (in the work dir, and in the
    checkpoint hook's ``out_dir``).
    """

    priority = 'VERY_HIGH'
    # t2t_preflight's class-folder check is made before the Runner for a
    # run that has this hook
    checks_class_folders = True

    def before_run(self, runner) -> None:
        """Check the model's widths, the datasets of the loops the run has
        built, the checkpoints and the outputs; lock the work dir of a
        training."""
        problem = width_problem(bare_model(runner))
        if problem:
            raise RunCheckError(problem)
        self._check_datasets(runner)
        start = start_of(runner)
        if start.problem:
            raise RunCheckError(start.problem)
        paths = [start.load_from] if start.load_from else []
        if is_training(runner) and not start.resumes:
            paths += list(init_checkpoints(runner.cfg.get('model')))
        problem = paths and checkpoint_problem(runner.cfg, paths=paths)
        if problem:
            raise RunCheckError(problem)
        inputs = {'the checkpoint': start.load_from}
        inputs['the config'] = runner.cfg.filename
        for what, path in self._outputs(runner):
            problem = output_problem(
                path, what, file=what == '--out', inputs=inputs
            )
            if problem:
                raise RunCheckError(problem)
        if is_training(runner) and is_main_process():
            lock_work_dir(runner.work_dir)
            folders = checkpoint_folders(
                runner.work_dir, runner.cfg.get('default_hooks')
            )
            for folder in folders:
                removed = remove_stale_temp_files(folder)
                if removed:
                    runner.logger.info(
                        f'Removed {len(removed)} temporary checkpoint '
                        f'file(s) left in {folder} by an interrupted save.'
                    )

    def after_run(self, runner) -> None:
        """Give back the work-dir lock."""
        release_locks(runner.work_dir)

    def _check_datasets(self, runner) -> None:
        head = getattr(bare_model(runner), 'head', None)
        num_classes = getattr(head, 'num_classes', None)
        _, variable = head_classes(runner.cfg)
        t2t = t2t_module(runner)
        loaders = built_loaders(runner)
        first = None
        for key, loader in loaders.items():
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

    @staticmethod
    def _outputs(runner) -> Iterator[tuple[str, str]]:
        # test() builds its loop before the hooks run; the property would
        # build (and read) the test set of a training
        loop = runner.test_loop if run_mode(runner) == 'test' else None
        for metric in getattr(getattr(loop, 'evaluator', None), 'metrics', []):
            if getattr(metric, 'out_file_path', None):
                yield '--out', metric.out_file_path
        for hook in runner.hooks:
            if getattr(hook, 'enable', False) or getattr(hook, 'draw', False):
                # mmpretrain's out_dir is taken from the current folder;
                # mmdet's relative test_out_dir lies in the run's log dir
                folder = getattr(hook, 'out_dir', None)
                if not isinstance(folder, str):
                    folder = getattr(hook, 'test_out_dir', None)
                    folder = folder if osp.isabs(str(folder)) else None
                if folder:
                    yield '--show-dir', folder

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        """Check a checkpoint just read, before its weights are loaded."""
        start = start_of(runner)
        path, resumes = start.load_from, start.resumes
        training = is_training(runner)
        key = 'train_dataloader' if training else 'test_dataloader'
        dataset = getattr(built_loaders(runner).get(key), 'dataset', None)
        classes = getattr(dataset, 'metainfo', {}).get('classes')
        mismatch = class_mismatch(checkpoint, classes, path)
        model = bare_model(runner)
        weights = checkpoint.get('state_dict', checkpoint)
        # Shapes, missing weights and non-finite values are the model's own
        # load hooks' to refuse (every loader passes through them); this
        # hook adds what only the run knows: whether it needs the
        # checkpoint's classifier, and the dataset's classes.
        if not training or resumes:
            # a test or a resume needs the classifier as it was trained
            # (a fine-tune's load_from leaves it out, with a warning); and
            # the model's load hooks see their own parts only: what lies
            # outside them would be left out without a word of ours
            advice = (
                'resume with the config the run started with'
                if resumes
                else RUN_ADVICE
            )
            error = whole_model_error(model, weights, advice)
            if error:
                raise error
        if not training:
            if mismatch:
                raise CheckpointError(
                    f'{mismatch}; the labels would not match (check the '
                    'dataset folders or the checkpoint).'
                )
        elif resumes:
            meta = checkpoint.get('meta')
            if (
                not isinstance(meta, dict)
                or 'epoch' not in meta
                or 'optimizer' not in checkpoint
            ):
                raise CheckpointError(
                    f'{path} holds weights only (no epoch, optimizer or '
                    'scheduler state), so training cannot resume from it; '
                    'start a new run from its weights with --cfg-options '
                    f'load_from={path} instead of --resume.'
                )
            if mismatch:
                raise CheckpointError(
                    f'{mismatch}; resume only with the dataset the run '
                    'started with.'
                )
            problem = optimizer_mismatch(
                path,
                checkpoint.get('optimizer'),
                getattr(runner.optim_wrapper, 'param_groups', None),
            )
            if problem:
                raise RunCheckError(problem)
        elif mismatch and not getattr(
            whole_model_error(model, weights), 'classes', 0
        ):
            # a classifier of the same number of classes is loaded as it
            # is: other names (or their order) may be a mistake; another
            # number is a fine-tune, which the head's load hook reports
            runner.logger.warning(
                f'load_from: {mismatch}; its head is loaded as it is (to '
                'start a new head, load the backbone only, see '
                f'{doc_pages.WEIGHTS}).'
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
