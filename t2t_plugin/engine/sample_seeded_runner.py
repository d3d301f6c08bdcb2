import copy
import inspect
import logging
import os
import os.path as osp
import re
import zipfile
from typing import Optional, Union

from mmengine.logging import print_log
from mmengine.registry import RUNNERS
from mmengine.runner import BaseLoop, Runner
from torch import nn
from torch.utils.data import DataLoader

from ..datasets.safe_pickle import DataFileError, annotation_files
from ..datasets.sample_seeding import own_generator, sample_seeded_loader
from .config import check_config

# The timestamps of the runs this process has started.
_STARTED: set[str] = set()


def is_intact(path: str) -> bool:
    """Whether a checkpoint file is complete, without unpickling it: a zip
    archive cut short by a kill or a full disk has no directory."""
    try:
        with zipfile.ZipFile(path) as archive:
            return any(n.endswith('data.pkl') for n in archive.namelist())
    except (OSError, zipfile.BadZipFile):
        return False


def newest_intact_checkpoint(work_dir: str) -> Optional[str]:
    """The checkpoint a resume without a file continues from: the one named
    in ``last_checkpoint`` if intact, else the newest intact ``epoch_N.pth``
    / ``iter_N.pth`` of the work dir, or None."""
    record = osp.join(work_dir, 'last_checkpoint')
    if osp.isfile(record):
        with open(record) as f:
            named = f.read().strip()
        if named and is_intact(named):
            return named
    if not osp.isdir(work_dir):
        return None
    found = []
    for name in os.listdir(work_dir):
        match = re.fullmatch(r'(epoch|iter)_(\d+)\.pth', name)
        if match:
            found.append((int(match.group(2)), osp.join(work_dir, name)))
    found.sort(reverse=True)
    return next((path for _, path in found if is_intact(path)), None)


@RUNNERS.register_module()
class SampleSeededRunner(Runner):
    """mmengine's Runner, with the random augmentation of the training
    data seeded per sample.

    The training loader gets :class:`~t2t_plugin.datasets.SampleSeedSampler`
    and :class:`~t2t_plugin.datasets.SampleSeededDataset` around the
    config's sampler and dataset: every sample draws from a seed of (run
    seed, epoch, rank, place in the epoch, index), whatever worker loads it.
    ``runner_type = 'SampleSeededRunner'`` in a config selects it.

    It also chooses the checkpoint a run starts from, once, for every tool
    that builds it: ``resume=True`` without ``load_from`` continues from the
    newest intact checkpoint of the work dir (mmengine's Runner takes the
    file ``last_checkpoint`` names, even one cut short by a kill), and
    ``resume='auto'`` does the same but starts from ``load_from`` (or from
    scratch) when the work dir has none. Hooks read the choice from public
    attributes: ``load_from`` (the checkpoint the run starts from, or None),
    ``resumes`` (whether it continues that checkpoint's training) and
    ``mode`` (``'train'``, ``'val'`` or ``'test'`` once the run started,
    None before).

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

    def __init__(self, *args, **kwargs) -> None:
        """mmengine's arguments; a resume without a file (or ``'auto'``)
        is resolved here, before mmengine's Runner sees it."""
        bound = inspect.signature(Runner.__init__).bind(None, *args, **kwargs)
        arguments = bound.arguments
        load_from = arguments.get('load_from')
        resume = arguments.get('resume', False)
        starts_anew = None
        if resume == 'auto' or (resume and not load_from):
            latest = newest_intact_checkpoint(
                osp.abspath(arguments['work_dir'])
            )
            if latest is not None:
                load_from, resume = latest, True
            else:
                load_from = load_from if resume == 'auto' else None
                resume = False
                starts_anew = (
                    f'load_from={load_from}' if load_from else 'scratch'
                )
            arguments['load_from'], arguments['resume'] = load_from, resume
            if arguments.get('cfg') is not None:
                # the config dumped to the work dir says what the run did
                cfg = copy.deepcopy(arguments['cfg'])
                cfg['load_from'], cfg['resume'] = load_from, resume
                arguments['cfg'] = cfg
        super().__init__(*bound.args[1:], **bound.kwargs)
        self.load_from: Optional[str] = load_from
        self.resumes = bool(resume and load_from)
        self.mode: Optional[str] = None
        if starts_anew:
            self.logger.info(
                f'No checkpoint in {self.work_dir} to resume; starting from '
                f'{starts_anew}.'
            )

    def train(self) -> nn.Module:
        """mmengine's, with ``mode`` set for the hooks."""
        self.mode = 'train'
        return super().train()

    def val(self) -> dict:
        """mmengine's, with ``mode`` set for the hooks."""
        self.mode = 'val'
        return super().val()

    def test(self) -> dict:
        """mmengine's, with ``mode`` set for the hooks."""
        self.mode = 'test'
        return super().test()

    def setup_env(self, env_cfg: dict) -> None:
        """mmengine's, then a timestamp no earlier run of this process had."""
        super().setup_env(env_cfg)
        timestamp, count = self.timestamp, 1
        while self.timestamp in _STARTED:
            count += 1
            # mmengine sets the timestamp here and offers no setter
            self._timestamp = f'{timestamp}_{count}'
        _STARTED.add(self.timestamp)

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
        # the hooks read this runner's public state (hooks/run_checks.py
        # imports this module): the one hook it calls is imported here
        from .hooks.bad_image_hook import BadImageHook

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
