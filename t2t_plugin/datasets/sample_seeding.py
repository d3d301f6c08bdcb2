"""Random augmentation drawn from a seed of each sample, not of a worker.

mmengine seeds each data-loader worker once with ``seed + worker_id``
(+ rank): non-persistent workers then replay the same random numbers every
epoch, and persistent workers draw fresh ones that no checkpoint can hold.
Here the sampler gives every index it yields the seed of that sample's
random draws, a hash of (run seed, epoch, rank, place in the epoch, dataset
index), and the dataset reseeds python's ``random``, numpy's global
generator and torch's CPU generator from it right before the sample's
pipeline runs. The draws then depend on neither the worker that loads the
sample nor on whether workers persist: each epoch draws new numbers, and a
resumed run draws exactly those of the uninterrupted one.
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


class SeededIndex(int):
    """A dataset index that carries the seed of its sample's random draws.

    An ``int`` everywhere else (batch samplers, ``get_data_info``), so that
    any sampler, batch sampler or dataset can pass it on.

    Args:
        index (int): The dataset index.
        seed (int): The seed, in ``[0, 2**64)``.
    """

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
    """The 64-bit seed of one sample's random draws.

    Args:
        seed (int): The run's seed.
        epoch (int): The epoch (0 for iteration-based runs).
        rank (int): The process's rank.
        position (int): The sample's place in this rank's epoch: a sample
            drawn twice in one epoch (repeated augmentation, padding to
            the world size) draws other numbers the second time.
        index (int): The dataset index.

    Returns:
        int: A seed in ``[0, 2**64)``.
    """
    key = struct.pack('<5q', seed, epoch, rank, position, index)
    return int.from_bytes(
        hashlib.blake2b(key, digest_size=8).digest(), 'little'
    )


def seed_random_generators(seed: int) -> None:
    """Seed python's ``random``, numpy's global generator and torch's CPU
    generator, the three that data transforms draw from.

    Args:
        seed (int): A seed in ``[0, 2**64)``.
    """
    random.seed(seed)
    # numpy's global generator takes 32 bits (a two-word array seed costs
    # five times as much, per sample); python and torch take all 64
    np.random.seed(seed & 0xFFFFFFFF)
    # not torch.manual_seed: it also queues a seed for every CUDA device,
    # 100 times slower and of no use to a data pipeline
    torch.default_generator.manual_seed(seed)


@DATA_SAMPLERS.register_module()
class SampleSeedSampler(Sampler):
    """Sampler wrapper that gives every index it yields its sample's seed.

    The wrapped sampler decides the order; this one adds to each index the
    seed of :func:`sample_seed`, which :class:`SampleSeededDataset` uses
    before the sample's pipeline runs. The epoch reaches the workers with
    the indices, so persistent workers draw the numbers of the epoch too.
    :class:`~t2t_plugin.engine.SampleSeededRunner` wraps the training
    sampler of a config in it.

    Args:
        sampler (dict | Sampler): The sampler, or its config (built with
            the ``dataset`` and ``seed`` given here, as mmengine builds
            samplers).
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
        self.sampler = (
            DATA_SAMPLERS.build(
                sampler, default_args=dict(dataset=dataset, seed=seed)
            )
            if isinstance(sampler, dict)
            else sampler
        )
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
        """Set the epoch here and in the wrapped sampler.

        Args:
            epoch (int): The epoch about to start.
        """
        self.epoch = epoch
        if hasattr(self.sampler, 'set_epoch'):
            self.sampler.set_epoch(epoch)


@DATASETS.register_module()
class SampleSeededDataset:
    """Dataset wrapper that reseeds the random generators before each
    sample whose index carries a seed (:class:`SeededIndex`).

    In a data-loader worker the generators are simply reseeded. In the
    main process (``num_workers=0``) they are put back after the batch, so
    that dropout, drop path and mixup keep drawing from the training
    process's own stream, the one ``RandomStateHook`` saves.

    Args:
        dataset (dict | Dataset): The dataset, or its config.
    """

    def __init__(self, dataset: Union[dict, Any]) -> None:
        self.dataset = (
            DATASETS.build(dataset) if isinstance(dataset, dict) else dataset
        )

    @property
    def metainfo(self) -> dict:
        return self.dataset.metainfo

    def __len__(self) -> int:
        return len(self.dataset)

    def __getattr__(self, name: str) -> Any:
        # get_data_info, full_init, pipeline, ... of the wrapped dataset;
        # 'dataset' itself is looked up here only while unpickling
        if name == 'dataset':
            raise AttributeError(name)
        return getattr(self.dataset, name)

    def _load(self, index: int) -> Any:
        if isinstance(index, SeededIndex):
            seed_random_generators(index.seed)
            index = int(index)
        return self.dataset[index]

    def __getitem__(self, index: int) -> Any:
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: list) -> list:
        """Load a batch of samples (torch's loader calls this, when a
        dataset has it, with the indices of one batch)."""
        if get_worker_info() is not None:
            return [self._load(index) for index in indices]
        saved = (
            random.getstate(),
            np.random.get_state(),
            torch.default_generator.get_state(),
        )
        try:
            return [self._load(index) for index in indices]
        finally:
            random.setstate(saved[0])
            np.random.set_state(saved[1])
            torch.default_generator.set_state(saved[2])


def sample_seeded_loader(dataloader: dict) -> dict:
    """A data-loader config whose dataset and sampler are wrapped in
    :class:`SampleSeededDataset` and :class:`SampleSeedSampler`; give the
    built loader a generator of its own with :func:`own_generator`.

    Args:
        dataloader (dict): A data-loader config as mmengine's
            ``Runner.build_dataloader`` takes it; not changed.

    Returns:
        dict: The new config (the same one when both are wrapped already).
    """
    loader = dict(dataloader)
    dataset, sampler = loader.get('dataset'), loader.get('sampler')
    if not _is_type(dataset, SampleSeededDataset):
        loader['dataset'] = dict(type=SampleSeededDataset, dataset=dataset)
    if sampler is not None and not _is_type(sampler, SampleSeedSampler):
        loader['sampler'] = dict(type=SampleSeedSampler, sampler=sampler)
    return loader


def own_generator(loader: Any) -> Any:
    """Give a built data loader a generator of its own.

    torch's loader draws the workers' base seed from its ``generator``, by
    default the training process's torch generator, each time it starts
    its workers: persistent workers start once per run, so a resumed run
    would draw once more than the uninterrupted one, and every dropout
    mask and drop path after it would differ. With the loader's own
    generator the training process's stream moves only with training. It
    is set on the built loader, not in its config: mmengine deep-copies
    loader configs, and torch < 2.4 cannot copy a generator.

    Args:
        loader (DataLoader): A built loader; changed in place.

    Returns:
        DataLoader: The same loader.
    """
    if loader.generator is None:
        loader.generator = torch.Generator()
    return loader


def _is_type(part: Any, cls: type) -> bool:
    if isinstance(part, cls):
        return True
    kind = part.get('type') if isinstance(part, dict) else None
    return kind is cls or str(kind).split('.')[-1] == cls.__name__
