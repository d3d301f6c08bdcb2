import logging
from typing import Union

from mmengine.logging import print_log
from mmengine.registry import RUNNERS
from mmengine.runner import BaseLoop, Runner

from ..datasets.sample_seeding import own_generator, sample_seeded_loader
from .config import check_config

# The timestamps of the runs this process has started.
_STARTED: set[str] = set()


@RUNNERS.register_module()
class SampleSeededRunner(Runner):
    """mmengine's Runner, with the random augmentation of the training
    data seeded per sample.

    The training loader gets :class:`~t2t_plugin.datasets.SampleSeedSampler`
    and :class:`~t2t_plugin.datasets.SampleSeededDataset` around the
    config's sampler and dataset: every sample draws from a seed of (run
    seed, epoch, rank, place in the epoch, index), whatever worker loads it.
    ``runner_type = 'SampleSeededRunner'`` in a config selects it.

    A run that starts in the same second as an earlier one of this process
    gets ``_2``, ``_3``, ... after its timestamp: mmengine names the run's
    logger, message hub and visualizer after the config and that second,
    and a second run of that name got the first run's (its lines in the
    first run's log file, its scalars in the first run's folder, its loss
    averaged with the first run's).

    Before the work dir is made, :func:`~t2t_plugin.engine.check_config`
    refuses a misspelt key and a config variable that does not reach its
    keys, and warns of a schedule that ends after training.
    """

    @classmethod
    def from_cfg(cls, cfg) -> Runner:
        """mmengine's, after the config's checks."""
        warning = check_config(cfg)
        if warning:
            print_log(warning, logger='current', level=logging.WARNING)
        return super().from_cfg(cfg)

    def setup_env(self, env_cfg: dict) -> None:
        """mmengine's, then a timestamp no earlier run of this process had."""
        super().setup_env(env_cfg)
        timestamp, count = self._timestamp, 1
        while self._timestamp in _STARTED:
            count += 1
            self._timestamp = f'{timestamp}_{count}'
        _STARTED.add(self._timestamp)

    def build_train_loop(self, loop: Union[BaseLoop, dict]) -> BaseLoop:
        """Build the training loop with a per-sample seeded loader."""
        if isinstance(self._train_dataloader, dict):
            self._train_dataloader = sample_seeded_loader(
                self._train_dataloader
            )
        loop = super().build_train_loop(loop)
        own_generator(loop.dataloader)
        return loop
