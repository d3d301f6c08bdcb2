import random
from collections.abc import MutableMapping
from typing import Any, Optional

import numpy as np
import torch
from mmengine.dataset import DefaultSampler, InfiniteSampler
from mmengine.dist import all_gather_object, get_rank, get_world_size
from mmengine.hooks import Hook
from mmengine.registry import HOOKS
from torch.utils import data

from ..sample_seeded_runner import checkpoint_folders, lies_in
from ..sample_seeding import SampleSeededDataset, SampleSeedSampler
from .run_checks import (
    bare_model,
    checkpoint_hook,
    plugin_backbone,
    resumed_name,
    start_of,
)

# Where the training settings a resume compares go in a checkpoint's meta.
SETTINGS_KEY = 'train_settings'


def exact_samplers() -> tuple[type, ...]:
    """Samplers and batch samplers whose order follows the seed, the epoch
    and the training process's saved generators only (mmdet's where it is
    installed)."""
    from mmpretrain.datasets import samplers as mmpretrain_samplers

    kinds = [
        DefaultSampler,
        InfiniteSampler,
        mmpretrain_samplers.RepeatAugSampler,
        mmpretrain_samplers.SequentialSampler,
        data.BatchSampler,
        data.DistributedSampler,
        data.RandomSampler,
        data.SequentialSampler,
    ]
    try:
        from mmdet.datasets import samplers as mmdet_samplers
    except ImportError:
        return tuple(kinds)
    return (
        *kinds,
        mmdet_samplers.AspectRatioBatchSampler,
        mmdet_samplers.ClassAwareSampler,
        mmdet_samplers.GroupMultiSourceSampler,
        mmdet_samplers.MultiDataAspectRatioBatchSampler,
        mmdet_samplers.MultiSourceSampler,
    )


def get_random_state() -> dict:
    """This process's random generators: torch (CPU and every CUDA
    device), numpy's global generator and python's ``random``."""
    numpy_state = np.random.get_state()
    return dict(
        torch=torch.get_rng_state(),
        cuda=(
            torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []
        ),
        # as a tensor: the checkpoint loader's safe list needs no numpy
        # generator types then
        numpy=dict(
            name=numpy_state[0],
            keys=torch.from_numpy(numpy_state[1].astype(np.int64)),
            pos=int(numpy_state[2]),
            has_gauss=int(numpy_state[3]),
            cached_gaussian=float(numpy_state[4]),
        ),
        python=random.getstate(),
    )


def set_random_state(state: dict) -> None:
    """Restore the generators saved by :func:`get_random_state`."""
    torch.set_rng_state(state['torch'])
    cuda = state.get('cuda') or []
    if (
        cuda
        and torch.cuda.is_available()
        and len(cuda) == torch.cuda.device_count()
    ):
        torch.cuda.set_rng_state_all(cuda)
    numpy_state = state['numpy']
    np.random.set_state(
        (
            numpy_state['name'],
            numpy_state['keys'].numpy().astype(np.uint32),
            numpy_state['pos'],
            numpy_state['has_gauss'],
            numpy_state['cached_gaussian'],
        )
    )
    python = state['python']
    # a checkpoint stores tuples as lists
    random.setstate((python[0], tuple(python[1]), python[2]))


def _is_exact(sampler) -> bool:
    # the classes themselves: a subclass may order otherwise
    return type(sampler) in exact_samplers()


def _samplers(loader) -> tuple:
    """The loader's per-sample seed sampler (None without one), the
    sampler that orders the samples and the batch sampler (None when the
    loader batches them itself)."""
    batch_sampler = getattr(loader, 'batch_sampler', None)
    sampler = getattr(batch_sampler, 'sampler', None)
    if sampler is None:
        sampler = getattr(loader, 'sampler', None)
    if type(batch_sampler) is data.BatchSampler:
        batch_sampler = None  # torch's, made from batch_size
    if isinstance(sampler, SampleSeedSampler):
        return sampler, sampler.sampler, batch_sampler
    return None, sampler, batch_sampler


def base_lrs(param_groups: Any) -> list[float]:
    """The learning rate each parameter group was configured with (the
    schedulers keep it as ``initial_lr``)."""
    if not isinstance(param_groups, list):
        return []
    return [
        float(group.get('initial_lr', group.get('lr')))
        for group in param_groups
        if isinstance(group, dict) and group.get('lr') is not None
    ]


def train_settings(runner) -> dict:
    """The batch size (all ranks together) and the configured learning
    rates of a training run."""
    loader = runner.train_dataloader
    batch = getattr(loader, 'batch_size', None)
    groups = getattr(runner.optim_wrapper, 'param_groups', None)
    return dict(
        batch_size=batch * get_world_size() if batch else None,
        lr=base_lrs(groups),
    )


def settings_changes(saved: dict, now: dict) -> list[str]:
    """``'batch size 64 -> 32'``, ``'lr 0.001 -> 0.002'``: what differs
    between a checkpoint's training settings and the run's."""
    changes = []
    batches = saved.get('batch_size'), now.get('batch_size')
    if all(batches) and batches[0] != batches[1]:
        changes.append(f'batch size {batches[0]} -> {batches[1]}')
    saved_lr, lr = saved.get('lr') or [], now.get('lr') or []
    if saved_lr and lr and saved_lr != lr:
        changes.append(f'lr {max(saved_lr):g} -> {max(lr):g}')
    return changes


@HOOKS.register_module()
class ExactResumeHook(Hook):
    """Make a resumed run continue exactly as the uninterrupted one, and
    keep it to its own work dir.

    mmengine's checkpoints hold the seed but no generator state, so the
    epochs after a resume draw other dropout masks, drop paths and mixup
    boxes. Each checkpoint gets every rank's torch, numpy and ``random``
    state and the seeds of the samplers under ``random_state``; ``--resume``
    restores them before the training loop starts. Validation puts the
    generators back after it (a resumed run does not repeat it). A warning
    line names any setting that leaves augmentation to the workers' own
    generators or whose sampler order is not known to be reproducible.

    Each checkpoint also records the batch size (all ranks) and learning
    rates it was trained with; a resume with others says so in one warning
    line (the learning rates and their schedule come back from the
    checkpoint's optimizer state; the batch size is the new one). And it
    records the backbone's arch (``meta['t2t_arch']``): a load into
    another arch of the same weight shapes (other heads or strides) is
    then refused by the models' load hooks.

    mmengine's ``CheckpointHook`` takes the path of the best checkpoint
    from the state a resume restores (the checkpoint's message hub) and
    removes that file when a better score comes, wherever it lies:
    ``--resume runA/epoch_1.pth --work-dir runB`` would delete run A's
    best checkpoint. Before the message hub is restored, a path there that
    lies outside the run's checkpoint folders is dropped: the file stays,
    one line says so, and the next best checkpoint is written in this
    run's folder (the best score is kept, so it is the best of the whole
    training).
    """

    # After every other hook of the end of an epoch (their random draws
    # belong to the epoch), before CheckpointHook (VERY_LOW, 90) saves.
    priority = 85

    def __init__(self) -> None:
        self._states: Optional[list[dict]] = None
        self._loaded: Optional[dict] = None
        self._before_val: Optional[dict] = None

    def after_train_epoch(self, runner) -> None:
        """Take every rank's state before CheckpointHook saves."""
        self._states = all_gather_object(get_random_state())

    def after_train_iter(
        self, runner, batch_idx: int, data_batch=None, outputs=None
    ) -> None:
        """Take the state before an iteration-based checkpoint is saved."""
        saver = checkpoint_hook(runner)
        if saver is None or saver.by_epoch:
            return
        if saver.every_n_train_iters(
            runner, saver.interval, saver.save_begin
        ) or saver.is_last_train_iter(runner):
            self._states = all_gather_object(get_random_state())

    def before_val(self, runner) -> None:
        """Remember the generators: validation must not move them."""
        self._before_val = get_random_state()

    def after_val(self, runner) -> None:
        """Put the generators back as they were before validation."""
        if self._before_val is not None:
            set_random_state(self._before_val)
            self._before_val = None

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        """Store the random states, the samplers' seeds, the training
        settings and the backbone's arch."""
        meta = checkpoint.setdefault('meta', {})
        meta[SETTINGS_KEY] = train_settings(runner)
        backbone = plugin_backbone(bare_model(runner))
        if backbone is not None:
            meta['t2t_arch'] = backbone.arch_record()
        states = self._states or [get_random_state()]
        seeder, sampler, _ = _samplers(runner.train_dataloader)
        checkpoint['random_state'] = dict(
            ranks=states,
            sampler_seed=getattr(sampler, 'seed', None),
            sample_seed=getattr(seeder, 'seed', None),
        )

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        """Keep the saved random state for :meth:`before_train`; before a
        resume restores the checkpoint's state, drop the other runs' files
        from it, and name the changed settings."""
        self._loaded = checkpoint.get('random_state')
        start = start_of(runner)
        if not start.resumes:
            return
        self._keep_other_runs(runner, checkpoint)
        meta = checkpoint.get('meta')
        saved = meta.get(SETTINGS_KEY) if isinstance(meta, dict) else None
        if not isinstance(saved, dict):
            return
        changes = settings_changes(saved, train_settings(runner))
        if changes:
            runner.logger.warning(
                f'Resuming {start.load_from} with {", ".join(changes)} '
                '(checkpoint -> this run): the learning rate and its '
                'schedule continue from the checkpoint, the batch size is '
                'the new one.'
            )

    def before_train(self, runner) -> None:
        """Warn about inexact settings; restore the state when resuming."""
        self._warn_inexact(runner)
        loaded, self._loaded = self._loaded, None
        if not start_of(runner).resumes:
            return  # load_from starts a new run: its own random draws
        checkpoint = resumed_name(runner)
        if loaded is None:
            if runner.iter > 0:
                runner.logger.warning(
                    f'The {checkpoint} holds no random state (written '
                    'without ExactResumeHook): the resumed run draws other '
                    'random numbers than an uninterrupted one would.'
                )
            return
        ranks = loaded['ranks']
        same = len(ranks) == get_world_size()
        if not same:
            runner.logger.warning(
                f'The {checkpoint} holds the random state of {len(ranks)} '
                f'processes, this run has {get_world_size()}: each process '
                'starts from the state of rank 0.'
            )
        set_random_state(ranks[get_rank() if same else 0])
        self._restore_seeds(runner, loaded)

    def _restore_seeds(self, runner, loaded: dict) -> None:
        seeder, sampler, _ = _samplers(runner.train_dataloader)
        changed = False
        for part, key in ((sampler, 'sampler_seed'), (seeder, 'sample_seed')):
            seed = loaded.get(key)
            if seed is not None and getattr(part, 'seed', seed) != seed:
                part.seed = seed
                changed = True
        loop = runner.train_loop
        if not changed or not hasattr(loop, 'dataloader_iterator'):
            return
        # An iteration-based loop starts its loader when it is built, before
        # the resume: the first batches were asked for with the new seeds.
        if isinstance(sampler, InfiniteSampler):
            # its index stream, drawn anew from the restored seed
            sampler.indices = InfiniteSampler(
                sampler.dataset, sampler.shuffle, sampler.seed
            ).indices
        elif not hasattr(sampler, 'set_epoch'):
            runner.logger.warning(
                f'train_dataloader.sampler {type(sampler).__name__} made '
                'its order before the resume restored its seed: set '
                'randomness.seed in the config for an exact resume.'
            )
        loop.dataloader_iterator = type(loop.dataloader_iterator)(
            loop.dataloader
        )

    def _warn_inexact(self, runner) -> None:
        loader = runner.train_dataloader
        seeder, sampler, batch_sampler = _samplers(loader)
        seeded = seeder is not None and isinstance(
            loader.dataset, SampleSeededDataset
        )
        if not seeded and getattr(loader, 'num_workers', 0) > 0:
            runner.logger.warning(
                'The training data is augmented with the random generators '
                f'of the data-loader workers ({type(runner).__name__} built '
                'the loader without per-sample seeds): non-persistent '
                'workers repeat the same random numbers every epoch and a '
                'resumed run draws other ones; set runner_type = '
                "'SampleSeededRunner' in the config."
            )
        for key, part in (
            ('sampler', sampler),
            ('batch_sampler', batch_sampler),
        ):
            if part is not None and not _is_exact(part):
                runner.logger.warning(
                    f'train_dataloader.{key} {type(part).__name__} is not '
                    'known to order the samples by the seed and the epoch '
                    'only: a resumed run sees the samples of the '
                    'uninterrupted one only if it does.'
                )

    @staticmethod
    def _keep_other_runs(runner, checkpoint: dict) -> None:
        # the message hub's state_dict(), which mmengine restores
        hub = checkpoint.get('message_hub')
        info = hub.get('runtime_info') if isinstance(hub, dict) else None
        if not isinstance(info, MutableMapping):
            return
        resumed = hub.get('resumed_keys')
        folders = checkpoint_folders(
            runner.work_dir, runner.cfg.get('default_hooks')
        )
        for key in [k for k in info if str(k).startswith('best_ckpt')]:
            best = info[key]
            local = isinstance(best, str) and '://' not in best
            if local and not lies_in(best, folders):
                info.pop(key)
                if isinstance(resumed, MutableMapping):
                    resumed.pop(key, None)
                runner.logger.warning(
                    f'The best checkpoint so far, {best}, lies outside '
                    'this run and is kept; a new best checkpoint goes to '
                    f'{folders[-1]}.'
                )
