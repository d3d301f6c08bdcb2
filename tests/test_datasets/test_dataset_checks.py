"""What RunCheckHook refuses about the data before training, in one line
through our tools and mmpretrain's: labels (of an annotation file or a
dataset class) outside the head's classes (naming the file, the label and
num_classes), and training folders that reach the validation images
through a link."""

import json
from pathlib import Path

import pytest
from mmpretrain.registry import DATASETS

from t2t_plugin.datasets import label_range_problem, linked_folders_problem

from ..helpers import last_line, write_class_folders
from .image_folders import (
    lite_options,
    train_through_both_tools,
)


def json_annotations(path: Path, labels: list) -> Path:
    """mmengine's annotation format: one sample per label."""
    path.write_text(
        json.dumps(
            {
                'metainfo': {'classes': ['c0', 'c1', 'c2']},
                'data_list': [
                    {'img_path': f'{i}.jpg', 'gt_label': label}
                    for i, label in enumerate(labels)
                ],
            }
        )
    )
    return path


def test_labels_outside_the_classes_are_named(tmp_path):
    path = json_annotations(tmp_path / 'ann.json', [0, 2, 5, 1, 9, -1])
    dataset = DATASETS.build(
        dict(type='BaseDataset', ann_file=str(path), data_prefix='/img')
    )
    assert label_range_problem(dataset, 3) == (
        f'{path}: label 5 of sample 2 (/img/2.jpg) is outside 0 to 2, the '
        'classes of model.head.num_classes=3 (3 label(s) in all); fix the '
        'labels.'
    )
    assert label_range_problem(dataset, 10) == (
        f'{path}: label -1 of sample 5 (/img/5.jpg) is outside 0 to 9, the '
        'classes of model.head.num_classes=10 (1 label(s) in all); fix the '
        'labels.'
    )
    above = json_annotations(tmp_path / 'above.json', [0, 3, 1])
    dataset = DATASETS.build(dict(type='BaseDataset', ann_file=str(above)))
    assert label_range_problem(dataset, 3) == (
        f'{above}: label 3 of sample 1 (1.jpg) is outside 0 to 2, the '
        'classes of model.head.num_classes=3 (1 label(s) in all); fix the '
        'labels, or set model.head.num_classes (and '
        'data_preprocessor.num_classes) to 4.'
    )
    assert label_range_problem(dataset, 4) is None
    assert label_range_problem(dataset, None) is None


def test_labels_of_a_dataset_class_are_checked_too():
    # no annotation file: the digits' labels are the class's own
    digits = DATASETS.build(dict(type='DigitsDataset', split='val'))
    labels = digits.get_gt_labels()
    first = int((labels >= 3).nonzero()[0][0])
    assert label_range_problem(digits, 3) == (
        f'DigitsDataset: label {labels[first]} of sample {first} is outside '
        f'0 to 2, the classes of model.head.num_classes=3 '
        f'({(labels >= 3).sum()} label(s) in all); fix the labels, or set '
        'model.head.num_classes (and data_preprocessor.num_classes) to 10.'
    )
    assert label_range_problem(digits, 10) is None


@pytest.mark.parametrize('label', [7, -1])
def test_a_label_out_of_range_stops_the_run_before_training(label, tmp_path):
    root = write_class_folders(tmp_path / 'data')
    # mmpretrain's CustomDataset list: 'path label' per line
    ann_file = root / 'train.txt'
    ann_file.write_text(f'c0/0.jpg 0\nc1/0.jpg {label}\nc2/0.jpg 2\n')
    options = lite_options(
        root,
        f'train_dataloader.dataset.ann_file={ann_file}',
        f'train_dataloader.dataset.data_prefix={root}/train',
    )
    fix = 'fix the labels' + (
        ', or set model.head.num_classes (and '
        'data_preprocessor.num_classes) to 8'
        if label > 0
        else ''
    )
    expected = (
        f'train_dataloader: {ann_file}: label {label} of sample 1 '
        f'({root}/train/c1/0.jpg) is outside 0 to 2, the classes of '
        f'model.head.num_classes=3 (1 label(s) in all); {fix}.'
    )
    ours, theirs = train_through_both_tools(tmp_path, options)
    assert ours.returncode == 1
    assert ours.stderr.strip() == expected
    assert 'Epoch(train)' not in ours.stdout
    assert theirs.returncode == 1
    assert last_line(theirs.stderr).endswith(': ' + expected)
    assert 'Epoch(train)' not in theirs.stdout


def test_a_link_to_the_val_folder_in_a_class_folder_is_refused(tmp_path):
    root = write_class_folders(tmp_path / 'data')
    (root / 'train' / 'c0' / 'leak').symlink_to(root / 'val')
    options = lite_options(root)
    expected = (
        'train_dataloader reads 3 folder(s) of val_dataloader through '
        f'symbolic links, e.g. {root}/train/c0/leak/c0 is {root}/val/c0: '
        'those images would be trained on and then evaluated as unseen; '
        'remove the links from the training folders.'
    )
    ours, theirs = train_through_both_tools(tmp_path, options)
    assert ours.returncode == 1
    assert ours.stderr.strip() == expected
    assert 'Epoch(train)' not in ours.stdout
    assert theirs.returncode == 1
    assert last_line(theirs.stderr).endswith(': ' + expected)


def test_the_same_folder_named_twice_is_left_to_the_config(tmp_path):
    root = write_class_folders(tmp_path / 'data')
    train = DATASETS.build(
        dict(type='CustomDataset', data_root=str(root), data_prefix='val')
    )
    val = DATASETS.build(
        dict(type='CustomDataset', data_root=str(root), data_prefix='val')
    )
    assert linked_folders_problem(train, val, 'val_dataloader') is None
    (root / 'alias').symlink_to(root / 'val')
    linked = DATASETS.build(
        dict(type='CustomDataset', data_root=str(root), data_prefix='alias')
    )
    assert linked_folders_problem(linked, val, 'val_dataloader') == (
        'train_dataloader reads 3 folder(s) of val_dataloader through '
        f'symbolic links, e.g. {root}/alias/c0 is {root}/val/c0: those '
        'images would be trained on and then evaluated as unseen; remove '
        'the links from the training folders.'
    )
