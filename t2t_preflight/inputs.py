"""What a run reads, judged from its config and the disk: the dataset
folders and files, the class folders against the head, the checkpoint
files. Each decision is one function here; the tools call them before
the models are imported, the runner and its hooks for every other door.
"""

import os
import os.path as osp
from collections.abc import Iterator, Sequence
from typing import Any, Optional

from mmengine.config import Config

from . import doc_pages
from .config import dataset_configs, entry, few, set_from

# 64x64 tokens, a 1024x1024 image at stride 16: attention memory grows with
# the square of the tokens, so a huge input is refused rather than left to
# exhaust the memory.
DEFAULT_MAX_TOKENS = 4096
# Datasets that read ``data_root/<split>`` when ``split`` is given.
_SPLIT_FOLDER_DATASETS = ('ImageNet', 'ImageNet21k')


def _dataset_paths(dataset: dict) -> Iterator[tuple[str, str]]:
    """``(local path, dataset type)`` a dataset config reads (not those it
    wraps)."""
    kind = str(dataset.get('type', ''))
    root = dataset.get('data_root') or ''
    if '://' in root:
        return
    if root:
        yield root, kind
    prefix = dataset.get('data_prefix') or ''
    prefixes = prefix.values() if isinstance(prefix, dict) else [prefix]
    for value in [dataset.get('ann_file'), *prefixes]:
        if isinstance(value, str) and value and '://' not in value:
            yield osp.join(root, value), kind
    name = kind.split('.')[-1]
    if name in _SPLIT_FOLDER_DATASETS and dataset.get('split') and root:
        yield osp.join(root, dataset['split']), kind


def find_missing_data(cfg: Config, dataloaders: list[str]) -> list[str]:
    """One line per missing dataset folder or file of the dataloaders
    ``dataloaders`` (keys, e.g. ``['train_dataloader']``; a missing root
    without the paths below it), naming the doc page of its dataset type.
    """
    messages, seen = [], set()
    for key in dataloaders:
        loader = cfg.get(key)
        if not isinstance(loader, dict) or 'dataset' not in loader:
            continue
        wrapped = dataset_configs(key, loader['dataset'])
        paths = (p for _, item in wrapped for p in _dataset_paths(item))
        for path, kind in paths:
            if path in seen:
                break  # reported for an earlier loader
            if osp.exists(path):
                continue
            seen.add(path)
            doc = doc_pages.data_page(kind, cfg.get('default_scope'))
            messages.append(f'Dataset not found: expected {path} (see {doc}).')
            break  # the deeper paths of a missing root add nothing
    return messages


def head_classes(cfg: Any) -> tuple[Optional[int], Optional[str]]:
    """``model.head.num_classes`` (None where it is not a whole number)
    and the config variable it was set from (``num_classes``), if any."""
    head = entry(cfg, 'model', 'head')
    num_classes = head.get('num_classes') if isinstance(head, dict) else None
    if not isinstance(num_classes, int) or isinstance(num_classes, bool):
        num_classes = None
    return num_classes, set_from(cfg, 'model.head.num_classes')


def class_count_message(
    key: str,
    classes: list,
    num_classes: Optional[int],
    where: str,
    variable: Optional[str] = None,
) -> Optional[str]:
    """The line for a dataset of ``key`` whose ``classes`` (read from
    ``where``) cannot train or test a head of ``num_classes`` classes, or
    None: a hidden folder taken as a class (mmpretrain's ``CustomDataset``
    lists every sub-folder, ``.ipynb_checkpoints`` too), fewer than two
    classes, or another number of classes. The line names the config
    ``variable`` the head's classes are set from, if any."""
    source = f' in {where}' if where else ''
    hidden = [name for name in classes if str(name).startswith('.')]
    if hidden:
        return (
            f'{key}: {where or "the dataset"} holds the hidden folder(s) '
            f"{few(hidden)}, which mmpretrain's CustomDataset takes as "
            'classes; delete them or move them out of the class folders.'
        )
    if len(classes) < 2:
        listed = f' ({few(classes)})' if classes else ''
        return (
            f'{key}: the dataset has {len(classes)} class{source}{listed}; '
            'a classifier needs at least two, one folder of images each.'
        )
    if num_classes is None or len(classes) == num_classes:
        return None
    fix = (
        f'{variable}={len(classes)}'
        if variable
        else 'model.head.num_classes (and data_preprocessor.num_classes) '
        f'to {len(classes)}'
    )
    return (
        f'{key}: the dataset has {len(classes)} classes{source} '
        f'({few(classes)}), but model.head.num_classes={num_classes}; '
        f'set {fix}, or give the dataset {num_classes} class folders.'
    )


def _folder_dataset(dataset: Any) -> Optional[dict]:
    """The folder-style ``CustomDataset`` config inside dataset wrappers
    (its classes are its sub-folders), or None."""
    while isinstance(dataset, dict) and 'dataset' in dataset:
        dataset = dataset['dataset']
    if not isinstance(dataset, dict):
        return None
    if str(dataset.get('type', '')).split('.')[-1] != 'CustomDataset':
        return None
    metainfo = dataset.get('metainfo') or {}
    given = dataset.get('classes') or metainfo.get('classes')
    if dataset.get('ann_file') or not dataset.get('with_label', True) or given:
        return None
    return dataset


def class_folders(dataset: Any) -> Optional[tuple[str, list[str]]]:
    """The folder and classes of a folder-style ``CustomDataset`` config
    (mmpretrain lists the sub-folders, sorted, hidden ones included), or
    None where its classes come from elsewhere (an ``ann_file``, the
    config) or it is missing."""
    dataset = _folder_dataset(dataset)
    if dataset is None:
        return None
    prefix = dataset.get('data_prefix') or ''
    if isinstance(prefix, dict):
        prefix = prefix.get('img_path') or ''
    folder = osp.join(dataset.get('data_root') or '', prefix)
    if '://' in folder or not osp.isdir(folder):
        return None
    with os.scandir(folder) as entries:
        names = sorted(entry.name for entry in entries if entry.is_dir())
    return folder, names


def class_folder_problem(cfg: Config, dataloaders: list[str]) -> Optional[str]:
    """The first dataloader of ``dataloaders`` whose class folders cannot
    train or test the head (:func:`class_count_message`), None if each
    fits or is not a folder dataset."""
    num_classes, variable = head_classes(cfg)
    for key in dataloaders:
        found = class_folders(entry(cfg, key, 'dataset'))
        if found:
            problem = class_count_message(
                key, found[1], num_classes, found[0], variable
            )
            if problem:
                return problem
    return None


def init_checkpoints(node: object) -> Iterator[str]:
    """``checkpoint`` entries of every ``init_cfg`` of a model config, and
    every ``*_checkpoint`` string of a model part (a part that reads more
    weights when it is initialised, e.g. a teacher's)."""
    if isinstance(node, dict):
        yield from (
            value
            for key, value in node.items()
            if str(key).endswith('_checkpoint') and isinstance(value, str)
        )
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


def missing_checkpoint(
    path: str, doc: str = doc_pages.TRAINING
) -> Optional[str]:
    """The line for a local checkpoint file that is not there, naming
    ``doc`` for where checkpoints come from; None if it is a file or a
    URL (read and judged by the checkpoint reader)."""
    path = str(path)
    if '://' in path or osp.isfile(osp.expanduser(path)):
        return None
    return f'Checkpoint not found: expected {path} (see {doc}).'


def checkpoint_paths(cfg: Config, training: bool = False) -> list[str]:
    """The checkpoint files a run of ``cfg`` reads that its config names:
    its ``load_from`` (a resume without a file, ``resume='auto'``, is the
    runner's choice among the work dir's files) and, for a training that
    does not resume, the model's ``init_cfg`` checkpoints."""
    resume = cfg.get('resume')
    paths = []
    if cfg.get('load_from') and resume != 'auto':
        paths.append(str(cfg.load_from))
    if training and not resume:
        paths += list(init_checkpoints(cfg.get('model')))
    return paths


def checkpoint_problem(
    cfg: Config,
    training: bool = False,
    paths: Optional[Sequence[str]] = None,
) -> Optional[str]:
    """The line for the first of ``paths`` that is not there
    (:func:`missing_checkpoint`, naming the page of ``cfg``'s scope), or
    None. ``paths``: the files the config names (:func:`checkpoint_paths`)
    unless given (``CheckpointCheckHook``: the files the run chose)."""
    dense = cfg.get('default_scope') in ('mmdet', 'mmseg')
    doc = doc_pages.DENSE_PREDICTION if dense else doc_pages.TRAINING
    if paths is None:
        paths = checkpoint_paths(cfg, training)
    for path in paths:
        problem = missing_checkpoint(path, doc)
        if problem:
            return problem
    return None
