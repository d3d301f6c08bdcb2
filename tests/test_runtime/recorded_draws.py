"""A dataset of numbered samples whose transform keeps the random numbers
it drew, and its loader: what the per-sample seeding tests
(test_sample_seeding.py, test_sample_seeded_runner.py,
test_hooks/test_exact_resume_hook.py) run."""

import random

import numpy as np
import torch
from mmengine.dataset import BaseDataset
from mmengine.registry import DATASETS, TRANSFORMS

SAMPLES = 12
SEED = 3
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
