import random
from typing import Optional

import numpy as np
import torch
from mmengine.dist import all_gather_object, get_rank, get_world_size
from mmengine.hooks import Hook
from mmengine.registry import HOOKS

# After every other hook of the end of an epoch (their random draws belong
# to the epoch), before CheckpointHook (VERY_LOW, 90) saves.
RANDOM_STATE_PRIORITY = 85


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
    """Restore the generators saved by :func:`get_random_state`.

    Args:
        state (dict): What :func:`get_random_state` returned.
    """
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


@HOOKS.register_module()
class RandomStateHook(Hook):
    """Save every random generator training draws from, so that a resumed
    run continues exactly as the uninterrupted one.

    mmengine's checkpoints hold the seed but no generator state, so the
    epochs after a resume draw other dropout masks, drop paths, augmentations
    and data-loader worker seeds (torch's loader takes each epoch's worker
    base seed from the main process's torch generator; mmengine's
    ``worker_init_fn`` reseeds numpy and ``random`` from the config seed).
    At the end of each epoch this hook gathers the state of torch (CPU and
    CUDA), numpy and python ``random`` from every rank, the checkpoint gets
    it under ``random_state``, and ``--resume`` restores it (each rank its
    own) just before the training loop starts. The sampler's seed is kept
    too: without a config seed it is drawn anew at each start. Validation
    is made neutral (the generators are put back after it), because a
    resumed run does not repeat the validation that followed the save.

    Data-loader workers with ``persistent_workers=True`` keep their own
    generators across epochs, which no checkpoint can hold: resumed runs
    then differ in the workers' random augmentations (a warning says so).
    """

    priority = RANDOM_STATE_PRIORITY

    def __init__(self) -> None:
        self._states: Optional[list[dict]] = None
        self._loaded: Optional[dict] = None
        self._before_val: Optional[dict] = None

    def _gather(self) -> None:
        self._states = all_gather_object(get_random_state())

    def after_train_epoch(self, runner) -> None:
        """Take every rank's state before CheckpointHook saves."""
        self._gather()

    def after_train_iter(
        self, runner, batch_idx: int, data_batch=None, outputs=None
    ) -> None:
        """Take the state before an iteration-based checkpoint is saved."""
        checkpoint_hook = next(
            (
                hook
                for hook in runner.hooks
                if type(hook).__name__ == 'CheckpointHook'
            ),
            None,
        )
        if (
            checkpoint_hook is not None
            and not checkpoint_hook.by_epoch
            and (
                checkpoint_hook.every_n_train_iters(
                    runner,
                    checkpoint_hook.interval,
                    checkpoint_hook.save_begin,
                )
                or checkpoint_hook.is_last_train_iter(runner)
            )
        ):
            self._gather()

    def before_val(self, runner) -> None:
        """Remember the generators: validation must not move them."""
        self._before_val = get_random_state()

    def after_val(self, runner) -> None:
        """Put the generators back as they were before validation."""
        if self._before_val is not None:
            set_random_state(self._before_val)
            self._before_val = None

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        """Store the random states and the sampler seed."""
        states = self._states or [get_random_state()]
        sampler = getattr(runner.train_dataloader, 'sampler', None)
        checkpoint['random_state'] = dict(
            ranks=states, sampler_seed=getattr(sampler, 'seed', None)
        )

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        """Keep the saved state for :meth:`before_train`."""
        self._loaded = checkpoint.get('random_state')

    def before_train(self, runner) -> None:
        """Restore the saved state when resuming."""
        loaded, self._loaded = self._loaded, None
        if not runner._resume:
            return  # load_from starts a new run: its own random draws
        if loaded is None:
            if runner.iter > 0:
                runner.logger.warning(
                    'The checkpoint holds no random state (written without '
                    'RandomStateHook): the resumed run draws other random '
                    'numbers than an uninterrupted one would.'
                )
            return
        ranks = loaded['ranks']
        if len(ranks) != get_world_size():
            runner.logger.warning(
                f'The checkpoint holds the random state of {len(ranks)} '
                f'processes, this run has {get_world_size()}: each process '
                'starts from the state of rank 0.'
            )
        set_random_state(
            ranks[get_rank() if len(ranks) == get_world_size() else 0]
        )
        loader = runner.train_dataloader
        sampler = getattr(loader, 'sampler', None)
        if loaded.get('sampler_seed') is not None and hasattr(sampler, 'seed'):
            sampler.seed = loaded['sampler_seed']
        if (
            getattr(loader, 'persistent_workers', False)
            and getattr(loader, 'num_workers', 0) > 0
        ):
            runner.logger.warning(
                'persistent_workers=True: the data-loader workers restart '
                'with fresh random generators, so random augmentations '
                'after this resume differ from an uninterrupted run; set '
                'persistent_workers=False for an exact resume.'
            )
