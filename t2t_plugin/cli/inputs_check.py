"""Checks, before a run starts, that a config loads and the files it names
exist.

Without them a missing dataset or checkpoint surfaces deep inside dataset or
model construction as a long traceback; tools call :func:`find_missing_inputs`
first and print one line per missing path instead.
"""

import os
import os.path as osp
import sys
from collections.abc import Iterator
from typing import Optional

from mmengine.config import Config
from mmpretrain.registry import DATASETS

from .. import doc_pages
from ..engine.config import ConfigError
from ..engine.config import load_config as read_config

DATA_DOC = doc_pages.DATA_PREPARATION
CHECKPOINT_DOC = doc_pages.TRAINING
DENSE_DOC = doc_pages.DENSE_PREDICTION

# What a wrong config or option raises while mmengine builds the run
# (model, datasets, loops): a user mistake, not a bug.
BUILD_ERRORS = (AssertionError, ValueError, TypeError, KeyError)

# Datasets that read ``data_root/<split>`` when ``split`` is given.
_SPLIT_FOLDER_DATASETS = ('ImageNet', 'ImageNet21k')


def _is_remote(path: str) -> bool:
    return '://' in path


def _dataset_paths(dataset: dict) -> Iterator[str]:
    """Local paths a dataset config reads, outermost first."""
    if 'dataset' in dataset:  # RepeatDataset, ClassBalancedDataset, ...
        yield from _dataset_paths(dataset['dataset'])
    for child in dataset.get('datasets', ()):  # ConcatDataset
        yield from _dataset_paths(child)
    root = dataset.get('data_root') or ''
    if _is_remote(root):
        return
    if root:
        yield root
    ann_file = dataset.get('ann_file') or ''
    if ann_file and not _is_remote(ann_file):
        yield osp.join(root, ann_file)
    prefix = dataset.get('data_prefix') or ''
    prefixes = prefix.values() if isinstance(prefix, dict) else [prefix]
    for value in prefixes:
        if isinstance(value, str) and value and not _is_remote(value):
            yield osp.join(root, value)
    kind = str(dataset.get('type', '')).split('.')[-1]
    if kind in _SPLIT_FOLDER_DATASETS and dataset.get('split') and root:
        yield osp.join(root, dataset['split'])
    # CIFAR classes read a fixed sub-folder of data_root.
    dataset_class = DATASETS.get(kind) if kind else None
    base_folder = getattr(dataset_class, 'base_folder', None)
    if root and isinstance(base_folder, str):
        yield osp.join(root, base_folder)


def _checkpoint_paths(node: object) -> Iterator[str]:
    """``checkpoint`` entries of every ``init_cfg`` in a model config."""
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
                yield from _checkpoint_paths(value)
    elif isinstance(node, (list, tuple)):
        for value in node:
            yield from _checkpoint_paths(value)


def find_missing_inputs(
    cfg: Config,
    dataloaders: Optional[list[str]] = None,
    check_load_from: bool = True,
    check_init_cfg: bool = True,
) -> list[str]:
    """Messages, one per missing dataset path or checkpoint of a config.

    Args:
        cfg (Config): The config of the run.
        dataloaders (list[str], optional): Dataloader keys to check.
            Defaults to ``train_dataloader``, ``val_dataloader`` and
            ``test_dataloader``.
        check_load_from (bool): Also check ``load_from`` (off when a test
            run gets its checkpoint from the command line). Defaults to True.
        check_init_cfg (bool): Also check the checkpoints of the model's
            ``init_cfg`` entries (off for test runs, which do not initialise
            weights). Defaults to True.

    Returns:
        list[str]: A one-line message per missing path (empty when all
        exist); a path missing for several dataloaders is named once.
    """
    keys = dataloaders or [
        'train_dataloader',
        'val_dataloader',
        'test_dataloader',
    ]
    messages, seen = [], set()
    dense = cfg.get('default_scope') in ('mmdet', 'mmseg')
    data_doc = DENSE_DOC if dense else DATA_DOC
    checkpoint_doc = DENSE_DOC if dense else CHECKPOINT_DOC

    def report(path: str, what: str, doc: str) -> None:
        if path not in seen and not osp.exists(path):
            seen.add(path)
            messages.append(f'{what} not found: expected {path} (see {doc}).')

    for key in keys:
        loader = cfg.get(key)
        if not isinstance(loader, dict) or 'dataset' not in loader:
            continue
        for path in _dataset_paths(loader['dataset']):
            report(path, 'Dataset', data_doc)
            if path in seen:
                break  # the deeper paths of a missing root add nothing
    checkpoints = (
        list(_checkpoint_paths(cfg.get('model', {}))) if check_init_cfg else []
    )
    if check_load_from and cfg.get('load_from'):
        checkpoints.append(cfg.load_from)
    for path in checkpoints:
        if not _is_remote(path):
            report(path, 'Checkpoint', checkpoint_doc)
    return messages


def load_config(path: str) -> Optional[Config]:
    """Load a config, or print one line saying why it cannot be loaded.

    The tools' side of :func:`t2t_plugin.engine.load_config`, which raises
    :class:`~t2t_plugin.engine.ConfigError`.

    Args:
        path (str): Config file.

    Returns:
        Config | None: The config, or None after printing the reason to
        stderr.
    """
    try:
        return read_config(path)
    except ConfigError as error:
        print(error, file=sys.stderr)
        return None


def report_build_error(config: str, error: BaseException) -> None:
    """Print a user mistake found while building a run as one line.

    With ``T2T_DEBUG=1`` in the environment the error is re-raised instead,
    traceback and all.

    Args:
        config (str): The config file of the run.
        error (BaseException): One of :data:`BUILD_ERRORS`, being handled.
    """
    if os.environ.get('T2T_DEBUG') == '1':
        raise error
    message = ' '.join(str(error).split())
    print(
        f'{config}: {type(error).__name__}: {message} '
        '(set T2T_DEBUG=1 for the traceback)',
        file=sys.stderr,
    )
