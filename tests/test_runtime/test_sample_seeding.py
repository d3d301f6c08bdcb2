"""Per-sample seeding of random augmentation (SampleSeedSampler,
SampleSeededDataset, SampleSeededRunner): fresh draws every epoch, the
same draws whatever the number of workers and whether they persist."""

import random
from collections import Counter

import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.registry import RUNNERS
from mmengine.runner import Runner

from t2t_plugin.runtime import (
    SampleSeededRunner,
    own_generator,
    sample_seed,
    sample_seeded_loader,
)

from ..helpers import ROOT
from .recorded_draws import KINDS, SAMPLES, SEED, draw_three, loader_config


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
    assert cfg.default_hooks.exact_resume.type == 'ExactResumeHook'
