"""Random augmentation drawn from a seed of each sample, not of a worker.

mmengine seeds each data-loader worker once: workers replay the same numbers
every epoch, or draw numbers no checkpoint holds. Here each index carries a
hash of (run seed, epoch, rank, place in the epoch, index), from which the
dataset reseeds ``random``, numpy and torch: a resumed run draws what the
uninterrupted one does, whatever the workers.
"""

import hashlib
import random
import struct
from collections.abc import Iterator
from typing import Any, Optional, Union

import numpy as np
import torch
from mmengine.dist import get_rank, sync_random_seed
from mmengine.registry import DATA_SAMPLERS, DATASETS
from torch.utils.data import Sampler, get_worker_info

from ..option_checks import check_int


class SeededIndex(int):
    """A dataset index that carries the seed (in ``[0, 2**64)``) of its
    sample's random draws; an ``int`` to every sampler and dataset."""

    seed: int

    def __new__(cls, index: int, seed: int) -> 'SeededIndex':
        seeded = super().__new__(cls, index)
        seeded.seed = seed
        return seeded

    def __reduce__(self) -> tuple:
        # sent to the workers in every batch: two ints, not a class state
        return (SeededIndex, (int(self), self.seed))


def sample_seed(
    seed: int, epoch: int, rank: int, position: int, index: int
) -> int:
    """The 64-bit seed of one sample's random draws; ``position`` (the
    place in this rank's epoch) gives a sample drawn twice in one epoch
    other numbers the second time. ``epoch`` is 0 for iteration-based runs.
    """
    key = struct.pack('<5q', seed, epoch, rank, position, index)
    return int.from_bytes(
        hashlib.blake2b(key, digest_size=8).digest(), 'little'
    )


@DATA_SAMPLERS.register_module()
class SampleSeedSampler(Sampler):
    """Sampler wrapper that gives every index of the wrapped sampler the
    seed of :func:`sample_seed`, for :class:`SampleSeededDataset` (the epoch
    reaches persistent workers with the indices).

    Args:
        sampler (dict | Sampler): The sampler, or its config (built with
            ``dataset`` and ``seed``, as mmengine builds samplers).
        dataset (Dataset): The dataset.
        seed (int, optional): The run's seed; None draws one shared by all
            ranks, as mmengine's samplers do. Defaults to None.
    """

    def __init__(
        self,
        sampler: Union[dict, Sampler],
        dataset: Any,
        seed: Optional[int] = None,
    ) -> None:
        if seed is not None:
            check_int('SampleSeedSampler', 'seed', seed, minimum=0)
        if isinstance(sampler, dict):
            default_args = dict(dataset=dataset, seed=seed)
            sampler = DATA_SAMPLERS.build(sampler, default_args=default_args)
        self.sampler = sampler
        self.dataset = dataset
        self.seed = sync_random_seed() if seed is None else seed
        self.epoch = 0
        self.rank = get_rank()

    def __iter__(self) -> Iterator[SeededIndex]:
        seed, epoch, rank = self.seed, self.epoch, self.rank
        for position, index in enumerate(self.sampler):
            yield SeededIndex(
                index, sample_seed(seed, epoch, rank, position, int(index))
            )

    def __len__(self) -> int:
        return len(self.sampler)

    def set_epoch(self, epoch: int) -> None:
        """Set the epoch here and in the wrapped sampler."""
        self.epoch = epoch
        if hasattr(self.sampler, 'set_epoch'):
            self.sampler.set_epoch(epoch)


@DATASETS.register_module()
class SampleSeededDataset:
    """Dataset wrapper that reseeds the random generators before each
    sample whose index carries a seed (:class:`SeededIndex`).

    In the main process (``num_workers=0``) the generators are put back
    after the batch, so that dropout, drop path and mixup keep drawing from
    the training process's own stream, the one ``ExactResumeHook`` saves.

    Args:
        dataset (dict | Dataset): The dataset, or its config.
    """

    def __init__(self, dataset: Union[dict, Any]) -> None:
        # text has an item and a length too
        if isinstance(dataset, (str, bytes)) or not (
            isinstance(dataset, dict)
            or (
                hasattr(dataset, '__getitem__') and hasattr(dataset, '__len__')
            )
        ):
            raise ValueError(
                f'SampleSeededDataset got dataset={dataset!r}; give a '
                'dataset or its config (a dict with its type).'
            )
        self.dataset = (
            DATASETS.build(dataset) if isinstance(dataset, dict) else dataset
        )

    def __len__(self) -> int:
        return len(self.dataset)

    def __getattr__(self, name: str) -> Any:
        # metainfo, get_data_info, get_gt_labels, ... of the wrapped dataset,
        # read by mmengine's loops and the toolboxes' hooks and samplers.
        # Not its pipeline: the wrapper has none, and a guard that took the
        # dataset's for the wrapper's would set its own on the wrapper,
        # where no sample passes (guards reach the dataset through
        # ``dataset``, as through mmengine's wrappers). 'dataset' itself is
        # looked up here only while unpickling.
        if name in ('dataset', 'pipeline'):
            raise AttributeError(name)
        return getattr(self.dataset, name)

    def _load(self, index: int) -> Any:
        if isinstance(index, SeededIndex):
            random.seed(index.seed)
            # numpy's global generator takes 32 bits (a two-word array seed
            # costs five times as much, per sample); python and torch all 64
            np.random.seed(index.seed & 0xFFFFFFFF)
            # not torch.manual_seed: it also queues a seed for every CUDA
            # device, 100 times slower and of no use to a data pipeline
            torch.default_generator.manual_seed(index.seed)
            index = int(index)
        return self.dataset[index]

    def __getitem__(self, index: int) -> Any:
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: list) -> list:
        """Load the samples of one batch (torch's loader calls this)."""
        if get_worker_info() is not None:
            return [self._load(index) for index in indices]
        saved = random.getstate(), np.random.get_state(), torch.get_rng_state()
        try:
            return [self._load(index) for index in indices]
        finally:
            random.setstate(saved[0])
            np.random.set_state(saved[1])
            torch.set_rng_state(saved[2])


def sample_seeded_loader(dataloader: dict) -> dict:
    """A copy of a data-loader config (as ``Runner.build_dataloader`` takes
    it) with its dataset and sampler wrapped in :class:`SampleSeededDataset`
    and :class:`SampleSeedSampler`, unless they are already."""
    loader = dict(dataloader)
    dataset, sampler = loader.get('dataset'), loader.get('sampler')
    if not _is_type(dataset, SampleSeededDataset):
        loader['dataset'] = dict(type=SampleSeededDataset, dataset=dataset)
    if sampler is not None and not _is_type(sampler, SampleSeedSampler):
        loader['sampler'] = dict(type=SampleSeedSampler, sampler=sampler)
    return loader


def own_generator(loader: Any) -> Any:
    """Give a built data loader a generator of its own (in place; returned).

    torch's loader draws the workers' base seed from its ``generator`` (by
    default the training process's) each time it starts them: once per run
    for persistent workers, so a resumed run would draw once more and every
    later dropout mask differ. Set on the built loader, as mmengine
    deep-copies loader configs and torch < 2.4 cannot copy a generator.
    """
    if loader.generator is None:
        loader.generator = torch.Generator()
    return loader


def _is_type(part: Any, cls: type) -> bool:
    if isinstance(part, cls):
        return True
    kind = part.get('type') if isinstance(part, dict) else None
    if isinstance(kind, str):  # a registered name, scoped or not
        registry = DATA_SAMPLERS if issubclass(cls, Sampler) else DATASETS
        kind = registry.get(kind)
    return kind is cls
