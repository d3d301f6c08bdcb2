"""Datasets: the digits demo split and CIFAR from local pickle files;
missing inputs are reported as one line each."""

import pickle
from pathlib import Path

import numpy as np
import pytest
from mmengine.config import Config
from mmpretrain.registry import DATASETS
from sklearn.datasets import load_digits

import t2t_plugin  # noqa: F401
from t2t_preflight.inputs import (
    built_datasets,
    find_missing_data,
    init_checkpoints,
)

from ..helpers import (
    CUSTOM,
    DEMO,
    custom_options,
    one_line,
    run_main,
    run_mmpretrain_tool,
    write_class_folders,
)

CONFIG_DIR = Path(__file__).resolve().parents[2] / 'configs'


def test_digits_split_is_fixed_and_complete():
    train = DATASETS.build(dict(type='DigitsDataset', split='train'))
    val = DATASETS.build(dict(type='DigitsDataset', split='val'))
    assert (len(train), len(val)) == (1438, 359)
    assert train.metainfo['classes'] == tuple('0123456789')

    digits = load_digits()
    # Find each sample among the originals by its pixels and label.
    originals = {
        (digits.images[i].tobytes(), int(digits.target[i])): i
        for i in range(len(digits.images))
    }
    seen = []
    for dataset in (train, val):
        for i in range(len(dataset)):
            info = dataset.get_data_info(i)
            img = info['img']
            assert img.dtype == np.uint8 and img.shape == (8, 8)
            grey = (img.astype(np.float64) * 16 / 255).round()
            seen.append(originals[(grey.tobytes(), info['gt_label'])])
    assert sorted(seen) == list(range(1797))

    again = DATASETS.build(dict(type='DigitsDataset', split='val'))
    assert [again.get_data_info(i)['gt_label'] for i in range(len(val))] == [
        val.get_data_info(i)['gt_label'] for i in range(len(val))
    ]
    other = DATASETS.build(dict(type='DigitsDataset', split='val', seed=1))
    assert not all(
        np.array_equal(
            other.get_data_info(i)['img'], val.get_data_info(i)['img']
        )
        for i in range(len(val))
    )


def test_digits_through_the_pipeline():
    dataset = DATASETS.build(
        dict(
            type='DigitsDataset',
            split='val',
            pipeline=[dict(type='PackInputs')],
        )
    )
    sample = dataset[0]
    assert tuple(sample['inputs'].shape) == (1, 8, 8)
    assert (
        sample['data_samples'].gt_label.item()
        == dataset.get_data_info(0)['gt_label']
    )


def test_digits_rejects_unknown_split():
    with pytest.raises(ValueError, match='split'):
        DATASETS.build(dict(type='DigitsDataset', split='test'))


def write_batch(
    path: Path, images: np.ndarray, label_key: str, labels: list
) -> None:
    # The layout of the python version of CIFAR: rows of 3 colour planes.
    rows = images.transpose(0, 3, 1, 2).reshape(len(images), -1)
    with open(path, 'wb') as f:
        pickle.dump({'data': rows, label_key: labels}, f)


def make_cifar10(root: Path, per_batch: int = 2) -> dict:
    folder = root / 'cifar-10-batches-py'
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    made = {'train': ([], []), 'test': ([], [])}
    names = [f'data_batch_{i}' for i in range(1, 6)] + ['test_batch']
    for n, name in enumerate(names):
        images = rng.integers(0, 256, (per_batch, 32, 32, 3), np.uint8)
        labels = [(n + i) % 10 for i in range(per_batch)]
        write_batch(folder / name, images, 'labels', labels)
        split = 'test' if name == 'test_batch' else 'train'
        made[split][0].extend(images)
        made[split][1].extend(labels)
    return made


@pytest.mark.parametrize('split', ['train', 'test'])
def test_local_cifar10_reads_pickle_files(tmp_path, split):
    made = make_cifar10(tmp_path)
    dataset = DATASETS.build(
        dict(type='LocalCIFAR10', data_root=str(tmp_path), split=split)
    )
    images, labels = made[split]
    assert len(dataset) == len(images) == (10 if split == 'train' else 2)
    for i in range(len(dataset)):
        info = dataset.get_data_info(i)
        np.testing.assert_array_equal(info['img'], images[i])
        assert info['gt_label'] == labels[i]
    assert dataset.metainfo['classes'][:2] == ('airplane', 'automobile')


def test_local_cifar100_reads_fine_labels(tmp_path):
    folder = tmp_path / 'cifar-100-python'
    folder.mkdir()
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, (3, 32, 32, 3), np.uint8)
    write_batch(folder / 'test', images, 'fine_labels', [7, 42, 99])
    dataset = DATASETS.build(
        dict(
            type='LocalCIFAR100',
            data_root=str(tmp_path),
            split='test',
            pipeline=[dict(type='PackInputs')],
        )
    )
    assert len(dataset) == 3
    sample = dataset[2]
    assert sample['data_samples'].gt_label.item() == 99
    # PackInputs gives CHW; the stored image is HWC.
    np.testing.assert_array_equal(
        sample['inputs'].numpy(), images[2].transpose(2, 0, 1)
    )
    assert len(dataset.metainfo['classes']) == 100


def test_local_cifar_names_missing_files(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        DATASETS.build(dict(type='LocalCIFAR10', data_root=str(tmp_path)))
    message = str(info.value)
    assert str(tmp_path / 'cifar-10-batches-py') in message
    assert 'data_batch_1' in message
    assert 'docs/getting_started.md#data-preparation' in message


LOADERS = ['train_dataloader', 'val_dataloader', 'test_dataloader']


def missing_data(cfg: Config) -> list[str]:
    return find_missing_data(cfg, built_datasets(cfg, LOADERS))


def test_missing_imagenet_is_one_line_per_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = Config.fromfile(CONFIG_DIR / 't2t-vit-14_8xb64_in1k.py')
    assert missing_data(cfg) == [
        'Dataset not found: expected data/imagenet '
        '(see docs/getting_started.md#data-preparation).'
    ]
    (tmp_path / 'data' / 'imagenet' / 'train').mkdir(parents=True)
    assert missing_data(cfg) == [
        'Dataset not found: expected data/imagenet/val '
        '(see docs/getting_started.md#data-preparation).'
    ]
    (tmp_path / 'data' / 'imagenet' / 'val').mkdir()
    assert missing_data(cfg) == []


# Each form of mmpretrain's datasets: what the class reads, as it
# resolves it (data_root joined, ImageNet's split), relative to data_root
# (folders end with /); the first is then removed.
DATASET_FORMS = [
    (dict(type='CustomDataset', data_prefix='train'), 'train/'),
    (dict(type='CustomDataset', data_prefix=dict(img_path='im')), 'im/'),
    (dict(type='CustomDataset', ann_file='meta/t.txt'), 'meta/t.txt'),
    (dict(type='ImageNet', split='val'), 'val/'),
    (dict(type='ImageNet', split='train', data_prefix='mine'), 'mine/'),
    (
        dict(type='ImageNet', split='train', data_prefix=dict(img_path='m')),
        'm/',
    ),
    (
        dict(type='ImageNet', split='train', ann_file='l/t.txt'),
        'l/t.txt train/',
    ),
    (dict(type='ImageNet21k', split='train', data_prefix='mine'), 'mine/'),
    (dict(type='CIFAR10', data_prefix='c', download=False), 'c/'),
]


@pytest.mark.parametrize('dataset, reads', DATASET_FORMS)
def test_data_is_looked_for_where_the_dataset_class_looks(
    dataset, reads, tmp_path
):
    root = tmp_path / 'data'
    cfg = Config(
        dict(
            default_scope='mmpretrain',
            train_dataloader=dict(
                dataset=dict(data_root=str(root), pipeline=[], **dataset)
            ),
        )
    )
    paths = [root / read for read in reads.split()]
    for path, read in zip(paths, reads.split()):
        if read.endswith('/'):
            path.mkdir(parents=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text('')
    assert missing_data(cfg) == []
    first = paths[0]
    first.unlink() if first.is_file() else first.rmdir()
    page = (
        'custom_data.md'
        if dataset['type'] == 'CustomDataset'
        else 'getting_started.md#data-preparation'
    )
    expected = str(first)
    assert missing_data(cfg) == [
        f'Dataset not found: expected {expected} (see docs/{page}).'
    ]


def test_a_dataset_that_needs_no_data_root_is_not_refused(tmp_path):
    images = tmp_path / 'images'
    images.mkdir()
    cfg = Config(
        dict(
            default_scope='mmpretrain',
            # an absolute data_prefix: the class does not read data_root
            train_dataloader=dict(
                dataset=dict(
                    type='CustomDataset',
                    data_root=str(tmp_path / 'gone'),
                    data_prefix=str(images),
                    pipeline=[],
                )
            ),
            # mmpretrain's CIFAR10 downloads what is missing
            val_dataloader=dict(
                dataset=dict(
                    type='CIFAR10', data_root=str(tmp_path / 'c'), pipeline=[]
                )
            ),
        )
    )
    assert missing_data(cfg) == []


def test_imagenet_with_its_own_data_prefix_trains_through_every_tool(
    tmp_path,
):
    root = write_class_folders(tmp_path / 'data', 3, splits=('mytrain',))
    options = custom_options(root)
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        options += [
            f'{loader}.dataset.type=ImageNet',
            f'{loader}.dataset.split=train',
            f'{loader}.dataset.data_prefix=mytrain',
            f"{loader}.dataset.metainfo.classes=['c0','c1','c2']",
        ]
    for name, tool in (('ours', run_main), ('theirs', run_mmpretrain_tool)):
        result = tool(
            'train', CUSTOM, '--work-dir', tmp_path / name,
            '--cfg-options', *options,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-2000:]
        assert (tmp_path / name / 'epoch_1.pth').is_file()


def test_missing_cifar_folder_is_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = str(CONFIG_DIR / 't2t-vit-7_1xb128_cifar10-32px.py')
    cfg = Config.fromfile(config)
    assert missing_data(cfg) == [
        'Dataset not found: expected data/cifar10 (see '
        'docs/getting_started.md#data-preparation).'
    ]
    # the root is there, its fixed sub-folder is not: the dataset says so
    (tmp_path / 'data' / 'cifar10').mkdir(parents=True)
    assert missing_data(cfg) == []
    result = run_main('train', config, '--work-dir', tmp_path / 'w')
    assert result.returncode == 1
    folder = Path('data', 'cifar10', 'cifar-10-batches-py')
    assert one_line(result.stderr) == (
        f'LocalCIFAR10: expected data_batch_1, data_batch_2, data_batch_3, '
        f'data_batch_4, data_batch_5 in {folder} (the python version of '
        'the dataset); see docs/getting_started.md#data-preparation.'
    )


def test_missing_checkpoints_are_reported(tmp_path):
    cfg = Config.fromfile(
        CONFIG_DIR / 't2t-vit-14_in1k-pre_1xb64_cifar10-224px.py'
    )
    assert list(init_checkpoints(cfg.model)) == [
        'work_dirs/t2t-vit-14_8xb64_in1k/epoch_310.pth'
    ]
    # RunCheckHook, before the weights are initialised
    missing = tmp_path / 'missing.pth'
    result = run_main(
        'train', DEMO, '--work-dir', tmp_path / 'w', '--cfg-options',
        'model.backbone.init_cfg.type=Pretrained',
        f'model.backbone.init_cfg.checkpoint={missing}',
    )  # fmt: skip
    assert result.returncode == 1
    assert one_line(result.stderr) == (
        f'Checkpoint not found: expected {missing} '
        '(see docs/training.md#training).'
    )
