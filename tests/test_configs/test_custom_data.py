"""The guide's three configs for your own data (docs/custom_data.md), run
through tools/train.py and tools/test.py on a few images written here:
an image folder for classification, COCO-format detection data and label
PNGs for segmentation. Each trains a few iterations, evaluates, prints its
metric and draws predictions with --show-dir.
"""

import importlib
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from ..helpers import (
    ROOT,
    loader_options,
    run_main,
    write_class_folders,
    write_coco,
)

CLS_CONFIGS = (
    ROOT / 'configs' / 't2t-vit-lite_1xb64_custom-32px.py',
    ROOT / 'configs' / 't2t-vit-7_1xb64_custom-64px.py',
)
DET_CONFIG = (
    ROOT / 'configs' / 'det' / 'retinanet_t2t-vit-7_fpn_24e_custom-coco.py'
)
SEG_CONFIG = (
    ROOT / 'configs' / 'seg' / 'upernet_t2t-vit-7_1xb4-4k_custom-256x256.py'
)


def require(toolbox: str) -> None:
    """Skip without mmdet / mmseg (``make install-dense`` installs them)."""
    try:
        importlib.import_module(f'{toolbox}.models')
    except Exception as error:  # mmcv without compiled ops raises many kinds
        pytest.skip(f'{toolbox} is not importable ({error})')


def run_ok(tool: str, *args: str) -> subprocess.CompletedProcess:
    """``tools/<tool>`` run in this process; it must succeed."""
    result = run_main(tool.removesuffix('.py'), *args)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def logged_metric(output: str, name: str) -> float:
    """The last value of ``name`` in mmengine's log or test.py's lines."""
    values = re.findall(rf'{re.escape(name)}: (-?[\d.]+(?:e[-+]\d+)?)', output)
    assert values, f'{name} not in the output'
    return float(values[-1])


def drawn_images(folder: Path) -> list:
    return sorted(
        p.name for p in folder.rglob('*') if p.suffix in ('.png', '.jpg')
    )


# -------------------------------------------------------- classification --


@pytest.mark.parametrize('config', CLS_CONFIGS, ids=lambda path: path.stem)
def test_classification_on_an_image_folder(tmp_path, config):
    # grey and colour images of sizes that the soft splits cannot tile
    # until they are resized; unique names: mmpretrain's --show-dir files
    # are named after the image alone, whatever its folder
    write_class_folders(
        tmp_path / 'data', ('circle', 'square', 'stripes'),
        file_name='{class_name}{index}', suffix='.png',
        size=[(53, 71), (90, 47)], mode=['L', 'RGB'],
    )  # fmt: skip
    num_val = 3 * 2
    work_dir = tmp_path / 'work'
    options = loader_options(
        tmp_path / 'data',
        'train_dataloader',
        'val_dataloader',
        'test_dataloader',
    ) + [
        'train_cfg.max_epochs=1',
        'train_cfg.val_interval=1',
        'train_dataloader.batch_size=3',
    ]
    train = run_ok(
        'train.py',
        str(config),
        '--work-dir',
        str(work_dir),
        '--cfg-options',
        *options,
    )
    accuracy = logged_metric(train.stdout + train.stderr, 'accuracy/top1')
    # a share of the validation images: every one of them was scored
    correct = accuracy / 100 * num_val
    assert correct == pytest.approx(round(correct), abs=1e-3)

    test = run_ok(
        'test.py',
        str(config),
        str(work_dir / 'epoch_1.pth'),
        '--work-dir',
        str(work_dir),
        '--show-dir',
        'vis',
        '--interval',
        '2',
        '--cfg-options',
        *options,
    )
    assert logged_metric(test.stdout, 'accuracy/top1') == pytest.approx(
        accuracy, abs=1e-3
    )
    # images 0, 2 and 4 of six, in folder order, named after their class
    assert drawn_images(work_dir / 'vis') == [
        'circle_circle0_0.png',
        'square_square0_0.png',
        'stripes_stripes0_0.png',
    ]


# ------------------------------------------------------------- detection --


@pytest.mark.slow
def test_detection_on_coco_format_data(tmp_path):
    require('mmdet')
    root = tmp_path / 'data'
    write_coco(root)
    work_dir = tmp_path / 'work'
    options = loader_options(
        root, 'train_dataloader', 'val_dataloader', 'test_dataloader'
    ) + [
        f'val_evaluator.ann_file={root}/annotations/val.json',
        f'test_evaluator.ann_file={root}/annotations/val.json',
        'model.backbone.init_cfg=None',
        # 128-pixel inputs keep a CPU step near a second.
        'train_dataloader.dataset.pipeline.2.scale=(128,128)',
        'val_dataloader.dataset.pipeline.1.scale=(128,128)',
        'test_dataloader.dataset.pipeline.1.scale=(128,128)',
        # two iterations: a warm-up to match, and no score threshold, as
        # the scores of an untrained head are all near its 0.01 prior
        'train_cfg.max_epochs=1',
        'param_scheduler.0.end=2',
        'model.test_cfg.score_thr=0.0',
        'train_dataloader.batch_size=1',
    ]
    train = run_ok(
        'train.py',
        str(DET_CONFIG),
        '--work-dir',
        str(work_dir),
        '--verbose',  # the optimizer constructor's INFO line
        '--cfg-options',
        *options,
    )
    log = train.stdout + train.stderr
    assert 0 <= logged_metric(log, 'coco/bbox_mAP') <= 1
    # the layer-decay range of T2T-ViT-7 (9 depths) and the base lr
    assert 'base_lr x 0.1 (T2T module) up to base_lr x 1' in log
    assert logged_metric(log, 'base_lr') == pytest.approx(1e-4)

    test = run_ok(
        'test.py',
        str(DET_CONFIG),
        str(work_dir / 'epoch_1.pth'),
        '--work-dir',
        str(work_dir),
        '--show-dir',
        'vis',
        '--cfg-options',
        *options,
    )
    assert 0 <= logged_metric(test.stdout, 'coco/bbox_mAP') <= 1
    # every test image, straight in <work_dir>/vis
    assert drawn_images(work_dir / 'vis') == ['val_0.jpg', 'val_1.jpg']


# ---------------------------------------------------------- segmentation --


def write_label_pngs(root: Path, num_images: int = 3) -> None:
    """Images and label PNGs of three classes (pixel value = class)."""
    import mmcv

    rng = np.random.default_rng(0)
    for split in ('train', 'val'):
        (root / 'images' / split).mkdir(parents=True)
        (root / 'annotations' / split).mkdir(parents=True)
        for index in range(num_images):
            label = np.zeros((64, 96), np.uint8)
            label[32:, :48] = 1
            label[:20, 48:] = 2
            image = np.stack(
                [label * 90 + rng.integers(0, 40, label.shape)] * 3, axis=-1
            ).astype(np.uint8)
            mmcv.imwrite(image, str(root / 'images' / split / f'{index}.jpg'))
            mmcv.imwrite(
                label, str(root / 'annotations' / split / f'{index}.png')
            )


@pytest.mark.slow
def test_segmentation_on_label_pngs(tmp_path):
    require('mmseg')
    root = tmp_path / 'data'
    write_label_pngs(root)
    work_dir = tmp_path / 'work'
    options = loader_options(
        root, 'train_dataloader', 'val_dataloader', 'test_dataloader'
    ) + [
        'model.backbone.init_cfg=None',
        'model.data_preprocessor.size=(64,64)',
        'train_dataloader.dataset.pipeline.2.scale=(128,64)',
        'train_dataloader.dataset.pipeline.3.crop_size=(64,64)',
        # the images' own 64x96 instead of 256x384: UPerNet's 512-channel
        # convolutions at a quarter of the input size otherwise cost most
        # of the test, and no assertion depends on the size
        'val_dataloader.dataset.pipeline.1.scale=(128,64)',
        'test_dataloader.dataset.pipeline.1.scale=(128,64)',
        'train_cfg.max_iters=2',
        'train_cfg.val_interval=2',
        'param_scheduler.0.end=1',
        'param_scheduler.1.begin=1',
        'param_scheduler.1.end=2',
        'train_dataloader.batch_size=2',
    ]
    train = run_ok(
        'train.py',
        str(SEG_CONFIG),
        '--work-dir',
        str(work_dir),
        '--cfg-options',
        *options,
    )
    miou = logged_metric(train.stdout + train.stderr, 'mIoU')
    assert 0 <= miou <= 100

    test = run_ok(
        'test.py',
        str(SEG_CONFIG),
        str(work_dir / 'iter_2.pth'),
        '--work-dir',
        str(work_dir),
        '--show-dir',
        'vis',
        '--interval',
        '2',
        '--cfg-options',
        *options,
    )
    assert logged_metric(test.stdout, 'mIoU') == pytest.approx(miou, abs=0.01)
    # mmseg draws batches N, 2N, ... (1-based): the second of three images
    drawn = drawn_images(work_dir / 'vis' / 'vis_data' / 'vis_image')
    assert drawn == ['test_1.jpg_0.png']
