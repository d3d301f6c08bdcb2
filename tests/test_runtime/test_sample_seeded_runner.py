"""SampleSeededRunner: the training loader seeded per sample, the
checkpoint a resume starts from (the newest intact one of the work dir,
or load_from with resume='auto'), and runs of one process started in the
same second kept apart."""

import json
import logging
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from mmengine.config import Config
from mmengine.hooks import CheckpointHook
from mmengine.registry import RUNNERS

from t2t_plugin.runtime import (
    SampleSeededDataset,
    SampleSeededRunner,
    SampleSeedSampler,
    newest_intact_checkpoint,
)
from t2t_plugin.runtime.sample_seeded_runner import (
    checkpoint_folders,
    config_dump_path,
    start_point,
)

from ..helpers import (
    DEMO,
    DIGIT_CLASSES,
    ROOT,
    TINY_DEMO,
    as_dict,
    door,
    save_checkpoint,
)
from .recorded_draws import SEED, NumberedDataset, loader_config


def test_runner_seeds_the_training_loader_and_keeps_the_config(tmp_path):
    class Toy(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.zeros(1))

    runner = SampleSeededRunner.from_cfg(
        Config(
            dict(
                model=Toy(),
                work_dir=str(tmp_path),
                train_dataloader=loader_config(0, False),
                train_cfg=dict(by_epoch=True, max_epochs=1),
                optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1)),
                randomness=dict(seed=SEED),
            )
        )
    )
    loader = runner.train_dataloader
    assert isinstance(loader.dataset, SampleSeededDataset)
    assert isinstance(loader.dataset.dataset, NumberedDataset)
    assert isinstance(loader.sampler, SampleSeedSampler)
    assert type(loader.sampler.sampler).__name__ == 'DefaultSampler'
    assert loader.sampler.seed == SEED
    assert runner.cfg.train_dataloader.dataset.type == 'NumberedDataset'
    assert runner.cfg.train_dataloader.sampler.type == 'DefaultSampler'


def test_runs_started_in_the_same_second_keep_their_own_logs(
    tmp_path, monkeypatch
):
    """Two identical runs in one process, both started in the same second:
    each writes its own log and scalars, and they log the same losses
    (mmengine named both runs' logger, message hub and visualizer alike,
    and the second got the first's)."""
    import time

    import mmengine.runner.runner as runner_module

    start = time.time()

    class FrozenClock:
        def __getattr__(self, name):
            return getattr(time, name)

        @staticmethod
        def time():
            return start

    monkeypatch.setattr(runner_module, 'time', FrozenClock())
    losses = []
    for run in ('first', 'second'):
        cfg = Config.fromfile(
            ROOT / 'configs' / 't2t-vit-mini_1xb64_digits.py'
        )
        cfg.merge_from_dict(
            {
                'work_dir': str(tmp_path / run),
                'train_cfg.max_epochs': 1,
                'train_dataloader.dataset.indices': 128,
                'train_dataloader.batch_size': 32,
                'default_hooks.logger.interval': 2,
                'val_cfg': None,
                'val_dataloader': None,
                'val_evaluator': None,
                'default_hooks.checkpoint.save_best': None,
            }
        )
        RUNNERS.build(cfg).train()
        (scalars,) = (tmp_path / run).glob('*/vis_data/scalars.json')
        (log,) = (tmp_path / run).glob('*/*.log')
        assert 'Epoch(train) [1][4/4]' in log.read_text()
        losses.append(
            [
                json.loads(line)['loss']
                for line in scalars.read_text().splitlines()
            ]
        )
    assert losses[0] == losses[1] and len(losses[0]) == 2


@pytest.mark.parametrize('out_dir', [None, 'out', 'WORK'])
def test_checkpoint_folders_are_where_checkpoint_hook_saves(out_dir, tmp_path):
    """The run's local checkpoint folders: the work dir, and the folder
    mmengine's CheckpointHook saves to when that is another one (an
    out_dir equal to the work dir is not joined again); a remote out_dir
    adds no local folder."""
    work_dir = str(tmp_path / 'w')
    if out_dir in ('out', 'WORK'):
        out_dir = work_dir if out_dir == 'WORK' else str(tmp_path / 'out')
    hook = CheckpointHook(out_dir=out_dir)
    hook.before_train(
        SimpleNamespace(
            work_dir=work_dir,
            logger=logging.getLogger('checkpoint_folders'),
            message_hub=SimpleNamespace(runtime_info={}),
        )
    )
    default_hooks = dict(
        checkpoint=dict(type='CheckpointHook', out_dir=out_dir)
    )
    assert checkpoint_folders(work_dir, default_hooks) == list(
        dict.fromkeys([work_dir, hook.out_dir])
    )
    remote = dict(checkpoint=dict(type='CheckpointHook', out_dir='s3://b/o'))
    assert checkpoint_folders(work_dir, remote) == [work_dir]


def test_resume_auto_takes_the_newest_intact_checkpoint(one_epoch, tmp_path):
    work_dir = tmp_path / 'w'
    shutil.copytree(one_epoch, work_dir)
    whole = (work_dir / 'epoch_1.pth').read_bytes()
    (work_dir / 'epoch_2.pth').write_bytes(whole[: len(whole) // 2])
    (work_dir / 'last_checkpoint').write_text(str(work_dir / 'epoch_2.pth'))
    start = start_point(str(work_dir), None, True)
    assert (start.load_from, start.resumes) == (
        str(work_dir / 'epoch_1.pth'),
        True,
    )
    assert start.note.startswith(
        f'{work_dir / "last_checkpoint"} names {work_dir / "epoch_2.pth"}, '
        'which is cut short: not followed; resuming'
    )
    (work_dir / 'last_checkpoint').write_text('')
    start = start_point(str(work_dir), None, True)
    assert (start.load_from, start.note) == (
        str(work_dir / 'epoch_1.pth'),
        None,
    )
    assert newest_intact_checkpoint(str(tmp_path / 'none')) is None
    # mmengine's Runner would resume from the truncated file
    # last_checkpoint names: refused in one line; the config's runner
    # (SampleSeededRunner, as the OpenMMLab tools build it) takes the
    # intact one
    (work_dir / 'last_checkpoint').write_text(str(work_dir / 'epoch_2.pth'))
    options = dict(as_dict(TINY_DEMO), resume=True)
    options['train_cfg.max_epochs'] = 2
    assert str(door(DEMO, options, work_dir)) == (
        f'{work_dir / "epoch_2.pth"}, the checkpoint last_checkpoint names '
        f"in {work_dir}, is cut short, and mmengine's Runner would resume "
        'it; resume the file you mean with --resume PATH, or set '
        "runner_type = 'SampleSeededRunner' (it takes the newest intact "
        'checkpoint of the work dir).'
    )
    assert door(DEMO, options, work_dir, build=RUNNERS.build) is None
    assert (work_dir / 'epoch_2.pth').stat().st_size > len(whole) // 2


def test_resume_auto_falls_back_on_load_from(one_epoch, tmp_path):
    """resume='auto' (tools/train.py --resume with load_from set): the work
    dir's checkpoint where there is one, else load_from; mmengine's own
    Runner would resume load_from, and says so in one line."""
    work_dir = tmp_path / 'w'
    shutil.copytree(one_epoch, work_dir)
    (work_dir / 'last_checkpoint').write_text(str(work_dir / 'epoch_1.pth'))
    pretrained = save_checkpoint(tmp_path / 'pretrained.pth', DIGIT_CLASSES)
    options = dict(resume='auto', load_from=str(pretrained))

    def runner_in(folder: Path):
        cfg = Config.fromfile(DEMO)
        cfg.merge_from_dict(dict(options, work_dir=str(folder)))
        return RUNNERS.build(cfg)

    runner = runner_in(work_dir)
    assert (runner.load_from, runner.resumes) == (
        str(work_dir / 'epoch_1.pth'),
        True,
    )
    runner = runner_in(tmp_path / 'fresh')
    assert (runner.load_from, runner.resumes) == (str(pretrained), False)
    assert runner.cfg.resume is False
    assert str(door(DEMO, options, tmp_path / 'door')) == (
        "resume='auto' is SampleSeededRunner's: mmengine's Runner would "
        f'resume the run of load_from={pretrained} instead of the work '
        "dir's; set runner_type = 'SampleSeededRunner' or leave load_from "
        'out.'
    )


def test_the_saved_config_is_where_mmengine_writes_it(tmp_path):
    """config_dump_path asks mmengine's Runner.dump_config where it writes
    the config: the config file's name in the work dir, else the run's
    timestamp."""
    source = tmp_path / 'cfgs' / 'run.py'
    source.parent.mkdir()
    source.write_text('a = 1\n')
    runner = SimpleNamespace(
        cfg=Config.fromfile(str(source)),
        work_dir=str(tmp_path / 'work'),
        timestamp='20260101_000000',
    )
    assert config_dump_path(runner) == str(tmp_path / 'work' / 'run.py')
    runner.cfg = Config(dict(a=1))
    assert config_dump_path(runner) == str(
        tmp_path / 'work' / '20260101_000000.py'
    )
    assert not (tmp_path / 'work').exists()  # asked, nothing written
