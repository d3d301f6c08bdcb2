import os
import os.path as osp
import re
import zipfile
from collections.abc import Iterator
from typing import Optional

from mmengine.hooks import Hook
from mmengine.registry import HOOKS

from ... import doc_pages
from ..checkpoint import CheckpointMismatchError
from .run_checks import RunCheckError, built_loaders, few, is_training


def is_intact(path: str) -> bool:
    """Whether a checkpoint file is complete, without unpickling it: a zip
    archive cut short by a kill or a full disk has no directory."""
    try:
        with zipfile.ZipFile(path) as archive:
            return any(n.endswith('data.pkl') for n in archive.namelist())
    except (OSError, zipfile.BadZipFile):
        return False


def newest_intact_checkpoint(work_dir: str) -> Optional[str]:
    """The checkpoint ``--resume`` (auto) continues from: the one named in
    ``last_checkpoint`` if intact, else the newest intact ``epoch_N.pth`` /
    ``iter_N.pth`` of the work dir, or None."""
    record = osp.join(work_dir, 'last_checkpoint')
    if osp.isfile(record):
        with open(record) as f:
            named = f.read().strip()
        if named and is_intact(named):
            return named
    if not osp.isdir(work_dir):
        return None
    found = []
    for name in os.listdir(work_dir):
        match = re.fullmatch(r'(epoch|iter)_(\d+)\.pth', name)
        if match:
            found.append((int(match.group(2)), osp.join(work_dir, name)))
    found.sort(reverse=True)
    return next((path for _, path in found if is_intact(path)), None)


def init_checkpoints(node: object) -> Iterator[str]:
    """``checkpoint`` entries of every ``init_cfg`` of a model config."""
    if isinstance(node, dict):
        init_cfgs = node.get('init_cfg')
        for init_cfg in (
            init_cfgs if isinstance(init_cfgs, list) else [init_cfgs]
        ):
            if isinstance(init_cfg, dict) and isinstance(
                init_cfg.get('checkpoint'), str
            ):
                yield init_cfg['checkpoint']
        for key, value in node.items():
            if key != 'init_cfg':
                yield from init_checkpoints(value)
    elif isinstance(node, (list, tuple)):
        for value in node:
            yield from init_checkpoints(value)


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


@HOOKS.register_module()
class CheckpointCheckHook(Hook):
    """Check the checkpoints a run reads, when it reads them.

    Before the run, ``load_from`` and the ``init_cfg`` checkpoints must
    exist, and ``resume=True`` without a file continues from the newest
    intact checkpoint (mmengine trusts ``last_checkpoint``, even one naming
    a file cut short). As it loads, a resumed checkpoint must be a training
    checkpoint of these classes, a tested one have the dataset's classes;
    fine-tuning on other classes gets one warning line.
    """

    priority = 'VERY_HIGH'

    def before_run(self, runner) -> None:
        """Check the files before they are read; choose what to resume."""
        if is_training(runner) and runner._resume and not runner._load_from:
            # Runner.load_or_resume reads _load_from after before_run.
            runner._load_from = newest_intact_checkpoint(runner.work_dir)
            if runner._load_from is None:
                runner.logger.info(
                    f'No checkpoint in {runner.work_dir} to resume; '
                    'starting from scratch.'
                )
        paths = [runner._load_from] if runner._load_from else []
        if is_training(runner) and not runner._resume:
            paths += list(init_checkpoints(runner.cfg.get('model')))
        for path in paths:
            if '://' not in path and not osp.isfile(osp.expanduser(path)):
                raise RunCheckError(
                    f'Checkpoint not found: expected {path} (see '
                    f'{doc_pages.TRAINING}).'
                )

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        """Check a checkpoint just read, before its weights are loaded."""
        path = runner._load_from
        key = 'train_dataloader' if is_training(runner) else 'test_dataloader'
        dataset = getattr(built_loaders(runner).get(key), 'dataset', None)
        classes = getattr(dataset, 'metainfo', {}).get('classes')
        mismatch = class_mismatch(checkpoint, classes, path)
        # Shapes, missing weights and non-finite values are the model's own
        # load hooks' to refuse (every loader passes through them); this
        # hook adds what only the run knows: the dataset's classes.
        if not is_training(runner):
            if mismatch:
                raise CheckpointMismatchError(
                    f'{mismatch}; the labels would not match (check the '
                    'dataset folders or the checkpoint).'
                )
        elif runner._resume:
            meta = checkpoint.get('meta')
            if (
                not isinstance(meta, dict)
                or 'epoch' not in meta
                or 'optimizer' not in checkpoint
            ):
                raise CheckpointMismatchError(
                    f'{path} holds weights only (no epoch, optimizer or '
                    'scheduler state), so training cannot resume from it; '
                    'start a new run from its weights with --cfg-options '
                    f'load_from={path} instead of --resume.'
                )
            if mismatch:
                raise CheckpointMismatchError(
                    f'{mismatch}; resume only with the dataset the run '
                    'started with.'
                )
        elif mismatch:
            runner.logger.warning(
                f'load_from: {mismatch}; its head is loaded as it is (to '
                'start a new head, load the backbone only, see '
                f'{doc_pages.WEIGHTS}).'
            )
