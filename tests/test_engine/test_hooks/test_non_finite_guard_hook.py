"""NonFiniteGuardHook: a training whose loss stays NaN or infinite stops in
one line, and no checkpoint of non-finite weights is saved."""

import math

import pytest
import torch

from t2t_plugin.engine.hooks import NonFiniteGuardHook, NonFiniteLossError

from ...helpers import DEMO, fake_runner, one_line, run_main


def test_guard_stops_after_consecutive_non_finite_losses():
    hook = NonFiniteGuardHook(max_consecutive=3)
    runner = fake_runner()
    losses = [1.0, math.nan, math.inf, 2.0, math.nan, math.nan]
    for step, loss in enumerate(losses):
        runner.iter = step
        hook.after_train_iter(
            runner, step, outputs={'loss': torch.tensor(loss)}
        )
    runner.iter = 6
    with pytest.raises(NonFiniteLossError) as info:
        hook.after_train_iter(
            runner, 6, outputs={'loss': torch.tensor(math.nan)}
        )
    message = str(info.value)
    assert message.startswith(
        'Training stopped at iteration 7: loss is nan '
        'for 3 iterations in a row.'
    )
    assert 'learning rate' in message and '--amp' in message
    assert 'clip_grad' in message


def test_guard_never_saves_non_finite_weights():
    model = torch.nn.Linear(2, 2)
    hook = NonFiniteGuardHook()
    hook.before_save_checkpoint(
        fake_runner(model), {'state_dict': model.state_dict()}
    )
    with torch.no_grad():
        model.bias[1] = math.inf
    with pytest.raises(NonFiniteLossError, match='weight bias is NaN'):
        hook.before_save_checkpoint(
            fake_runner(model), {'state_dict': model.state_dict()}
        )
    with pytest.raises(NonFiniteLossError, match='no checkpoint is saved'):
        hook.after_train_epoch(fake_runner(model))


def test_diverging_training_stops_in_one_line(tmp_path):
    work_dir = tmp_path / 'work'
    ours = run_main(
        'train', DEMO, '--work-dir', work_dir, '--cfg-options',
        'optim_wrapper.optimizer.lr=1e5', 'train_cfg.max_epochs=4',
        'train_dataloader.batch_size=16',
        'train_dataloader.dataset.indices=64',
        'default_hooks.checkpoint.interval=1', 'train_cfg.val_interval=10',
        'default_hooks.non_finite.max_consecutive=2',
    )  # fmt: skip
    assert ours.returncode == 1, ours.stderr[-2000:]
    assert one_line(ours.stderr).startswith('Training stopped ')
    for path in work_dir.glob('epoch_*.pth'):
        state = torch.load(path)['state_dict']
        assert all(
            torch.isfinite(v).all()
            for v in state.values()
            if v.is_floating_point()
        ), path
