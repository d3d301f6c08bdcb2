from collections.abc import Sequence
from typing import Any, Optional

from mmengine.hooks import Hook
from mmengine.registry import HOOKS

from ...models.checkpoint_checks import non_finite_tensors
from .run_checks import RunCheckError, dotted_getattr

# The fields that carry a prediction in mmpretrain, mmdet and mmseg.
_PREDICTION_FIELDS = (
    'pred_score',
    'pred_instances.scores',
    'pred_instances.bboxes',
    'seg_logits.data',
)


@HOOKS.register_module()
class NonFiniteOutputHook(Hook):
    """Fail a test whose predictions hold NaN or infinite values.

    The metrics hide NaN scores (one is simply never the top class), so
    after they are logged this hook raises :class:`RunCheckError` with the
    count, and the run does not end with exit 0.
    """

    # after LoggerHook (BELOW_NORMAL) has logged the metrics
    priority = 'VERY_LOW'

    def __init__(self) -> None:
        self.count = 0
        self.total = 0

    def before_test(self, runner) -> None:
        self.count = self.total = 0

    def after_test_iter(
        self,
        runner,
        batch_idx: int,
        data_batch: Any = None,
        outputs: Optional[Sequence] = None,
    ) -> None:
        for sample in outputs or ():
            self.total += 1
            found = {p: dotted_getattr(sample, p) for p in _PREDICTION_FIELDS}
            if non_finite_tensors(found):
                self.count += 1

    def after_test_epoch(self, runner, metrics: Optional[dict] = None) -> None:
        if self.count:
            raise RunCheckError(
                f'{self.count} of {self.total} predictions hold NaN or '
                'infinite values: the metrics above are not meaningful.'
            )
