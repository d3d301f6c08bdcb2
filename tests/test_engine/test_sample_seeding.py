"""Per-sample seeding of random augmentation (SampleSeedSampler,
SampleSeededDataset, SampleSeededRunner): fresh draws every epoch, the
same draws whatever the number of workers and whether they persist."""

import json
import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.dataset import BaseDataset
from mmengine.model import BaseModel
from mmengine.registry import DATASETS, RUNNERS, TRANSFORMS
from mmengine.runner import Runner

from t2t_plugin.datasets import (
    SampleSeededDataset,
    SampleSeedSampler,
    own_generator,
    sample_seed,
    sample_seeded_loader,
)
from t2t_plugin.engine import SampleSeededRunner

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = 12
SEED = 3
DEMO_CONFIG = 't2t-vit-mini_1xb64_digits.py'
KINDS = ('python', 'numpy', 'torch')


def draw_three() -> tuple:
    """What a random transform draws: python, numpy and torch numbers."""
    return (random.random(), float(np.random.rand()), torch.rand(()).item())


@TRANSFORMS.register_module(force=True)
class RecordDraws:
    """A transform that keeps the random numbers it drew in the sample."""

    def __call__(self, results: dict) -> dict:
        results.update(zip(KINDS, draw_three()))
        return results


@DATASETS.register_module(force=True)
class NumberedDataset(BaseDataset):
    def load_data_list(self) -> list:
        return [dict(number=i) for i in range(SAMPLES)]


def loader_config(workers: int, persistent: bool) -> dict:
    return dict(
        batch_size=4,
        num_workers=workers,
        persistent_workers=persistent,
        dataset=dict(
            type='NumberedDataset', pipeline=[dict(type='RecordDraws')]
        ),
        sampler=dict(type='DefaultSampler', shuffle=True),
    )


def seeded_loader(config: dict):
    """The training loader as SampleSeededRunner builds it."""
    return own_generator(
        Runner.build_dataloader(sample_seeded_loader(config), seed=SEED)
    )


def draws_per_epoch(loader, epochs: int = 2) -> list:
    """{(sample number, place in the epoch): draws} of each epoch."""
    result = []
    for epoch in range(epochs):
        loader.sampler.set_epoch(epoch)
        draws = {}
        for batch in loader:
            columns = [batch[kind] for kind in KINDS]
            for number, *drawn in zip(batch['number'], *columns):
                draws[number, len(draws)] = tuple(drawn)
        result.append(draws)
    return result


def test_mmengine_workers_replay_the_same_draws_every_epoch():
    """The fault fixed here: seeded once per worker, non-persistent
    workers draw the same numbers in epoch 2 as in epoch 1."""
    loader = Runner.build_dataloader(loader_config(2, False), seed=SEED)
    first, second = draws_per_epoch(loader)
    assert Counter(first.values()) == Counter(second.values())


def test_draws_are_fresh_every_epoch_with_non_persistent_workers():
    loader = seeded_loader(loader_config(2, False))
    first, second = draws_per_epoch(loader)
    by_number = [
        {number: drawn for (number, _), drawn in epoch.items()}
        for epoch in (first, second)
    ]
    assert sorted(by_number[0]) == sorted(by_number[1]) == list(range(12))
    for number in range(SAMPLES):
        assert by_number[0][number] != by_number[1][number]
    assert not set(first.values()) & set(second.values())


def test_draws_are_those_of_the_sample_seed():
    """Each sample draws what a generator seeded with
    sample_seed(seed, epoch, rank, place, index) gives."""
    loader = seeded_loader(loader_config(0, False))
    for epoch, draws in enumerate(draws_per_epoch(loader)):
        for (number, place), drawn in draws.items():
            seed = sample_seed(SEED, epoch, 0, place, number)
            random.seed(seed)
            np.random.seed(seed % 2**32)
            torch.manual_seed(seed)
            assert drawn == draw_three()


@pytest.mark.parametrize(
    'workers, persistent', [(1, False), (1, True), (2, False), (2, True)]
)
def test_draws_do_not_depend_on_the_workers(workers, persistent):
    reference = draws_per_epoch(seeded_loader(loader_config(0, False)))
    loader = seeded_loader(loader_config(workers, persistent))
    assert draws_per_epoch(loader) == reference


def test_training_process_generators_do_not_move():
    """With 0 workers the pipeline runs in the training process, and
    torch's loader draws a base seed for the workers at each epoch: none
    of it may move the process's own stream (dropout, drop path, mixup),
    or a resumed run with persistent workers would draw differently."""
    for workers, persistent in ((0, False), (2, True)):
        loader = seeded_loader(loader_config(workers, persistent))
        torch.manual_seed(5)
        np.random.seed(5)
        random.seed(5)
        draws_per_epoch(loader)
        after = draw_three()
        torch.manual_seed(5)
        np.random.seed(5)
        random.seed(5)
        assert after == draw_three()


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


@pytest.mark.parametrize(
    'config',
    [
        # mmdet's and mmseg's registries need those packages installed
        pytest.param(
            str(path.relative_to(ROOT)),
            marks=[pytest.mark.dense] if pattern != 'configs/*.py' else [],
        )
        for pattern in ('configs/*.py', 'configs/det/*.py', 'configs/seg/*.py')
        for path in sorted(ROOT.glob(pattern))
    ],
)
def test_every_config_seeds_per_sample_and_saves_the_random_state(config):
    """In every toolbox's registry scope, so that mmpretrain's, mmdet's
    and mmseg's own tools/train.py build this runner too."""
    cfg = Config.fromfile(ROOT / config)
    with RUNNERS.switch_scope_and_registry(cfg.get('default_scope')) as found:
        assert found.get(cfg.runner_type) is SampleSeededRunner
    assert cfg.default_hooks.random_state.type == 'RandomStateHook'


class RecordingModel(BaseModel):
    """Keeps the sample numbers and draws of every training batch."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.batches = []

    def forward(self, mode='loss', **batch):
        self.batches.append(
            list(zip(batch['number'], *(batch[kind] for kind in KINDS)))
        )
        return dict(loss=self.weight.sum() * 0 + self.weight.square())


def iteration_run(work_dir, resume_from=None) -> list:
    """6 iterations of an iteration-based loop (InfiniteSampler, 2
    persistent workers, no config seed), a checkpoint at iteration 3."""
    config = loader_config(2, True)
    config['sampler'] = dict(type='InfiniteSampler', shuffle=True)
    model = RecordingModel()
    runner = SampleSeededRunner(
        model=model,
        work_dir=str(work_dir),
        train_dataloader=config,
        train_cfg=dict(by_epoch=False, max_iters=6),
        optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1)),
        default_hooks=dict(
            checkpoint=dict(type='CheckpointHook', interval=3, by_epoch=False)
        ),
        custom_hooks=[dict(type='RandomStateHook')],
        randomness=dict(seed=None),
        load_from=resume_from,
        resume=resume_from is not None,
    )
    runner.train()
    return model.batches


def test_iteration_based_run_without_seed_resumes_exactly(tmp_path):
    """The loop starts its loader before the resume restores the seeds:
    the sampler and the batches asked for already follow them again."""
    whole = iteration_run(tmp_path / 'whole')
    resumed = iteration_run(
        tmp_path / 'resumed', resume_from=str(tmp_path / 'whole/iter_3.pth')
    )
    assert len(whole) == 6 and len(resumed) == 3
    assert resumed == whole[3:]


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


def test_samplers_known_to_be_exact_are_found_by_class():
    """The samplers whose order follows the seed and the epoch alone are
    the classes themselves: a subclass may order otherwise and gets the
    warning."""
    from mmengine.dataset import DefaultSampler, InfiniteSampler

    from t2t_plugin.engine.hooks.random_state_hook import _is_exact

    dataset = NumberedDataset(pipeline=[])

    class OwnOrderSampler(DefaultSampler):
        pass

    for exact in (
        InfiniteSampler(dataset, seed=SEED),
        torch.utils.data.RandomSampler(dataset),
    ):
        assert _is_exact(exact)
    assert _is_exact(DefaultSampler(dataset, seed=SEED))
    assert not _is_exact(OwnOrderSampler(dataset, seed=SEED))
    assert not _is_exact(
        SampleSeedSampler(dict(type='DefaultSampler'), dataset)
    )
