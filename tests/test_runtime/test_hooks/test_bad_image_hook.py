"""BadImageHook: the images a run cannot use are replaced by the next
usable one, counted in one line per epoch, evaluation or test, and stop
the run past a limit."""

import time
from pathlib import Path

import pytest
from mmengine.config import Config
from mmpretrain.registry import DATASETS

from t2t_plugin.runtime import SkipBadImages
from t2t_plugin.runtime.hooks import BadImageHook, TooManyBadImagesError

from ...helpers import (
    CUSTOM,
    as_dict,
    custom_options,
    fake_runner,
    plain_runner,
    run_main,
    write_class_folders,
    write_image,
)
from ...test_datasets.image_folders import (
    lite_options,
    train_through_both_tools,
)


def bad_image_folder(root: Path) -> None:
    for name in ('a/good0', 'a/good1', 'b/good2'):
        write_image(root / f'{name}.png', (8, 8), content='flat', mode='L')
    (root / 'a' / 'empty.png').write_bytes(b'')
    (root / 'a' / 'text.png').write_text('not an image')
    data = (root / 'a' / 'good0.png').read_bytes()
    (root / 'b' / 'truncated.png').write_bytes(data[: len(data) // 2])
    write_image(root / 'b' / 'odd.png', (9, 9), content='flat', mode='L')


@pytest.mark.parametrize('test_mode', [False, True])
def test_bad_images_are_replaced_counted_and_limited(test_mode, tmp_path):
    bad_image_folder(tmp_path)
    dataset = DATASETS.build(
        dict(
            type='CustomDataset',
            data_root=str(tmp_path),
            test_mode=test_mode,
            pipeline=[
                dict(type='LoadImageFromFile', color_type='grayscale'),
                dict(type='PackInputs'),
            ],
        )
    )
    wrapper = SkipBadImages.wrap(dataset, in_channels=1, size_multiple=2)
    assert SkipBadImages.wrap(dataset) is wrapper  # once
    names = [
        Path(dataset[i]['data_samples'].img_path).name
        for i in range(len(dataset))
    ]
    # a/empty a/good0 a/good1 a/text b/good2 b/odd b/truncated: each bad
    # one is replaced by the next usable one (b/truncated by a/good0)
    assert names == [
        'good0.png',
        'good0.png',
        'good1.png',
        'good2.png',
        'good2.png',
        'good0.png',
        'good0.png',
    ]
    time.sleep(0.2)  # the queue's feeder thread
    reports = wrapper.drain()
    assert {Path(report.path).name for report in reports} == {
        'empty.png',
        'odd.png',
        'text.png',
        'truncated.png',
    }
    # b/odd tries b/truncated and a/empty in its place, b/truncated tries
    # a/empty: 7 bad images met, 4 samples replaced
    assert len(reports) == 7
    assert sorted(
        Path(report.path).name for report in reports if report.asked_for
    ) == ['empty.png', 'odd.png', 'text.png', 'truncated.png']
    odd = next(r.problem for r in reports if r.path.endswith('odd.png'))
    assert (
        odd == '9x9 pixels after the pipeline, not multiples of the stride 2'
    )
    hook = BadImageHook(max_bad_images=3)
    hook.wrappers = {'test_dataloader': [wrapper]}
    for report in reports:
        wrapper.reports.put(report)
    time.sleep(0.2)
    with pytest.raises(TooManyBadImagesError, match='4 different images'):
        hook.after_test_iter(fake_runner(), 0)


def test_a_bad_validation_image_is_skipped_and_counted(tmp_path):
    root = write_class_folders(tmp_path / 'data', suffix='.png')
    empty = root / 'val' / 'c1' / '0.png'
    empty.write_bytes(b'')
    options = custom_options(root) + ['train_cfg.val_interval=1']
    ours = run_main(
        'train', CUSTOM, '--work-dir', tmp_path / 'w', '--cfg-options',
        *options,
    )  # fmt: skip
    assert ours.returncode == 0, ours.stderr[-2000:]
    assert (
        'Evaluation: skipped 1 sample(s) from 1 image(s) that could not be '
        f'used (each replaced by the next image): {empty}'
    ) in ours.stdout
    checkpoint = tmp_path / 'w' / 'epoch_1.pth'
    tested = run_main(
        'test', CUSTOM, checkpoint, '--work-dir', tmp_path / 'w',
        '--cfg-options', *options,
    )  # fmt: skip
    assert tested.returncode == 0, tested.stderr[-2000:]
    assert 'Test: skipped 1 sample(s) from 1 image(s)' in tested.stdout
    assert 'accuracy/top1: ' in tested.stdout
    # a Runner of the config, as mmpretrain's test.py builds it
    cfg = Config.fromfile(CUSTOM)
    cfg.merge_from_dict(as_dict(options))
    cfg.merge_from_dict(
        dict(work_dir=str(tmp_path / 'd'), load_from=str(checkpoint))
    )
    runner = plain_runner(cfg)
    runner.test()
    hook = next(h for h in runner.hooks if isinstance(h, BadImageHook))
    assert hook.bad == {str(empty)}


def test_bad_images_in_a_row_count_once_each(tmp_path):
    """Three bad training images in a row: the first sample tries all
    three before a usable one, yet an epoch that reads each sample once
    skipped 3 samples, not 3 + 2 + 1."""
    root = write_class_folders(tmp_path / 'data')
    bad = []
    for index in range(3):
        path = root / 'train' / 'c1' / f'bad{index}.jpg'
        data = write_image(path, (32, 32), index, 'noise').read_bytes()
        path.write_bytes(data[: len(data) // 2])
        bad.append(str(path))
    for done in train_through_both_tools(tmp_path, lite_options(root)):
        assert done.returncode == 0, done.stderr[-3000:]
        assert (
            'Epoch 1: skipped 3 sample(s) from 3 image(s) that could not be '
            f'used (each replaced by the next image): {", ".join(bad)}'
        ) in done.stdout
