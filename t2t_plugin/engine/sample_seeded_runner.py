import contextlib
import copy
import errno
import inspect
import logging
import os
import os.path as osp
import re
import zipfile
from collections.abc import Iterator
from typing import Optional, Union

import torch
import torch.distributed as torch_dist
from mmengine.dist import is_distributed
from mmengine.logging import print_log
from mmengine.registry import RUNNERS
from mmengine.runner import BaseLoop, Runner
from torch import nn
from torch.utils.data import DataLoader

from ..datasets.safe_pickle import DataFileError, annotation_files
from ..datasets.sample_seeding import own_generator, sample_seeded_loader
from .config import ConfigError, check_config
from .console_log import show_progress_only
from .distributed import (
    DEFAULT_TIMEOUT,
    init_cpu_dist,
    is_timeout,
    silent_ranks_message,
)
from .errors import RunCheckError, TrainingStopped

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


def _loop_start(path: str) -> str:
    """A looping path cut at the link that closes the loop."""
    parts = path.split(os.sep)
    for index, part in enumerate(parts):
        if part and part in parts[index + 1 :]:
            return os.sep.join(parts[: parts.index(part, index + 1)])
    return path


def os_error_line(error: OSError, where: Optional[str]) -> Optional[str]:
    """One line for the OSErrors a user can act on (a full disk, a link
    loop, a folder that cannot be written), else None; ``where`` names the
    place when the error names no file."""
    where = error.filename or where
    if error.errno == errno.ENOSPC:
        return (
            f'No space left on the device while writing {where}: free some '
            'space, then resume with --resume (the last complete checkpoint '
            'is kept).'
        )
    if error.errno == errno.ELOOP:
        return (
            f'Cannot read {_loop_start(str(where))}: a symbolic link loop '
            '(a link to a folder above it); remove or replace the link.'
        )
    if error.errno in (errno.EACCES, errno.EROFS):
        return f'Cannot write {where}: {error.strerror}.'
    return None


@contextlib.contextmanager
def one_line_failures(
    where: Optional[str] = None, timeout: float = DEFAULT_TIMEOUT
) -> Iterator[None]:
    """Within it, the failures of the machine that a user can act on end
    the run as :class:`~t2t_plugin.engine.hooks.RunCheckError` (an OSError
    of :func:`os_error_line`) or
    :class:`~t2t_plugin.engine.hooks.TrainingStopped` (a collective whose
    peer stopped answering, naming the silent ranks), the original error
    as its cause: every tool that runs the Runner then ends in that line."""
    try:
        yield
    except OSError as error:
        line = os_error_line(error, where)
        if line is None:
            raise
        raise RunCheckError(line) from error
    except RuntimeError as error:
        if isinstance(error, TrainingStopped) or not (
            torch_dist.is_available()
            and torch_dist.is_initialized()
            and is_timeout(error)
        ):
            raise
        raise TrainingStopped(silent_ranks_message(timeout)) from error


class LoaderGuard:
    """A hook that guards the training loader before its workers start
    (they copy the datasets then): :class:`SampleSeededRunner` calls its
    :meth:`guard` as it builds that loader. The hooks import the runner,
    not the other way round."""

    def guard(self, runner: Runner, loader: DataLoader, key: str) -> None:
        """Guard the datasets ``loader`` (the ``key`` loader) reads."""
        raise NotImplementedError


@contextlib.contextmanager
def refused_settings(key: str, what: str) -> Iterator[None]:
    """What mmengine raises as it builds ``key`` from the config (the
    arguments of an optimizer or scheduler) as one :class:`ConfigError`
    line naming the key."""
    try:
        yield
    except (TypeError, ValueError, KeyError) as error:
        raise ConfigError(
            f'{key}: {type(error).__name__}: {error}; check the {what} '
            'settings of the config and --cfg-options.'
        ) from error


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

    In a distributed run it gives collectives a timeout of
    ``env_cfg.dist_cfg.timeout`` seconds (300 unless set; torch's 1800
    keeps a job with a frozen rank hanging for half an hour) and, on a
    machine without CUDA, opens a gloo group itself and wraps the model in
    DDP without device ids (mmengine's ``init_dist`` calls
    ``torch.cuda.set_device`` whatever the backend, and DDP refuses the
    Runner's ``device_ids=[LOCAL_RANK]`` for a CPU model): ``--launcher
    pytorch`` / ``slurm`` / ``mpi`` work on CPUs through every tool.
    What stops a run on the machine's side (a full disk, a symbolic link
    loop, a rank that stopped answering) ends it in one line
    (:func:`one_line_failures`).

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

    def build_logger(self, *args, **kwargs):
        """mmengine's logger; its terminal shows the progress only where
        the tool asks for it (:func:`~t2t_plugin.engine.console_log.
        progress_only`)."""
        logger = super().build_logger(*args, **kwargs)
        show_progress_only(logger)
        return logger

    def train(self) -> nn.Module:
        """mmengine's, with ``mode`` set for the hooks."""
        self.mode = 'train'
        with self._failures():
            return super().train()

    def val(self) -> dict:
        """mmengine's, with ``mode`` set for the hooks."""
        self.mode = 'val'
        with self._failures():
            return super().val()

    def test(self) -> dict:
        """mmengine's, with ``mode`` set for the hooks."""
        self.mode = 'test'
        with self._failures():
            return super().test()

    def _failures(self) -> contextlib.AbstractContextManager:
        return one_line_failures(self.work_dir, self.dist_timeout)

    def setup_env(self, env_cfg: dict) -> None:
        """mmengine's, with the process group's timeout and, without
        CUDA, its gloo set-up; then a timestamp no earlier run of this
        process had."""
        dist_cfg = dict(env_cfg.get('dist_cfg') or {})
        dist_cfg.setdefault('timeout', DEFAULT_TIMEOUT)
        self.dist_timeout: float = dist_cfg['timeout']
        if self.distributed and not is_distributed():
            if not torch.cuda.is_available():
                init_cpu_dist(self.launcher, timeout=self.dist_timeout)
            env_cfg = dict(env_cfg, dist_cfg=dist_cfg)
        super().setup_env(env_cfg)
        timestamp, count = self.timestamp, 1
        while self.timestamp in _STARTED:
            count += 1
            # mmengine sets the timestamp here and offers no setter
            self._timestamp = f'{timestamp}_{count}'
        _STARTED.add(self.timestamp)

    def wrap_model(
        self, model_wrapper_cfg: Optional[dict], model: nn.Module
    ) -> nn.Module:
        """mmengine's; without CUDA, DDP without device ids."""
        if (
            self.distributed
            and model_wrapper_cfg is None
            and not torch.cuda.is_available()
        ):
            model_wrapper_cfg = dict(
                type='MMDistributedDataParallel',
                device_ids=None,
                broadcast_buffers=False,
                find_unused_parameters=self.cfg.get(
                    'find_unused_parameters', False
                ),
            )
        return super().wrap_model(model_wrapper_cfg, model)

    def build_optim_wrapper(self, optim_wrapper):
        """mmengine's; a setting the optimizer refuses (a misspelt
        argument, a negative learning rate) is one :class:`ConfigError`
        line naming the key, for every tool."""
        with refused_settings('optim_wrapper', 'optimizer'):
            return super().build_optim_wrapper(optim_wrapper)

    def build_param_scheduler(self, scheduler):
        """mmengine's; a setting a scheduler refuses (a factor outside 0 to
        1, a misspelt argument) is one :class:`ConfigError` line, for every
        tool (mmengine builds the schedulers once training starts)."""
        with refused_settings('param_scheduler', 'schedule'):
            return super().build_param_scheduler(scheduler)

    @staticmethod
    def build_dataloader(
        dataloader: Union[DataLoader, dict],
        seed: Optional[int] = None,
        diff_rank_seed: bool = False,
    ) -> DataLoader:
        """mmengine's, with an annotation file that cannot be read named in
        the error (mmengine's ``load`` gives the file handlers no name),
        and a folder that cannot be read in one line
        (:func:`one_line_failures`)."""
        try:
            with one_line_failures():
                return Runner.build_dataloader(
                    dataloader, seed, diff_rank_seed
                )
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
        the run's :class:`LoaderGuard` hooks (``BadImageHook``) guard
        first: an iteration-based loop starts the loader's workers when it
        is built, before any hook is called, and the workers keep the
        datasets as they were then."""
        if isinstance(self._train_dataloader, dict):
            randomness = self.cfg.get('randomness') or {}
            self._train_dataloader = self.build_dataloader(
                sample_seeded_loader(self._train_dataloader),
                seed=self.seed,
                diff_rank_seed=randomness.get('diff_rank_seed', False),
            )
            for hook in self.hooks:
                if isinstance(hook, LoaderGuard):
                    hook.guard(
                        self, self._train_dataloader, 'train_dataloader'
                    )
        loop = super().build_train_loop(loop)
        own_generator(loop.dataloader)
        return loop
