from collections.abc import MutableMapping
from typing import Any, Optional

from mmengine.dist import get_world_size
from mmengine.hooks import Hook
from mmengine.registry import HOOKS

from t2t_preflight.errors import RunCheckError

from ..sample_seeded_runner import checkpoint_folders, lies_in
from .run_checks import start_of

# Where the training settings a resume compares go in a checkpoint's meta.
SETTINGS_KEY = 'train_settings'


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


def group_sizes(param_groups: Any) -> list[int]:
    """How many parameters each optimizer group holds ([] if unknown)."""
    if not isinstance(param_groups, list):
        return []
    return [
        len(group['params'])
        for group in param_groups
        if isinstance(group, dict) and isinstance(group.get('params'), list)
    ]


def optimizer_mismatch(path: str, saved: Any, now: Any) -> Optional[str]:
    """One line if the optimizer state of checkpoint ``path`` (its
    ``param_groups``) was saved for other parameters than the run's
    optimizer holds (``now``), else None."""
    saved_groups = (
        saved.get('param_groups') if isinstance(saved, dict) else None
    )
    before, after = group_sizes(saved_groups), group_sizes(now)
    if not before or not after or before == after:
        return None
    return (
        f'The checkpoint {path} holds the optimizer state of '
        f'{sum(before)} parameters in {len(before)} groups, this run '
        f'optimises {sum(after)} in {len(after)}: the trainable parts of '
        'the model differ (e.g. a training-only loss switched on or off). '
        'Resume with the config it was trained with, or start a new '
        f'training from its weights with load_from={path} instead of '
        '--resume.'
    )


@HOOKS.register_module()
class ResumeGuardHook(Hook):
    """Keep a resumed run to its own work dir, and say what it changes.

    mmengine's ``CheckpointHook`` takes the path of the best checkpoint
    from the state a resume restores (the checkpoint's message hub) and
    removes that file when a better score comes, wherever it lies:
    ``--resume runA/epoch_1.pth --work-dir runB`` would delete run A's
    best checkpoint. Before the message hub is restored, a path there that
    lies outside the run's checkpoint folders is dropped: the file stays,
    one line says so, and the next best checkpoint is written in this
    run's folder (the best score is kept, so it is the best of the whole
    training).

    Each checkpoint records the batch size (all ranks) and learning rates
    it was trained with; a resume with others says so in one warning line
    (the learning rates and their schedule come back from the checkpoint's
    optimizer state; the batch size is the new one). An optimizer state
    saved for other parameters (a part switched on or off) is refused in
    one line, before mmengine's ``load_state_dict`` fails on it.
    """

    priority = 'VERY_HIGH'

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        """Record the run's batch size and learning rates."""
        meta = checkpoint.setdefault('meta', {})
        meta[SETTINGS_KEY] = train_settings(runner)

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        """Before a resume restores the checkpoint's state: drop the
        other runs' files from it, and name the changed settings."""
        start = start_of(runner)
        path = start.load_from
        if not start.resumes:
            return
        problem = optimizer_mismatch(
            path,
            checkpoint.get('optimizer'),
            getattr(runner.optim_wrapper, 'param_groups', None),
        )
        if problem:
            raise RunCheckError(problem)
        self._keep_other_runs(runner, checkpoint)
        meta = checkpoint.get('meta')
        saved = meta.get(SETTINGS_KEY) if isinstance(meta, dict) else None
        if not isinstance(saved, dict):
            return
        now = train_settings(runner)
        changes = settings_changes(saved, now)
        if changes:
            runner.logger.warning(
                f'Resuming {path} with {", ".join(changes)} (checkpoint '
                '-> this run): the learning rate and its schedule continue '
                'from the checkpoint, the batch size is the new one.'
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
