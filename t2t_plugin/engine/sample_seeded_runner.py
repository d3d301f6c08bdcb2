from typing import Optional, Union

from mmengine.registry import RUNNERS
from mmengine.runner import BaseLoop, Runner
from torch.utils.data import DataLoader

from ..datasets.safe_pickle import DataFileError, annotation_files
from ..datasets.sample_seeding import own_generator, sample_seeded_loader
from .hooks.bad_image_hook import BadImageHook

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
    """

    def setup_env(self, env_cfg: dict) -> None:
        """mmengine's, then a timestamp no earlier run of this process had."""
        super().setup_env(env_cfg)
        timestamp, count = self._timestamp, 1
        while self._timestamp in _STARTED:
            count += 1
            self._timestamp = f'{timestamp}_{count}'
        _STARTED.add(self._timestamp)

    @staticmethod
    def build_dataloader(
        dataloader: Union[DataLoader, dict],
        seed: Optional[int] = None,
        diff_rank_seed: bool = False,
    ) -> DataLoader:
        """mmengine's, with an annotation file that cannot be read named in
        the error (mmengine's ``load`` gives the file handlers no name)."""
        try:
            return Runner.build_dataloader(dataloader, seed, diff_rank_seed)
        except DataFileError as error:
            found = (
                annotation_files(dataloader.get('dataset'))
                if isinstance(dataloader, dict)
                else []
            )
            if error.path or not found:
                raise
            raise error.naming(' or '.join(found)) from None

    def build_train_loop(self, loop: Union[BaseLoop, dict]) -> BaseLoop:
        """Build the training loop with a per-sample seeded loader, which
        the run's :class:`BadImageHook` guards first: an iteration-based
        loop starts the loader's workers when it is built, before any hook
        is called, and the workers keep the datasets as they were then."""
        if isinstance(self._train_dataloader, dict):
            randomness = self.cfg.get('randomness') or {}
            self._train_dataloader = self.build_dataloader(
                sample_seeded_loader(self._train_dataloader),
                seed=self.seed,
                diff_rank_seed=randomness.get('diff_rank_seed', False),
            )
            for hook in self.hooks:
                if isinstance(hook, BadImageHook):
                    hook.guard(
                        self, self._train_dataloader, 'train_dataloader'
                    )
        loop = super().build_train_loop(loop)
        own_generator(loop.dataloader)
        return loop
