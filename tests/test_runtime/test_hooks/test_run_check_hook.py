"""RunCheckHook: the dataset's class folders against the head's
num_classes and pipeline sizes the T2T module cannot tile, refused before
the work starts through every door; what it cannot be sure of (an empty
class folder, labels that fit a longer class list) goes on with a
warning."""

import os.path as osp
import shutil
from unittest import mock

import pytest
from mmengine.config import Config
from mmengine.registry import RUNNERS

from t2t_plugin.runtime.hooks import RunCheckError
from t2t_plugin.runtime.hooks.run_check_hook import _where, pipeline_problem

from ...helpers import (
    CUSTOM,
    as_dict,
    custom_options,
    digit_model,
    door,
    forget_visualizers_and_loggers,
    last_line,
    one_line,
    plain_runner,
    run_main,
    run_mmpretrain_tool,
    write_class_folders,
)


@pytest.mark.parametrize('folders', [4, 1])
def test_class_folders_must_match_num_classes(folders, tmp_path):
    root = write_class_folders(tmp_path / 'data', folders)
    options = custom_options(root)
    names = ', '.join(f'c{i}' for i in range(folders))
    # the line names the environment variable of the config's num_classes
    expected = (
        f'train_dataloader: the dataset has {folders} classes in '
        f'{root}/train ({names}), but model.head.num_classes=3; set '
        f'NUM_CLASSES={folders}, or give the dataset 3 class folders.'
        if folders > 1
        else f'train_dataloader: the dataset has 1 class in {root}/train '
        '(c0); a classifier needs at least two, one folder of images each.'
    )
    ours = run_main(
        'train', CUSTOM, '--work-dir', tmp_path / 'ours',
        '--cfg-options', *options,
    )  # fmt: skip
    assert ours.returncode == 1
    assert one_line(ours.stderr) == expected
    if folders == 4:  # mmpretrain's own tool: its traceback ends with ours
        theirs = run_mmpretrain_tool(
            'train', CUSTOM, '--work-dir', tmp_path / 'theirs',
            '--cfg-options', *options,
        )  # fmt: skip
        assert theirs.returncode == 1
        assert last_line(theirs.stderr).endswith(': ' + expected)
    else:
        error = door(CUSTOM, as_dict(options), tmp_path / 'door')
        assert isinstance(error, RunCheckError) and str(error) == expected


@pytest.mark.parametrize('prefix', ['train', ''])
def test_messages_name_a_relative_folder_once(prefix, tmp_path, monkeypatch):
    # mmengine joins data_root to a relative data_prefix as it builds the
    # dataset: the folder in a message must not repeat the root
    from mmpretrain.datasets import CustomDataset

    write_class_folders(tmp_path / 'data', 2)
    monkeypatch.chdir(tmp_path)
    root = 'data/train' if not prefix else 'data'
    dataset = CustomDataset(data_root=root, data_prefix=prefix, pipeline=[])
    assert osp.normpath(_where(dataset)) == 'data/train'


def test_an_empty_val_class_folder_is_a_warning(tmp_path):
    # its label is its folder's index still: nothing shifts, the run goes
    # on with mmpretrain's own warning (the log shows it)
    root = write_class_folders(tmp_path / 'data', 3)
    shutil.rmtree(root / 'val' / 'c1')
    (root / 'val' / 'c1').mkdir()
    options = custom_options(root)
    warning = 'Found no valid file in the folder c1.'
    ours = run_main(
        'train', CUSTOM, '--work-dir', tmp_path / 'w', '--cfg-options',
        *options,
    )  # fmt: skip
    assert ours.returncode == 0, ours.stderr[-2000:]
    assert warning in ours.stdout + ours.stderr
    assert (tmp_path / 'w' / 'epoch_1.pth').is_file()
    assert door(CUSTOM, as_dict(options), tmp_path / 'door') is None
    theirs = run_mmpretrain_tool(
        'train', CUSTOM, '--work-dir', tmp_path / 'theirs',
        '--cfg-options', *options,
    )  # fmt: skip
    assert theirs.returncode == 0, theirs.stderr[-2000:]


def test_labels_that_fit_a_longer_class_list_are_a_warning(tmp_path):
    # ImageNet's 1000 classes, an annotation file of 3 of them: the head
    # of 3 classes fits the labels; mmengine's Runner trains it
    root = write_class_folders(tmp_path / 'data', 3, splits=('train',))
    lines = [
        f'c{label}/{index}.jpg {label}\n'
        for label in range(3)
        for index in range(2)
    ]
    (root / 'train.txt').write_text(''.join(lines))
    options = as_dict(custom_options(root))
    for loader in ('train_dataloader', 'val_dataloader'):
        options[f'{loader}.dataset'] = dict(
            _delete_=True,
            type='ImageNet',
            data_root=str(root),
            data_prefix='train',
            ann_file='train.txt',
            pipeline=Config.fromfile(CUSTOM)[loader].dataset.pipeline,
        )
    forget_visualizers_and_loggers()
    cfg = Config.fromfile(CUSTOM)
    cfg.merge_from_dict(options)
    cfg.work_dir = str(tmp_path / 'door')
    runner = plain_runner(cfg)
    with mock.patch.object(runner.logger, 'warning') as warn:
        runner.train()
    logged = [call.args[0] for call in warn.call_args_list]
    mine = [line for line in logged if 'its labels fit the head' in line]
    assert len(mine) == 2  # train and val
    assert mine[0].startswith(
        'train_dataloader: the dataset lists 1000 classes (tench, Tinca '
        'tinca, goldfish, '
    )
    assert mine[0].endswith(
        ' and 995 more), model.head.num_classes=3; its labels fit the '
        'head, so the run goes on.'
    )
    # labels beyond the head: refused, as the loss would fail on them
    (root / 'train.txt').write_text(''.join(lines) + 'c0/0.jpg 7\n')
    error = door(CUSTOM, options, tmp_path / 'door2')
    assert isinstance(error, RunCheckError)
    assert str(error) == (
        f'train_dataloader: {root}/train.txt: label 7 of sample 6 '
        f'({root}/train/c0/0.jpg) is outside 0 to 2, the classes of '
        'model.head.num_classes=3 (1 label(s) in all); fix the labels, or '
        'set model.head.num_classes (and data_preprocessor.num_classes) '
        'to 8.'
    )


def test_a_hidden_folder_is_named_where_it_changes_the_count(tmp_path):
    root = write_class_folders(tmp_path / 'data', 3)
    (root / 'train' / '.ipynb_checkpoints').mkdir()  # as Jupyter leaves it
    options = custom_options(root)
    expected = (
        f'train_dataloader: the dataset has 4 classes in {root}/train '
        '(.ipynb_checkpoints, c0, c1, c2), but model.head.num_classes=3; '
        'set NUM_CLASSES=4, or give the dataset 3 class folders (the '
        'hidden folder(s) .ipynb_checkpoints count as classes: delete them '
        'or move them out of the class folders).'
    )
    ours = run_main(
        'train', CUSTOM, '--work-dir', tmp_path / 'w', '--cfg-options',
        *options,
    )  # fmt: skip
    assert ours.returncode == 1 and one_line(ours.stderr) == expected
    assert not (tmp_path / 'w').exists()
    assert str(door(CUSTOM, as_dict(options), tmp_path / 'door')) == expected


def test_train_and_val_folders_of_other_classes(tmp_path):
    # folder indices: c2 is label 2 in training, 1 in validation
    root = write_class_folders(tmp_path / 'data', 3)
    shutil.rmtree(root / 'val' / 'c1')
    write_class_folders(root, ['c3'], splits=('val',))
    options = custom_options(root)
    expected = (
        'val_dataloader has 3 classes (c0, c2, c3), but train_dataloader '
        'has 3 (c0, c1, c2); both must list the same classes in the same '
        'order.'
    )
    ours = run_main(
        'train', CUSTOM, '--work-dir', tmp_path / 'w', '--cfg-options',
        *options,
    )  # fmt: skip
    assert ours.returncode == 1 and one_line(ours.stderr) == expected
    assert str(door(CUSTOM, as_dict(options), tmp_path / 'door')) == expected
    # an annotation file's labels may agree with the training's: warned
    lines = ''.join(f'c{c}/0.jpg {c}\n' for c in (0, 2))
    (root / 'val.txt').write_text(lines)
    options = as_dict(options)
    options['val_dataloader.dataset.ann_file'] = 'val.txt'
    options['val_dataloader.dataset.metainfo'] = dict(classes=['a', 'b', 'c'])
    write_class_folders(root, 3, splits=('val',))
    assert door(CUSTOM, options, tmp_path / 'door2') is None


def test_untileable_pipeline_size_is_one_line():
    t2t = digit_model().backbone.tokens_to_token  # strides 1, 1, 2
    problem = pipeline_problem(
        [dict(type='RandomCrop', crop_size=7), dict(type='PackInputs')], t2t
    )
    assert problem.startswith('T2T-ViT cannot tile a 7x7 input')
    assert (
        pipeline_problem([dict(type='RandomCrop', crop_size=8)], t2t) is None
    )
    assert pipeline_problem([dict(type='LoadImageFromFile')], t2t) == (
        'loads 3-channel images, but the backbone takes in_channels=1; set '
        "model.backbone.in_channels or LoadImageFromFile's color_type to "
        'match.'
    )
    # made grey after loading, as the digits demo's ConvertImage does
    grey = [
        dict(type='LoadImageFromFile'),
        dict(type='ConvertImage', channels=1),
    ]
    assert pipeline_problem(grey, t2t) is None


def test_every_child_of_a_dataset_wrapper_is_checked(tmp_path):
    # the second dataset of a ConcatDataset: its pipeline named by its
    # dotted key
    root = write_class_folders(tmp_path / 'data', 3)
    other = write_class_folders(tmp_path / 'other', 3, splits=('train',))
    crops = {root: 64, other: 60}
    options = as_dict(custom_options(root))
    options['train_dataloader.dataset'] = dict(
        _delete_=True,
        type='ConcatDataset',
        datasets=[
            dict(
                type='CustomDataset',
                data_root=str(folder),
                data_prefix='train',
                pipeline=[
                    dict(type='LoadImageFromFile'),
                    dict(type='RandomResizedCrop', scale=crop),
                    dict(type='PackInputs'),
                ],
            )
            for folder, crop in crops.items()
        ],
    )
    expected = (
        'train_dataloader.dataset.datasets.1.pipeline: T2T-ViT cannot tile '
        'a 60x60 input: its soft splits (kernels (7, 3, 3), strides (2, 2, '
        '2), paddings (3, 1, 1)) need both sides to be multiples of 8. '
        'Resize or pad the image, e.g. to 64x64.'
    )
    for build in (plain_runner, RUNNERS.build):
        error = door(CUSTOM, options, tmp_path / 'door', build=build)
        assert isinstance(error, RunCheckError)
        assert str(error) == expected


def test_mmpretrain_t2t_vit_is_not_checked_as_ours():
    """mmpretrain's own ``T2T_ViT`` has a ``tokens_to_token`` too, without
    our module's size rules: the pipeline checks leave it to its own
    forward (they raised an AttributeError on it)."""
    from types import SimpleNamespace

    from mmpretrain.models import T2T_ViT

    from t2t_plugin.runtime.hooks.run_checks import t2t_module

    theirs = SimpleNamespace(
        backbone=T2T_ViT(
            img_size=32, embed_dims=64, num_layers=1,
            layer_cfgs=dict(num_heads=4),
        )
    )  # fmt: skip
    assert t2t_module(SimpleNamespace(model=theirs)) is None
    ours = SimpleNamespace(backbone=digit_model().backbone)
    assert (
        t2t_module(SimpleNamespace(model=ours))
        is ours.backbone.tokens_to_token
    )
