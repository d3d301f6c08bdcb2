"""SaveFirstCheckpointHook: mmengine's CheckpointHook, which removes a
checkpoint (the oldest of ``max_keep_ckpts``, the previous best) only once
its successor is saved. The kill during a save, through the tools, is in
test_runtime/test_nothing_lost.py."""

from pathlib import Path
from types import SimpleNamespace

import pytest
from mmengine.hooks import CheckpointHook
from mmengine.logging import MessageHub, MMLogger

from t2t_plugin.runtime.hooks import SaveFirstCheckpointHook


class SavingRunner(SimpleNamespace):
    """What CheckpointHook reads of a runner; ``save_checkpoint`` writes
    the file, or stops as a kill would, before writing, for the file named
    ``fails``."""

    def __init__(self, work_dir: Path, name: str) -> None:
        super().__init__(
            work_dir=str(work_dir),
            message_hub=MessageHub.get_instance(name),
            logger=MMLogger.get_instance(name),
            epoch=0,
            iter=0,
            train_loop=SimpleNamespace(max_epochs=9, max_iters=99),
            max_iters=99,
            fails=None,
        )

    def save_checkpoint(self, out_dir, filename, *args, **kwargs) -> None:
        if filename == self.fails:
            raise RuntimeError('killed while saving')
        Path(out_dir, filename).write_bytes(b'saved')


def names(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.glob('*.pth'))


@pytest.mark.parametrize(
    'hook_type', [SaveFirstCheckpointHook, CheckpointHook]
)
def test_the_best_checkpoint_is_removed_after_the_next_is_saved(
    hook_type, tmp_path
):
    runner = SavingRunner(tmp_path, f'best_{hook_type.__name__}')
    hook = hook_type(interval=1, save_best='acc', rule='greater')
    hook.before_train(runner)
    hook.after_val_epoch(runner, dict(acc=0.5))
    runner.epoch = 1
    hook.after_val_epoch(runner, dict(acc=0.4))  # not better: kept
    assert names(tmp_path) == ['best_acc_epoch_0.pth']
    assert hook.best_ckpt_path == str(tmp_path / 'best_acc_epoch_0.pth')
    runner.epoch = 2
    hook.after_val_epoch(runner, dict(acc=0.6))
    assert names(tmp_path) == ['best_acc_epoch_2.pth']
    assert runner.message_hub.get_info('best_ckpt') == hook.best_ckpt_path
    runner.epoch, runner.fails = 3, 'best_acc_epoch_3.pth'
    with pytest.raises(RuntimeError):
        hook.after_val_epoch(runner, dict(acc=0.7))
    # mmengine's hook removed the only best checkpoint before saving
    kept = [] if hook_type is CheckpointHook else ['best_acc_epoch_2.pth']
    assert names(tmp_path) == kept


def test_the_oldest_checkpoint_is_removed_after_the_next_is_saved(tmp_path):
    runner = SavingRunner(tmp_path, 'rolling')
    hook = SaveFirstCheckpointHook(interval=1, max_keep_ckpts=2)
    hook.before_train(runner)
    for epoch in range(3):
        runner.epoch = epoch
        hook.after_train_epoch(runner)
    assert names(tmp_path) == ['epoch_2.pth', 'epoch_3.pth']
    assert runner.message_hub.get_info('keep_ckpt_ids') == [2, 3]
    runner.epoch, runner.fails = 3, 'epoch_4.pth'
    with pytest.raises(RuntimeError):
        hook.after_train_epoch(runner)
    assert names(tmp_path) == ['epoch_2.pth', 'epoch_3.pth']
    # a resume restores the ids saved with the last checkpoint, the one
    # about to be removed among them
    resumed = SavingRunner(tmp_path, 'rolling_resumed')
    resumed.message_hub.update_info('keep_ckpt_ids', [1, 2, 3])
    hook = SaveFirstCheckpointHook(interval=1, max_keep_ckpts=2)
    hook.before_train(resumed)
    resumed.epoch = 3
    hook.after_train_epoch(resumed)
    assert names(tmp_path) == ['epoch_3.pth', 'epoch_4.pth']


def test_by_iteration_too(tmp_path):
    runner = SavingRunner(tmp_path, 'by_iteration')
    hook = SaveFirstCheckpointHook(
        interval=2, by_epoch=False, max_keep_ckpts=1
    )
    hook.before_train(runner)
    for runner.iter in range(5):
        hook.after_train_iter(runner, runner.iter)
    assert names(tmp_path) == ['iter_4.pth']
    runner.iter, runner.fails = 5, 'iter_6.pth'
    with pytest.raises(RuntimeError):
        hook.after_train_iter(runner, 5)
    assert names(tmp_path) == ['iter_4.pth']
