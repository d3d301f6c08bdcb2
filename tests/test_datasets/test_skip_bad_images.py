"""SkipBadImages and the datasets it guards: an unusable image is skipped
and counted, whatever wraps the dataset that reads it (the sample-seeding
wrapper of our runner, mmengine's wrappers, in either order)."""

from pathlib import Path

import mmcv
from mmengine.dataset import ConcatDataset, RepeatDataset
from mmpretrain.registry import DATASETS
from PIL import Image

from t2t_plugin.runtime import SampleSeededDataset, SkipBadImages
from t2t_plugin.runtime.skip_bad_images import base_datasets, oversized_image

from ..helpers import (
    run_main,
    run_mmpretrain_tool,
    write_class_folders,
    write_image,
)
from .image_folders import LITE, lite_options


def truncated_jpeg(path: Path) -> Path:
    """The first half of a JPEG, as an interrupted copy leaves it."""
    data = write_image(path, (32, 32), 7, 'noise').read_bytes()
    path.write_bytes(data[: len(data) // 2])
    # the loader of our configs (OpenCV through mmcv) cannot decode it
    assert mmcv.imfrombytes(path.read_bytes()) is None
    return path


def folder_dataset(root: Path) -> object:
    return DATASETS.build(
        dict(
            type='CustomDataset',
            data_root=str(root),
            pipeline=[dict(type='LoadImageFromFile'), dict(type='PackInputs')],
        )
    )


def test_wrappers_never_hide_the_dataset_that_reads_the_files(tmp_path):
    one = folder_dataset(write_class_folders(tmp_path / 'one'))
    two = folder_dataset(write_class_folders(tmp_path / 'two'))
    concat = SampleSeededDataset(ConcatDataset([one, two]))
    assert list(base_datasets(concat)) == [one, two]
    # a guard put in before the seeding wrapper is found through it
    guard = SkipBadImages.wrap(one)
    repeat = SampleSeededDataset(RepeatDataset(one, times=2))
    assert [SkipBadImages.wrap(d) for d in base_datasets(repeat)] == [guard]
    # the wrapper has no pipeline of its own to be taken for the dataset's
    assert not hasattr(SampleSeededDataset(one), 'pipeline')
    assert SampleSeededDataset(one).metainfo == one.metainfo


def test_a_bad_image_behind_the_sample_seeding_wrapper_is_skipped(tmp_path):
    root = write_class_folders(tmp_path / 'data')
    bad = truncated_jpeg(root / 'train' / 'c1' / 'bad.jpg')
    dataset = SampleSeededDataset(folder_dataset(root / 'train'))
    (wrapper,) = [SkipBadImages.wrap(d) for d in base_datasets(dataset)]
    # c0/0 c0/1 c1/0 c1/1 c1/bad c2/0 c2/1: the bad one is replaced by the
    # next image
    names = [
        Path(dataset[i]['data_samples'].img_path).relative_to(root / 'train')
        for i in range(len(dataset))
    ]
    assert [str(name) for name in names] == [
        'c0/0.jpg', 'c0/1.jpg', 'c1/0.jpg', 'c1/1.jpg',
        'c2/0.jpg', 'c2/0.jpg', 'c2/1.jpg',
    ]  # fmt: skip
    assert wrapper.reports.get(timeout=5) == (
        str(bad),
        f'failed to load image: {bad}',
        True,
    )


def test_a_truncated_training_jpeg_is_skipped_through_every_door(tmp_path):
    """Our config trains with SampleSeededRunner, which wraps the training
    dataset: our tools/train.py and mmpretrain's, which builds the
    config's runner_type, both train on and count the image."""
    root = write_class_folders(tmp_path / 'data')
    bad = truncated_jpeg(root / 'train' / 'c1' / 'bad.jpg')
    summary = (
        'Epoch 1: skipped 1 sample(s) from 1 image(s) that could not be '
        f'used (each replaced by the next image): {bad}'
    )
    for name, run in (('ours', run_main), ('theirs', run_mmpretrain_tool)):
        work_dir = tmp_path / name
        done = run(
            'train', LITE, '--work-dir', work_dir,
            '--cfg-options', *lite_options(root),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        assert 'Traceback' not in done.stderr
        assert f'Skipped {bad}: failed to load image: {bad}' in done.stdout
        assert summary in done.stdout
        assert (work_dir / 'epoch_1.pth').is_file()


def test_an_image_too_large_to_decode_is_skipped_from_its_header(tmp_path):
    root = write_class_folders(tmp_path / 'data')
    huge = write_image(
        root / 'val' / 'c2' / 'huge.png', (20000, 20000), content='header'
    )
    limit = Image.MAX_IMAGE_PIXELS  # Pillow's default: 89478485
    assert limit < 20000 * 20000
    problem = (
        f'more pixels than the {limit} that are decoded at most '
        '(PIL.Image.MAX_IMAGE_PIXELS); resize the image'
    )
    assert oversized_image(str(huge)) == problem
    # between the limit and twice it, where Pillow itself only warns
    between = write_image(
        tmp_path / 'between.png', (10000, 10000), content='header'
    )
    assert limit < 10000 * 10000 < 2 * limit
    assert oversized_image(str(between)) == problem
    assert oversized_image(str(root / 'val' / 'c2' / '0.jpg')) is None
    options = lite_options(root, 'train_cfg.val_interval=1')
    for name, run in (('ours', run_main), ('theirs', run_mmpretrain_tool)):
        done = run(
            'train', LITE, '--work-dir', tmp_path / name,
            '--cfg-options', *options,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        assert f'Skipped {huge}: {problem}' in done.stdout
        assert (
            'Evaluation: skipped 1 sample(s) from 1 image(s) that could not '
            f'be used (each replaced by the next image): {huge}'
        ) in done.stdout


ITERATION_BASED = """
_base_ = [{lite!r}]
train_cfg = dict(
    _delete_=True, type='IterBasedTrainLoop', max_iters=6, val_interval=6
)
param_scheduler = []
default_hooks = dict(checkpoint=dict(by_epoch=False, interval=6))
train_dataloader = dict(
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='InfiniteSampler', shuffle=True),
)
"""


def test_an_iteration_based_run_with_workers_skips_bad_images(tmp_path):
    """Such a loop starts its loader's workers when it is built, before
    any hook runs: the guard must be in the datasets by then."""
    root = write_class_folders(tmp_path / 'data')
    bad = root / 'train' / 'c1' / 'bad.jpg'
    bad.write_bytes(b'not a JPEG')
    config = tmp_path / 'iteration_based.py'
    config.write_text(ITERATION_BASED.format(lite=LITE))
    options = [
        f'{loader}.dataset.data_root={root}'
        for loader in ('train_dataloader', 'val_dataloader')
    ] + ['train_dataloader.batch_size=2']
    for name, run in (('ours', run_main), ('theirs', run_mmpretrain_tool)):
        done = run(
            'train', config, '--work-dir', tmp_path / name,
            '--cfg-options', *options,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        summary = next(
            line for line in done.stdout.splitlines() if 'Training: ' in line
        )
        assert summary.endswith(
            'image(s) that could not be used (each replaced by the next '
            f'image): {bad}'
        )
        assert ' from 1 image(s) ' in summary
        assert (tmp_path / name / 'iter_6.pth').is_file()
