from typing import Union

from mmengine.registry import RUNNERS
from mmengine.runner import BaseLoop, Runner

from ..datasets.sample_seeding import own_generator, sample_seeded_loader


@RUNNERS.register_module()
class SampleSeededRunner(Runner):
    """mmengine's Runner, with the random augmentation of the training
    data seeded per sample.

    The training loader gets :class:`~t2t_plugin.datasets.SampleSeedSampler`
    and :class:`~t2t_plugin.datasets.SampleSeededDataset` around the
    config's sampler and dataset: every sample draws from a seed of (run
    seed, epoch, rank, place in the epoch, index), whatever worker loads it.
    ``runner_type = 'SampleSeededRunner'`` in a config selects it.
    """

    def build_train_loop(self, loop: Union[BaseLoop, dict]) -> BaseLoop:
        """Build the training loop with a per-sample seeded loader."""
        if isinstance(self._train_dataloader, dict):
            self._train_dataloader = sample_seeded_loader(
                self._train_dataloader
            )
        loop = super().build_train_loop(loop)
        own_generator(loop.dataloader)
        return loop
