"""Checks of what datasets give a model, before it trains on them: labels
within its classes, validation images that are not training images."""

import os.path as osp
from typing import Any, Optional

import numpy as np


def label_range_problem(dataset: Any, num_classes: Any) -> Optional[str]:
    """Why the labels of a single-label classification dataset (an
    annotation file's, a dataset class's own) do not fit a head of
    ``num_classes`` classes, in one line naming the file, the first label
    out of range and its sample; None if they fit.

    Without this, a label out of range ends the run at the loss (an
    assertion or a CUDA device-side error), after the model is built, and
    with a negative label some losses train on it silently.

    Args:
        dataset: The dataset (mmpretrain's ``get_gt_labels`` is used;
            datasets without it, and multi-label lists, are not checked;
            a folder dataset's labels are its folders' indices, whose
            count ``RunCheckHook`` checks).
        num_classes: The head's ``num_classes`` (anything but an int: not
            checked).
    """
    get_gt_labels = getattr(dataset, 'get_gt_labels', None)
    if not isinstance(num_classes, int) or get_gt_labels is None:
        return None
    try:
        labels = np.asarray(get_gt_labels())
    except ValueError:  # lists of different lengths: multi-label
        return None
    if labels.ndim != 1 or labels.dtype.kind not in 'iu':
        return None
    wrong = np.flatnonzero((labels < 0) | (labels >= num_classes))
    if not wrong.size:
        return None
    first = int(wrong[0])
    label = int(labels[first])
    info = dataset.get_data_info(first)
    sample = info.get('img_path') if isinstance(info, dict) else None
    source = getattr(dataset, 'ann_file', '') or type(dataset).__name__
    fix = 'fix the labels'
    if label >= 0 and labels.min() >= 0:
        fix += (
            ', or set model.head.num_classes (and '
            f'data_preprocessor.num_classes) to {int(labels.max()) + 1}'
        )
    return (
        f'{source}: label {label} of sample {first}'
        + (f' ({sample})' if sample else '')
        + f' is outside 0 to {num_classes - 1}, the classes of '
        f'model.head.num_classes={num_classes} ({wrong.size} label(s) in '
        f'all); {fix}.'
    )


def _folders(dataset: Any) -> dict[str, str]:
    """Real path -> path as the dataset reads it, of the folders holding
    the dataset's images."""
    get_data_info = getattr(dataset, 'get_data_info', None)
    if get_data_info is None:
        return {}
    seen = set()
    for index in range(len(dataset)):
        info = get_data_info(index)
        path = info.get('img_path') if isinstance(info, dict) else None
        if not isinstance(path, str) or '://' in path:
            return {}
        seen.add(osp.dirname(osp.abspath(path)))
    return {osp.realpath(folder): folder for folder in sorted(seen)}


def linked_folders_problem(
    train: Any, other: Any, other_key: str
) -> Optional[str]:
    """Why ``other`` (a validation or test set) is not unseen by a model
    trained on ``train``: folders of images that the two read under other
    names, through a symbolic link (a class folder holding a link to the
    val folder); None if there are none.

    Folders both sets name alike are left alone: a config that gives the
    same folder twice says so where a reader sees it.
    """
    # only where the samples were found by walking folders, which follows
    # links: a list file names its paths where a reader sees them
    if getattr(train, 'ann_file', ''):
        return None
    train_folders = _folders(train)
    if not train_folders:
        return None
    other_folders = _folders(other)
    shared = [
        (train_folders[real], other_folders[real])
        for real in train_folders
        if real in other_folders and train_folders[real] != other_folders[real]
    ]
    if not shared:
        return None
    seen, there = shared[0]
    return (
        f'train_dataloader reads {len(shared)} folder(s) of {other_key} '
        f'through symbolic links, e.g. {seen} is {there}: those images '
        'would be trained on and then evaluated as unseen; remove the links '
        'from the training folders.'
    )
