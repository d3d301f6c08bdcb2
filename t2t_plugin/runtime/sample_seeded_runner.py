import contextlib
import copy
import errno
import inspect
import logging
import os
import os.path as osp
import re
import shutil
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Optional, Union

import torch
import torch.distributed as torch_dist
from mmengine.dist import is_distributed, is_main_process, master_only
from mmengine.hooks import CheckpointHook
from mmengine.logging import print_log
from mmengine.registry import HOOKS, RUNNERS
from mmengine.runner import BaseLoop, Runner
from torch import nn
from torch.utils.data import DataLoader

from t2t_preflight.checks import check_config
from t2t_preflight.config import warn_stale_variables
from t2t_preflight.errors import ConfigError, RunCheckError, TrainingStopped
from t2t_preflight.outputs import loop_start
from t2t_preflight.schedule import spans_nothing

from ..compat import (
    set_runner_timestamp,
    set_train_dataloader,
    unbuilt_train_dataloader,
)
from .console_log import show_progress_only
from .distributed import (
    DEFAULT_TIMEOUT,
    is_timeout,
    open_process_group,
    silent_ranks_message,
)
from .safe_pickle import DataFileError, annotation_files
from .sample_seeding import own_generator, sample_seeded_loader

# The default hooks mmengine's Runner registers itself: a None of these
# keys removes them there too.
_MMENGINE_DEFAULT_HOOKS = frozenset(
    ('runtime_info', 'timer', 'sampler_seed', 'logger', 'param_scheduler',
     'checkpoint')
)  # fmt: skip

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


def lies_in(path: str, folders: Sequence[str]) -> bool:
    """Whether ``path`` (relative to the current folder) is inside one of
    ``folders``, links resolved."""
    real = osp.realpath(osp.expanduser(path))
    for folder in folders:
        folder = osp.realpath(osp.expanduser(folder))
        if osp.commonpath([real, folder]) == folder:
            return True
    return False


def checkpoint_folders(work_dir: str, default_hooks: Optional[dict]) -> list:
    """Where a run's checkpoints go: its work dir, and
    ``out_dir/<work dir's name>`` for a CheckpointHook with a local
    ``out_dir`` other than the work dir (as CheckpointHook joins and
    compares them)."""
    folders = [work_dir]
    hook = (default_hooks or {}).get('checkpoint')
    out_dir = hook.get('out_dir') if isinstance(hook, dict) else None
    if (
        isinstance(out_dir, str)
        and '://' not in out_dir
        and out_dir != work_dir
    ):
        folders.append(
            osp.join(out_dir, osp.basename(work_dir.rstrip(osp.sep)))
        )
    return folders


def newest_intact_checkpoint(work_dir: str) -> Optional[str]:
    """The newest intact ``epoch_N.pth`` / ``iter_N.pth`` of a work dir,
    or None."""
    if not osp.isdir(work_dir):
        return None
    found = []
    for name in os.listdir(work_dir):
        match = re.fullmatch(r'(epoch|iter)_(\d+)\.pth', name)
        if match:
            found.append((int(match.group(2)), osp.join(work_dir, name)))
    found.sort(reverse=True)
    return next((path for _, path in found if is_intact(path)), None)


# Why a resume does not follow the file last_checkpoint names.
OUTSIDE = 'lies outside the work dir'
MISSING = 'does not exist'
CUT_SHORT = 'is cut short'


def _pointer(folders: Sequence[str]) -> tuple[Optional[str], Optional[str]]:
    """The checkpoint ``last_checkpoint`` of the work dir (``folders[0]``)
    names (None without one), and why it is not to be followed (None if
    it is)."""
    record = osp.join(folders[0], 'last_checkpoint')
    if not osp.isfile(record):
        return None, None
    with open(record) as f:
        named = f.read().strip() or None
    if named is None:
        return None, None
    # what a file is comes first: --resume continues from a file outside
    # only if it is there and whole
    if not osp.isfile(named):
        return named, MISSING
    if not is_intact(named):
        return named, CUT_SHORT
    if not lies_in(named, folders):
        return named, OUTSIDE
    return named, None


@dataclass(frozen=True)
class StartPoint:
    """The checkpoint a run starts from (None: from scratch or its
    ``init_cfg``), whether it resumes that checkpoint's training, a line
    for the log about the choice, and, under mmengine's own Runner, a line
    refusing what that Runner would resume wrongly. A ``last_checkpoint``
    not followed makes the note a warning."""

    load_from: Optional[str]
    resumes: bool
    note: Optional[str] = None
    note_level: int = logging.INFO
    problem: Optional[str] = None


def start_point(
    work_dir: str,
    load_from: Optional[str],
    resume: Union[bool, str],
    default_hooks: Optional[dict] = None,
    host_runner: bool = False,
) -> StartPoint:
    """Which checkpoint a run of ``work_dir`` starts from, for a config's
    ``load_from`` and ``resume``: the one decision every door reads.

    ``resume=True`` without ``load_from`` continues from the checkpoint
    ``last_checkpoint`` names if it lies in the run's folders
    (:func:`checkpoint_folders`) and is intact, else from the newest
    intact checkpoint of the work dir (a pointer it does not follow is
    named in ``note``); ``resume='auto'`` does the same but starts from
    ``load_from`` (or from scratch) when the work dir has none. A file
    given with ``resume=True`` is resumed wherever it lies: continuing
    another run in a new folder is ordinary. ``host_runner``: the file
    mmengine's own Runner takes instead (whatever ``last_checkpoint``
    names), with ``problem`` where that would resume the wrong file.
    """
    work_dir = osp.abspath(work_dir)
    folders = checkpoint_folders(work_dir, default_hooks)
    if host_runner:
        if resume == 'auto' and load_from:
            return StartPoint(
                load_from,
                True,
                problem=(
                    "resume='auto' is SampleSeededRunner's: mmengine's "
                    f'Runner would resume the run of load_from={load_from} '
                    "instead of the work dir's; set runner_type = "
                    "'SampleSeededRunner' or leave load_from out."
                ),
            )
        if not (resume and not load_from):
            return StartPoint(load_from, bool(resume and load_from))
        named, reason = _pointer(folders)
        problem = None
        if reason in (OUTSIDE, CUT_SHORT):
            problem = (
                f'{named}, the checkpoint last_checkpoint names in '
                f"{work_dir}, {reason}, and mmengine's Runner would resume "
                'it; resume the file you mean with --resume PATH, or set '
                "runner_type = 'SampleSeededRunner' (it takes the newest "
                'intact checkpoint of the work dir).'
            )
        return StartPoint(named, named is not None, problem=problem)
    if not (resume == 'auto' or (resume and not load_from)):
        return StartPoint(load_from, bool(resume and load_from))
    named, reason = _pointer(folders)
    if named is not None and reason is None:
        return StartPoint(named, True)
    latest = newest_intact_checkpoint(work_dir)
    skipped = ''
    if reason:
        hint = (
            f' (--resume {named} continues from it)'
            if reason == OUTSIDE
            else ''
        )
        skipped = (
            f'{osp.join(work_dir, "last_checkpoint")} names {named}, which '
            f'{reason}: not followed{hint}; '
        )
    level = logging.WARNING if skipped else logging.INFO
    if latest is not None:
        note = (
            f'{skipped}resuming {latest}, the newest intact checkpoint of '
            'the work dir.'
        )
        return StartPoint(latest, True, note if skipped else None, level)
    load_from = load_from if resume == 'auto' else None
    anew = f'load_from={load_from}' if load_from else 'scratch'
    none = f'checkpoint in {work_dir} to resume; starting from {anew}.'
    note = f'{skipped}no {none}' if skipped else f'No {none}'
    return StartPoint(load_from, False, note, level)


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
            f'Cannot read {loop_start(str(where))}: a symbolic link loop '
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
    the run as :class:`~t2t_plugin.runtime.hooks.RunCheckError` (an OSError
    of :func:`os_error_line`) or
    :class:`~t2t_plugin.runtime.hooks.TrainingStopped` (a collective whose
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


def config_dump_path(runner: Runner) -> Optional[str]:
    """Where mmengine's ``Runner.dump_config`` writes the run's config,
    asked of it (a stand-in config records the path); None on the ranks
    that write nothing."""
    asked: list[str] = []
    stand_in = SimpleNamespace(filename=runner.cfg.filename, dump=asked.append)
    Runner.dump_config(
        SimpleNamespace(
            cfg=stand_in, work_dir=runner.work_dir, timestamp=runner.timestamp
        )
    )
    return asked[0] if asked else None


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
    that builds it (:func:`start_point`): ``resume=True`` without
    ``load_from`` continues from the checkpoint ``last_checkpoint`` names
    when that lies in the work dir and is intact, else from the newest
    intact checkpoint of the work dir, naming the pointer it did not follow
    (mmengine's Runner takes whatever file ``last_checkpoint`` names, even
    one cut short by a kill or another run's), and ``resume='auto'`` does
    the same but starts from ``load_from`` (or from scratch) when the work
    dir has none. Hooks read the choice from public
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

    Before the work dir is made, :func:`t2t_preflight.check_config`
    refuses what the config alone answers (a misspelt key, a missing
    checkpoint, ...) and warns of a config variable given as an option
    that does not reach its keys; a training warns of a schedule that
    ends after it (the line :func:`t2t_preflight.check_config` returns).
    A run that stops before its first iteration leaves nothing behind: the
    work dir it made, else its own log folder, is removed, and the config
    is saved to the work dir only once the hooks' ``before_run`` let the
    run start (never over the file it was read from). A config's mmengine
    ``CheckpointHook`` is built as
    :class:`~t2t_plugin.runtime.hooks.SaveFirstCheckpointHook`: a checkpoint
    is removed only once its successor is saved.
    """

    @classmethod
    def from_cfg(cls, cfg) -> Runner:
        """mmengine's, after the config's checks."""
        schedule_warning = check_config(cfg)
        runner = super().from_cfg(cfg)
        runner.schedule_warning = schedule_warning
        return runner

    def __init__(self, *args, **kwargs) -> None:
        """mmengine's arguments; a resume without a file (or ``'auto'``)
        is resolved here, before mmengine's Runner sees it."""
        bound = inspect.signature(Runner.__init__).bind(None, *args, **kwargs)
        arguments = bound.arguments
        resume = arguments.get('resume', False)
        choice = start_point(
            arguments['work_dir'],
            arguments.get('load_from'),
            resume,
            arguments.get('default_hooks'),
        )
        if (choice.load_from, choice.resumes) != (
            arguments.get('load_from'),
            resume,
        ):
            arguments['load_from'] = choice.load_from
            arguments['resume'] = choice.resumes
            if arguments.get('cfg') is not None:
                # the config dumped to the work dir says what the run did
                cfg = copy.deepcopy(arguments['cfg'])
                cfg['load_from'], cfg['resume'] = (
                    choice.load_from,
                    choice.resumes,
                )
                arguments['cfg'] = cfg
        # mmengine makes the work dir first thing
        self.made_work_dir = not osp.exists(arguments['work_dir'])
        self.iterated = self.config_dumped = False
        try:
            super().__init__(*bound.args[1:], **bound.kwargs)
        except BaseException:
            if self.made_work_dir and is_main_process():
                shutil.rmtree(arguments['work_dir'], ignore_errors=True)
            raise
        self.load_from: Optional[str] = choice.load_from
        self.resumes = choice.resumes
        self.mode: Optional[str] = None
        self.schedule_warning: Optional[str] = None  # from_cfg's check
        if choice.note:
            self.logger.log(choice.note_level, choice.note)

    def build_logger(self, *args, **kwargs):
        """mmengine's logger; its terminal shows the progress only where
        the tool asks for it (:func:`~t2t_plugin.runtime.console_log.
        progress_only`)."""
        logger = super().build_logger(*args, **kwargs)
        show_progress_only(logger)
        return logger

    def train(self) -> nn.Module:
        """mmengine's, with ``mode`` set for the hooks; a schedule that
        does not fit the training is warned of first."""
        self.mode = 'train'
        if self.schedule_warning:
            self.logger.warning(self.schedule_warning)
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

    def call_hook(self, fn_name: str, **kwargs) -> None:
        """mmengine's; notes the run's first iteration, and saves the
        config once the hooks' ``before_run`` let the run start."""
        if fn_name.startswith('before_') and fn_name.endswith('_iter'):
            self.iterated = True
        super().call_hook(fn_name, **kwargs)
        if fn_name == 'before_run' and not self.config_dumped:
            self.config_dumped = True
            self.dump_config()

    @master_only
    def dump_config(self) -> None:
        """mmengine's, once the hooks' ``before_run`` let the run start
        (mmengine's ``__init__`` saves it before: a training refused on a
        busy work dir wrote over the running training's config), and never
        over the file the config was read from (a test of a run's saved
        config with ``--cfg-options``)."""
        if not self.config_dumped:
            return
        target = config_dump_path(self)
        if self.cfg.filename and osp.realpath(target) == osp.realpath(
            self.cfg.filename
        ):
            self.logger.info(
                f'The config is not saved to {target}: the run was read '
                'from that file.'
            )
            return
        super().dump_config()

    def register_default_hooks(self, hooks=None) -> None:
        """mmengine's, where ``default_hooks.<key>=None`` removes any hook
        of the config (docs/troubleshooting.md), not only mmengine's six:
        mmengine asserts on a None it has no default for."""
        super().register_default_hooks(
            {
                key: hook
                for key, hook in (hooks or {}).items()
                if hook is not None or key in _MMENGINE_DEFAULT_HOOKS
            }
        )

    def register_hook(self, hook, priority=None) -> None:
        """mmengine's; its ``CheckpointHook`` is built as
        :class:`~t2t_plugin.runtime.hooks.SaveFirstCheckpointHook` (the same
        arguments and files), which removes a checkpoint only once its
        successor is saved."""
        kind = hook.get('type') if isinstance(hook, dict) else None
        if isinstance(kind, str):
            with HOOKS.switch_scope_and_registry(None) as registry:
                kind = registry.get(kind)  # as HOOKS.build finds it
        if kind is CheckpointHook:
            hook = {**hook, 'type': 'SaveFirstCheckpointHook'}
        super().register_hook(hook, priority)

    @contextlib.contextmanager
    def _failures(self) -> Iterator[None]:
        """The machine's failures in one line; a run that stops before its
        first iteration removes the work dir it made, else its log
        folder (nothing in them was made by a step of the run)."""
        try:
            with one_line_failures(self.work_dir, self.dist_timeout):
                yield
        except BaseException:
            if not self.iterated and is_main_process():
                if self.made_work_dir:
                    shutil.rmtree(self.work_dir, ignore_errors=True)
                elif self.made_log_dir:
                    shutil.rmtree(self.log_dir, ignore_errors=True)
            raise

    def setup_env(self, env_cfg: dict) -> None:
        """mmengine's, with the process group opened by
        :func:`~t2t_plugin.runtime.distributed.open_process_group` (its
        timeout, the gloo set-up without CUDA, the launch failures as one
        line); then a timestamp no earlier run of this process had."""
        dist_cfg = dict(env_cfg.get('dist_cfg') or {})
        dist_cfg.setdefault('timeout', DEFAULT_TIMEOUT)
        self.dist_timeout: float = dist_cfg['timeout']
        if self.distributed and not is_distributed():
            open_process_group(self.launcher, dist_cfg)
        super().setup_env(env_cfg)
        timestamp, count = self.timestamp, 1
        while self.timestamp in _STARTED:
            count += 1
            # mmengine sets the timestamp here and offers no setter
            set_runner_timestamp(self, f'{timestamp}_{count}')
        _STARTED.add(self.timestamp)
        # the run's log folder, made next: another process's of the same
        # second is not this run's to remove
        self.made_log_dir = not osp.exists(
            osp.join(self.work_dir, self.timestamp)
        )

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
        """mmengine's, without the schedulers that span nothing
        (``warmup_epochs=0``: no warm-up); a setting a scheduler refuses (a
        factor outside 0 to 1, a misspelt argument) is one
        :class:`ConfigError` line, for every tool (mmengine builds the
        schedulers once training starts)."""
        if isinstance(scheduler, (dict, list)):
            listed = [scheduler] if isinstance(scheduler, dict) else scheduler
            kept = [item for item in listed if not spans_nothing(item)]
            for index, item in enumerate(listed):
                if spans_nothing(item):
                    self.logger.info(
                        f'param_scheduler.{index}: the {item.get("type")} '
                        f'begins where it ends ({item.get("begin", 0)}); left '
                        'out.'
                    )
            scheduler = kept
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
        the run's hooks that guard loaders (``RunGuardHook``'s
        ``guard_loader``) guard first: an iteration-based loop starts the
        loader's workers when it is built, before any hook is called, and
        the workers keep the datasets as they were then."""
        loader = unbuilt_train_dataloader(self)
        if isinstance(loader, dict):
            randomness = self.cfg.get('randomness') or {}
            loader = self.build_dataloader(
                sample_seeded_loader(loader),
                seed=self.seed,
                diff_rank_seed=randomness.get('diff_rank_seed', False),
            )
            set_train_dataloader(self, loader)
            for hook in self.hooks:
                if callable(getattr(hook, 'guard_loader', None)):
                    hook.guard_loader(self, loader, 'train_dataloader')
        loop = super().build_train_loop(loop)
        own_generator(loop.dataloader)
        return loop


def build_runner(cfg, mode: Optional[str] = None) -> Runner:
    """The Runner of the config's ``runner_type``, as ``RUNNERS.build``
    builds it, with the loops of ``mode`` (``'train'``: the training and
    validation loops and the optimizer; ``'test'``: the test loop) built
    too, so that a wrong config fails before the run starts (``train`` and
    ``test`` keep what is built). ``resume='auto'`` (``tools/train.py
    --resume``) is :class:`SampleSeededRunner`'s; another Runner gets
    what mmpretrain's ``tools/train.py --resume`` sets (``resume=True``,
    ``load_from=None``).

    Args:
        cfg: The config.
        mode: ``'train'``, ``'test'`` or None (nothing more built).
    """
    runner_type = cfg.get('runner_type', 'Runner')
    with RUNNERS.switch_scope_and_registry(None) as registry:
        runner_cls = (
            registry.get(runner_type)
            if isinstance(runner_type, str)
            else runner_type
        )
    if not (
        inspect.isclass(runner_cls)
        and issubclass(runner_cls, SampleSeededRunner)
    ):
        if cfg.get('resume') == 'auto':
            # mmengine's Runner would resume load_from, another run's
            # epoch and optimizer: --resume as mmpretrain's tool sets it
            if cfg.get('load_from'):
                print_log(
                    f'--resume with runner_type={runner_type}: only a '
                    "checkpoint of the work dir is resumed, as mmpretrain's "
                    f'tools/train.py does; load_from={cfg.load_from} is not '
                    'used (SampleSeededRunner starts from it when the work '
                    'dir has no checkpoint).',
                    logger='current',
                    level=logging.WARNING,
                )
            cfg.resume, cfg.load_from = True, None
        warn_stale_variables(cfg)  # SampleSeededRunner's check_config does
        runner = RUNNERS.build(cfg)
        _build_loops(runner, mode)
        return runner
    runner = runner_cls.from_cfg(cfg)
    with runner._failures():
        _build_loops(runner, mode)
    return runner


def _build_loops(runner: Runner, mode: Optional[str]) -> None:
    if mode == 'train':
        runner.train_loop  # noqa: B018  the properties build the loops
        if runner.cfg.get('val_cfg') is not None and runner.cfg.get(
            'val_dataloader'
        ):
            runner.val_loop  # noqa: B018
        runner.optim_wrapper = runner.build_optim_wrapper(runner.optim_wrapper)
    elif mode == 'test':
        runner.test_loop  # noqa: B018
