import math
from typing import Optional

import torch
from mmengine.hooks import Hook
from mmengine.registry import HOOKS

from ...datasets.option_checks import check_int
from ...models.checkpoint_checks import non_finite_tensors
from .run_checks import TrainingStopped

# Runs after the optimizer step's hooks and before CheckpointHook
# (VERY_LOW, 90), so that a diverged model is never saved.
GUARD_PRIORITY = 80
_ADVICE = (
    'Try a lower learning rate, training without --amp, or gradient '
    'clipping (optim_wrapper.clip_grad=dict(max_norm=1.0)); resume from the '
    'last checkpoint.'
)


class NonFiniteLossError(TrainingStopped):
    """Training produced non-finite losses or weights."""


@HOOKS.register_module()
class NonFiniteGuardHook(Hook):
    """Stop a diverging run and keep non-finite weights out of checkpoints.

    mmengine goes on training (and saving checkpoints, which may push good
    ones out of ``max_keep_ckpts``) when the loss turns into NaN. This hook
    stops after ``max_consecutive`` non-finite losses in a row (one
    overflow does not), and before any checkpoint with NaN or infinite
    weights is written. The loss judged is the total the optimizer steps
    on: every entry of the step's outputs whose key holds ``loss`` (an
    auxiliary loss of a research head as well as the head's own), the
    entries mmengine's ``parse_losses`` sums.

    Args:
        max_consecutive (int): Consecutive non-finite losses that stop
            training. Defaults to 5.
    """

    priority = GUARD_PRIORITY

    def __init__(self, max_consecutive: int = 5) -> None:
        check_int('NonFiniteGuardHook', 'max_consecutive', max_consecutive)
        self.max_consecutive = max_consecutive
        self.count = 0

    def after_train_iter(
        self,
        runner,
        batch_idx: int,
        data_batch=None,
        outputs: Optional[dict] = None,
    ) -> None:
        """Count consecutive non-finite total losses; stop at the limit."""
        losses = {
            key: float(torch.as_tensor(value).detach().double().mean())
            for key, value in (outputs or {}).items()
            if 'loss' in key
        }
        if not losses:
            return
        bad = [
            key for key, value in losses.items() if not math.isfinite(value)
        ]
        if not bad:
            self.count = 0
            return
        self.count += 1
        if self.count >= self.max_consecutive:
            # mmengine's parse_losses sums every entry whose key holds
            # 'loss' (its total, or the head's own 'loss' that replaced
            # it in the outputs): any non-finite term makes the sum so
            total = sum(losses.values())
            terms = ', '.join(
                f'{key}={losses[key]}' for key in bad if key != 'loss'
            )
            raise NonFiniteLossError(
                f'Training stopped at iteration {runner.iter + 1}: loss is '
                f'{total}{f" ({terms})" if terms else ""} for {self.count} '
                f'iterations in a row. {_ADVICE}'
            )

    def after_train_epoch(self, runner) -> None:
        """Refuse to go on (and to save) with non-finite weights."""
        self._check(runner.model.state_dict(), runner.epoch + 1)

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        """Refuse to write a checkpoint with non-finite weights."""
        for key in ('state_dict', 'ema_state_dict'):
            if isinstance(checkpoint.get(key), dict):
                self._check(checkpoint[key], runner.epoch)

    @staticmethod
    def _check(state_dict: dict, epoch: int) -> None:
        bad = non_finite_tensors(state_dict)
        if bad:
            raise NonFiniteLossError(
                f'Training stopped after epoch {epoch}: weight {bad[0]} is '
                f'NaN or infinite, so no checkpoint is saved. {_ADVICE}'
            )
