"""RunCheckHook: the dataset's class folders against the head's
num_classes, empty class folders and pipeline sizes the T2T module cannot
tile, refused before the work starts through every door."""

import os.path as osp
import shutil

import pytest
from mmengine.registry import RUNNERS

from t2t_plugin.engine.hooks import RunCheckError
from t2t_plugin.engine.hooks.run_check_hook import _where, pipeline_problem

from ...helpers import (
    CUSTOM,
    as_dict,
    custom_options,
    digit_model,
    door,
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


def test_empty_class_folder_is_refused(tmp_path):
    root = write_class_folders(tmp_path / 'data', 3)
    for split in ('train', 'val'):
        shutil.rmtree(root / split / 'c1')
        (root / split / 'c1').mkdir()
    options = custom_options(root)
    ours = run_main(
        'train', CUSTOM, '--work-dir', tmp_path / 'w', '--cfg-options',
        *options,
    )  # fmt: skip
    line = one_line(ours.stderr)
    assert line == (
        f'train_dataloader: class folder(s) c1 in {root}/train hold no '
        'images but still take a label index, shifting every label after '
        'them; remove the empty folders or add their images.'
    )
    assert str(door(CUSTOM, as_dict(options), tmp_path / 'door')) == line


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


@pytest.mark.parametrize('mistake', ['pipeline', 'empty_folder'])
def test_every_child_of_a_dataset_wrapper_is_checked(mistake, tmp_path):
    # the second dataset of a ConcatDataset: its pipeline named by its
    # dotted key, its class folders counted
    root = write_class_folders(tmp_path / 'data', 3)
    other = write_class_folders(tmp_path / 'other', 3, splits=('train',))
    crops = {root: 64, other: 60 if mistake == 'pipeline' else 64}
    if mistake == 'empty_folder':
        shutil.rmtree(other / 'train' / 'c1')
        (other / 'train' / 'c1').mkdir()
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
        if mistake == 'pipeline'
        else f'train_dataloader: class folder(s) c1 in {other}/train hold '
        'no images but still take a label index, shifting every label '
        'after them; remove the empty folders or add their images.'
    )
    for build in (plain_runner, RUNNERS.build):
        error = door(CUSTOM, options, tmp_path / 'door', build=build)
        assert isinstance(error, RunCheckError)
        assert str(error) == expected
