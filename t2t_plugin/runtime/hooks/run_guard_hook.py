import atexit
import math
import os.path as osp
import shutil
import threading
from typing import Any, Optional

import torch
import torch.distributed as torch_dist
from mmengine.hooks import Hook
from mmengine.registry import HOOKS
from mmengine.runner import EpochBasedTrainLoop

from t2t_preflight.errors import RunCheckError, TrainingStopped

from ...compat import default_store
from ...option_checks import check_int
from ..checkpoint_fit import non_finite_tensors
from ..distributed import HEARTBEAT_INTERVAL, heartbeat_key
from ..skip_bad_images import BadImage, SkipBadImages, base_datasets
from .run_checks import checkpoint_hook, dotted_getattr, t2t_module

# The fields that carry a prediction in mmpretrain, mmdet and mmseg.
_PREDICTION_FIELDS = (
    'pred_score',
    'pred_instances.scores',
    'pred_instances.bboxes',
    'seg_logits.data',
)
_ADVICE = (
    'Try a lower learning rate, training without --amp, or gradient '
    'clipping (optim_wrapper.clip_grad=dict(max_norm=1.0)); resume from the '
    'last checkpoint.'
)


def _tensor_bytes(obj: Any) -> int:
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, dict):
        return sum(_tensor_bytes(value) for value in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_tensor_bytes(value) for value in obj)
    return 0


def _beat(store, key: str, stop: threading.Event) -> None:
    while not stop.wait(HEARTBEAT_INTERVAL):
        try:
            store.add(key, 1)
        except Exception:  # the store went away with its rank: stop
            return


@HOOKS.register_module()
class RunGuardHook(Hook):
    """Guard a run as it goes: stop what would waste it or save a broken
    model, and skip the images it cannot use.

    - **Non-finite losses and weights.** mmengine goes on training (and
      saving checkpoints, which may push good ones out of
      ``max_keep_ckpts``) when the loss turns into NaN. Training stops
      after ``max_consecutive`` non-finite losses in a row (one overflow
      does not), and before any checkpoint with NaN or infinite weights is
      written. The loss judged is the total the optimizer steps on: every
      entry of the step's outputs whose key holds ``loss``, the entries
      mmengine's ``parse_losses`` sums.
    - **Non-finite predictions.** The metrics hide NaN scores (one is
      simply never the top class): after they are logged, a test with such
      predictions fails with the count, not with exit 0.
    - **Bad images.** Before training, each validation and test it puts
      :class:`~t2t_plugin.runtime.SkipBadImages` in front of the pipeline
      of every dataset the loop reads (inside any dataset wrappers;
      ``SampleSeededRunner`` has it guard the training loader before an
      iteration-based loop starts the loader's workers), with the
      backbone's channels and total stride, so that images the model
      cannot take are skipped too. One line per epoch, evaluation or test
      sums up the skipped images; more than ``max_bad_images`` different
      ones stop the run.
    - **Disk space.** A save the disk cannot hold stops training with the
      last checkpoint intact.
    - **Silent ranks.** In a distributed run, a background thread adds 1
      to this rank's counter in the process group's store every
      :data:`HEARTBEAT_INTERVAL` seconds; when a collective times out, the
      counters that no longer move name the ranks that stopped answering
      (``SampleSeededRunner`` names them in the error that ends the run).

    Args:
        max_consecutive (int): Consecutive non-finite losses that stop
            training. Defaults to 5.
        max_bad_images (int): Distinct bad images that stop the run.
            Defaults to 100.
    """

    # After the optimizer step's hooks and LoggerHook (BELOW_NORMAL: the
    # metrics are logged before a test fails), before CheckpointHook
    # (VERY_LOW, 90): a diverged model is never saved.
    priority = 80

    def __init__(
        self, max_consecutive: int = 5, max_bad_images: int = 100
    ) -> None:
        check_int('RunGuardHook', 'max_consecutive', max_consecutive)
        check_int('RunGuardHook', 'max_bad_images', max_bad_images, 0)
        self.max_consecutive = max_consecutive
        self.max_bad_images = max_bad_images
        self.non_finite_losses = 0
        self.non_finite_outputs = self.outputs = 0
        self.wrappers: dict[str, list[SkipBadImages]] = {}
        self.bad: set = set()
        # by mode: an iteration-based run validates before its one
        # after_train_epoch, which sums up the training's reports
        self.reports: dict[str, list[BadImage]] = {}
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    # -- bad images --------------------------------------------------------

    def guard_loader(self, runner, loader, key: str) -> None:
        """Guard the pipelines of the datasets ``loader`` reads (the
        ``key`` loader of the run), before it is first iterated: its
        workers copy the datasets when they start."""
        # mmdet's and mmseg's data preprocessors pad any size and channels
        # are the model's business there: only classifiers are checked.
        scope = runner.cfg.get('default_scope', 'mmpretrain')
        t2t = t2t_module(runner) if scope == 'mmpretrain' else None
        limits = dict(
            in_channels=getattr(t2t, 'in_channels', None),
            size_multiple=getattr(t2t, 'total_stride', None),
        )
        self.wrappers[key] = [
            SkipBadImages.wrap(dataset, **limits)
            for dataset in base_datasets(loader.dataset)
        ]

    def _guard(self, runner, mode: str) -> None:
        loader = getattr(runner, f'{mode}_dataloader')
        self.guard_loader(runner, loader, f'{mode}_dataloader')

    def before_train(self, runner) -> None:
        """Guard the training datasets; start the heartbeat thread."""
        self._guard(runner, 'train')
        self.start_heartbeat()

    def start_heartbeat(self) -> None:
        """Start the heartbeat thread (in a distributed run)."""
        if not (torch_dist.is_available() and torch_dist.is_initialized()):
            return
        # a fresh event: the one of an earlier train() of this hook is set
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=_beat,
            args=(
                default_store(),
                heartbeat_key(torch_dist.get_rank()),
                self._stop,
            ),
            daemon=True,
        )
        self._thread.start()
        # A run ended by an error never reaches after_train: stop the
        # thread before the interpreter shuts down, which ends a daemon
        # thread wherever it is, a store call included.
        atexit.register(self.stop_heartbeat)

    def before_val(self, runner) -> None:
        """Guard the validation datasets."""
        self._guard(runner, 'val')

    def before_test(self, runner) -> None:
        """Guard the test datasets."""
        self._guard(runner, 'test')
        self.non_finite_outputs = self.outputs = 0

    def _after_iter(
        self, runner, batch_idx, data_batch=None, outputs=None, mode='train'
    ) -> None:
        """Collect the skipped images; stop past the limit."""
        for wrapper in self.wrappers.get(f'{mode}_dataloader', ()):
            reports = wrapper.drain()
            self.reports.setdefault(mode, []).extend(reports)
            self.bad.update(report.path for report in reports)
        if len(self.bad) > self.max_bad_images:
            where = (
                f'at iteration {runner.iter + 1}'
                if mode == 'train'
                else f'in {mode}'
            )
            raise TrainingStopped(
                f'Run stopped {where}: {len(self.bad)} different images '
                f'could not be used (more than max_bad_images='
                f'{self.max_bad_images}), e.g. '
                f'{", ".join(sorted(self.bad)[:3])}; check the dataset (see '
                'the warnings in the log).'
            )
        if mode == 'train':
            self._count_non_finite_losses(runner, outputs)
        elif mode == 'test':
            for sample in outputs or ():
                self.outputs += 1
                found = {
                    p: dotted_getattr(sample, p) for p in _PREDICTION_FIELDS
                }
                if non_finite_tensors(found):
                    self.non_finite_outputs += 1

    def _after_epoch(self, runner, mode: str = 'train') -> None:
        """Sum up the images skipped since the last line."""
        reports = self.reports.pop(mode, [])
        if not reports:
            return
        what = dict(val='Evaluation', test='Test').get(mode)
        if what is None:
            by_epoch = isinstance(runner.train_loop, EpochBasedTrainLoop)
            what = f'Epoch {runner.epoch + 1}' if by_epoch else 'Training'
        paths = sorted({report.path for report in reports})
        shown = ', '.join(paths[:10]) + (' ...' if len(paths) > 10 else '')
        # a bad image tried in place of another is not one more sample
        samples = sum(report.asked_for for report in reports)
        runner.logger.warning(
            f'{what}: skipped '
            f'{samples} sample(s) from {len(paths)} image(s) that '
            f'could not be used (each replaced by the next image): {shown}'
        )

    # -- non-finite losses, weights and predictions ------------------------

    def _count_non_finite_losses(self, runner, outputs: Optional[dict]):
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
            self.non_finite_losses = 0
            return
        self.non_finite_losses += 1
        if self.non_finite_losses >= self.max_consecutive:
            # mmengine's parse_losses sums every entry whose key holds
            # 'loss' (its total, or the head's own 'loss' that replaced
            # it in the outputs): any non-finite term makes the sum so
            total = sum(losses.values())
            terms = ', '.join(
                f'{key}={losses[key]}' for key in bad if key != 'loss'
            )
            raise TrainingStopped(
                f'Training stopped at iteration {runner.iter + 1}: loss is '
                f'{total}{f" ({terms})" if terms else ""} for '
                f'{self.non_finite_losses} iterations in a row. {_ADVICE}'
            )

    def after_train_epoch(self, runner) -> None:
        """Sum up the skipped images; refuse to go on (and to save) with
        non-finite weights."""
        self._after_epoch(runner, 'train')
        self._check_weights(runner.model.state_dict(), runner.epoch + 1)

    def after_test_epoch(self, runner, metrics: Optional[dict] = None) -> None:
        """Sum up the skipped images; fail a test whose predictions hold
        NaN or infinite values."""
        self._after_epoch(runner, 'test')
        if self.non_finite_outputs:
            raise RunCheckError(
                f'{self.non_finite_outputs} of {self.outputs} predictions '
                'hold NaN or infinite values: the metrics above are not '
                'meaningful.'
            )

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        """Refuse to write a checkpoint with non-finite weights, or one the
        disk cannot hold."""
        for key in ('state_dict', 'ema_state_dict'):
            if isinstance(checkpoint.get(key), dict):
                self._check_weights(checkpoint[key], runner.epoch)
        saver = checkpoint_hook(runner)
        folder = getattr(saver, 'out_dir', None) or runner.work_dir
        if '://' in str(folder) or not osp.isdir(folder):
            return
        needed = _tensor_bytes(checkpoint)
        free = shutil.disk_usage(folder).free
        # the atomic backend writes the new file before it replaces the
        # old one; a tenth more for the pickled structure around tensors
        if needed * 1.1 > free:
            raise TrainingStopped(
                'Training stopped before saving a checkpoint: it needs about '
                f'{needed / 2**20:.1f} MiB, {folder} has '
                f'{free / 2**20:.1f} MiB free; free some space (or lower '
                'default_hooks.checkpoint.max_keep_ckpts) and resume with '
                '--resume.'
            )

    @staticmethod
    def _check_weights(state_dict: dict, epoch: int) -> None:
        bad = non_finite_tensors(state_dict)
        if bad:
            raise TrainingStopped(
                f'Training stopped after epoch {epoch}: weight {bad[0]} is '
                f'NaN or infinite, so no checkpoint is saved. {_ADVICE}'
            )

    # -- heartbeat ---------------------------------------------------------

    def after_train(self, runner) -> None:
        """Stop the heartbeat thread."""
        self.stop_heartbeat()

    def stop_heartbeat(self) -> None:
        """Stop the heartbeat thread and wait for it (a few seconds at
        most)."""
        # once stopped, nothing is left for the exit (and a process that
        # runs many trainings keeps no hook alive for it)
        atexit.unregister(self.stop_heartbeat)
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * HEARTBEAT_INTERVAL)
