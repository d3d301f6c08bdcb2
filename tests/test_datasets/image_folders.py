"""The options that point the small-image recipe at class folders
(``helpers.write_class_folders``) for one short epoch, and its training
through our tools/train.py and mmpretrain's."""

from pathlib import Path

from tests.helpers import ROOT, run_main, run_mmpretrain_tool

LITE = str(ROOT / 'configs' / 't2t-vit-lite_1xb64_custom-32px.py')


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
