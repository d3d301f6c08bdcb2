"""What a run reads, judged from its config and the disk: the dataset
folders and files (where each dataset's class looks for them), the class
folders against the head, the checkpoint files. Each decision is one
function here; the tools call them before the Runner is built, the
runner and its hooks for every other door.
"""

import os.path as osp
import re
from collections.abc import Sequence
from typing import Any, Optional

from mmengine.config import Config

from . import doc_pages
from .config import dataset_configs, entry, few, leaves, set_from
from .keys import built_dicts, registered_class

# 64x64 tokens, a 1024x1024 image at stride 16: attention memory grows with
# the square of the tokens, so a huge input is refused rather than left to
# exhaust the memory.
DEFAULT_MAX_TOKENS = 4096


def built_datasets(cfg: Config, dataloaders: list[str]) -> dict[str, list]:
    """The datasets each dataloader of ``dataloaders`` (keys, e.g.
    ``['train_dataloader']``) reads files through (those inside its
    wrappers), each built by its own class with ``lazy_init=True``: its
    paths resolved as the class resolves them (``data_root``, ``split``, a
    default ``ann_file``), nothing read yet. Needs the registries (after
    the models' import); a dataset its class cannot build so is left out:
    the Runner's build reports it."""
    from mmengine.registry import DATASETS

    built: dict[str, list] = {key: [] for key in dataloaders}
    with DATASETS.switch_scope_and_registry(
        cfg.get('default_scope')
    ) as registry:
        for key in dataloaders:
            for _, item in dataset_configs(key, entry(cfg, key, 'dataset')):
                if 'dataset' in item or 'datasets' in item:
                    continue  # a wrapper
                try:
                    built[key].append(
                        registry.build(
                            {**item, 'pipeline': [], 'lazy_init': True}
                        )
                    )
                except Exception:  # the Runner's build says why, as the host
                    continue
    return built


def missing_path(dataset: Any) -> Optional[str]:
    """The first local file or folder a built dataset reads that is not
    there: its ``ann_file``, then its ``data_prefix`` folders (not those
    of a dataset that downloads them); its ``data_root`` where that is
    missing too. None if all are there."""
    paths = [getattr(dataset, 'ann_file', '')]
    if not getattr(dataset, 'download', False):
        paths += list((getattr(dataset, 'data_prefix', None) or {}).values())
    missing = [
        path
        for path in paths
        if isinstance(path, str) and path and '://' not in path
        if not osp.exists(path)
    ]
    if not missing:
        return None
    root = getattr(dataset, 'data_root', '') or ''
    under = root and missing[0].startswith(root) and not osp.exists(root)
    return root if under else missing[0]


def find_missing_data(cfg: Config, built: dict[str, list]) -> list[str]:
    """One line per missing dataset folder or file of the datasets
    ``built`` for each dataloader (:func:`built_datasets`), naming the doc
    page of its dataset type."""
    messages, seen = [], set()
    for datasets in built.values():
        for dataset in datasets:
            path = missing_path(dataset)
            if path is None or path in seen:
                continue
            seen.add(path)
            kind, scope = type(dataset).__name__, cfg.get('default_scope')
            doc = doc_pages.data_page(kind, scope)
            messages.append(f'Dataset not found: expected {path} (see {doc}).')
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
    """The line for a folder dataset of ``key`` whose ``classes`` (its
    class folders in ``where``) cannot train or test a head of
    ``num_classes`` classes, or None: fewer than two classes, or another
    number of classes (a hidden folder, which mmpretrain's
    ``CustomDataset`` takes as a class, is named). The line names the
    config ``variable`` the head's classes are set from, if any."""
    source = f' in {where}' if where else ''
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
    hidden = [name for name in classes if str(name).startswith('.')]
    hint = (
        f' (the hidden folder(s) {few(hidden)} count as classes: delete '
        'them or move them out of the class folders)'
        if hidden
        else ''
    )
    return (
        f'{key}: the dataset has {len(classes)} classes{source} '
        f'({few(classes)}), but model.head.num_classes={num_classes}; '
        f'set {fix}, or give the dataset {num_classes} class folders'
        f'{hint}.'
    )


def folder_dataset(dataset: Any) -> bool:
    """Whether a built dataset is mmpretrain's folder-style
    ``CustomDataset``: its labels are the indices of its class folders."""
    from mmpretrain.datasets import CustomDataset

    return (
        isinstance(dataset, CustomDataset)
        and not dataset.ann_file
        and dataset.with_label
    )


def class_folder_problem(cfg: Config, built: dict[str, list]) -> Optional[str]:
    """The judgement of class folders against the head
    (:func:`class_count_message`) of the hook that checks them (a hook
    class with ``checks_class_folders``, ``RunCheckHook``), made by our
    tools before the Runner for a run that has it: the first dataloader
    whose folder datasets (``built``, :func:`built_datasets`) cannot train
    or test the head, their folders listed by mmpretrain's
    ``find_folders``; None if each fits. Needs the registries (after the
    models' import)."""
    from mmengine.registry import HOOKS
    from mmpretrain.datasets.custom import find_folders

    scope = cfg.get('default_scope')
    if not any(
        getattr(
            registered_class(
                HOOKS, hook.get('type'), hook.get('_scope_', scope)
            ),
            'checks_class_folders',
            False,
        )
        for _, hook, kind in built_dicts(cfg)
        if kind == 'hook'
    ):
        return None
    num_classes, variable = head_classes(cfg)
    for key, datasets in built.items():
        for dataset in datasets:
            folder = dataset.img_prefix if folder_dataset(dataset) else ''
            if not osp.isdir(folder):
                continue
            classes = find_folders(folder)[0]
            problem = class_count_message(
                key, classes, num_classes, folder, variable
            )
            if problem:
                return problem
    return None


def init_checkpoints(node: object) -> list[str]:
    """``checkpoint`` entries of every ``init_cfg`` (a dict, or a list of
    them) of a model config, and every ``*_checkpoint`` string of a model
    part (a part that reads more weights when it is initialised, e.g. a
    teacher's)."""
    return [
        value
        for key, value in leaves(node)
        if isinstance(value, str)
        and (
            key.rsplit('.', 1)[-1].endswith('_checkpoint')
            or re.search(r'(^|\.)init_cfg(\.\d+)?\.checkpoint$', key)
        )
    ]


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
        paths += init_checkpoints(cfg.get('model'))
    return paths


def checkpoint_problem(
    cfg: Config,
    training: bool = False,
    paths: Optional[Sequence[str]] = None,
) -> Optional[str]:
    """The line for the first of ``paths`` that is not there
    (:func:`missing_checkpoint`, naming the page of ``cfg``'s scope), or
    None. ``paths``: the files the config names (:func:`checkpoint_paths`)
    unless given (``RunCheckHook``: the files the run chose)."""
    dense = cfg.get('default_scope') in ('mmdet', 'mmseg')
    doc = doc_pages.DENSE_PREDICTION if dense else doc_pages.TRAINING
    if paths is None:
        paths = checkpoint_paths(cfg, training)
    problems = (missing_checkpoint(path, doc) for path in paths)
    return next(filter(None, problems), None)
