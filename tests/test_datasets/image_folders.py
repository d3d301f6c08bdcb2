"""Class folders of small JPEGs for the data tests, the options that
point the small-image recipe at them for one short epoch, and its training
through our tools/train.py and mmpretrain's."""

import io
from pathlib import Path

import numpy as np
from PIL import Image

from tests.helpers import ROOT, run_main, run_mmpretrain_tool

LITE = str(ROOT / 'configs' / 't2t-vit-lite_1xb64_custom-32px.py')


def write_jpeg(path: Path, seed: int) -> bytes:
    """A 32x32 colour JPEG of random pixels; its bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format='JPEG')
    path.write_bytes(buffer.getvalue())
    return buffer.getvalue()


def class_folders(root: Path, classes: int = 3, per_class: int = 2) -> Path:
    """``train/`` and ``val/`` of ``classes`` folders ``c0``, ``c1``, ..."""
    for split in ('train', 'val'):
        for label in range(classes):
            for index in range(per_class):
                name = root / split / f'c{label}' / f'{index}.jpg'
                write_jpeg(name, seed=100 * label + index)
    return root


def lite_options(root: Path, *extra: str) -> list:
    """``--cfg-options`` of the small-image recipe on ``root``, one epoch."""
    options = ['train_cfg.max_epochs=1', 'train_dataloader.batch_size=2']
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        options.append(f'{loader}.dataset.data_root={root}')
    return options + list(extra)


def train_through_both_tools(tmp_path: Path, options: list) -> tuple:
    """The small-image recipe with ``options``, trained by our
    ``tools/train.py`` and by mmpretrain's (work dirs ``ours`` and
    ``theirs`` under ``tmp_path``); both results."""
    return tuple(
        run(
            'train',
            LITE,
            '--work-dir',
            tmp_path / name,
            '--cfg-options',
            *options,
        )  # fmt: skip
        for run, name in ((run_main, 'ours'), (run_mmpretrain_tool, 'theirs'))
    )
