"""NonFiniteGuardHook: a training whose loss stays NaN or infinite stops in
one line, and no checkpoint of non-finite weights is saved."""

import math

import pytest
import torch
from mmpretrain.structures import DataSample

from t2t_plugin.runtime.hooks import NonFiniteGuardHook, NonFiniteLossError

from ...helpers import (
    DEMO,
    MMPRETRAIN_TOOLS,
    digit_model,
    fake_runner,
    one_line,
    run_main,
)


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


@pytest.fixture
def nan_auxiliary_loss(monkeypatch):
    """The demo's head with an auxiliary loss that is NaN at every step,
    beside a finite classification loss."""
    from t2t_plugin.models.heads import T2TClsHead

    loss = T2TClsHead.loss

    def with_nan_term(self, feats, data_samples, **kwargs):
        losses = loss(self, feats, data_samples, **kwargs)
        losses['loss_aux'] = feats[-1].sum() * math.nan
        return losses

    monkeypatch.setattr(T2TClsHead, 'loss', with_nan_term)


def test_guard_judges_the_total_loss_of_the_step(nan_auxiliary_loss):
    from mmengine.optim import OptimWrapper

    model = digit_model()
    optim_wrapper = OptimWrapper(torch.optim.SGD(model.parameters(), lr=0.1))
    batch = dict(
        inputs=[torch.randint(0, 255, (1, 8, 8), dtype=torch.uint8)] * 2,
        data_samples=[DataSample().set_gt_label(d) for d in (3, 7)],
    )
    outputs = model.train_step(batch, optim_wrapper)
    # mmengine's outputs: the head's 'loss' in place of the total
    assert math.isfinite(float(outputs['loss'].detach()))
    assert math.isnan(float(outputs['loss_aux'].detach()))
    hook = NonFiniteGuardHook(max_consecutive=2)
    runner = fake_runner()
    hook.after_train_iter(runner, 0, outputs=outputs)
    runner.iter = 1
    with pytest.raises(NonFiniteLossError) as info:
        hook.after_train_iter(runner, 1, outputs=outputs)
    assert str(info.value).startswith(
        'Training stopped at iteration 2: loss is nan (loss_aux=nan) for 2 '
        'iterations in a row.'
    )


@pytest.mark.parametrize('tool', ['train', MMPRETRAIN_TOOLS / 'train.py'])
def test_a_nan_auxiliary_loss_stops_training(
    tool, nan_auxiliary_loss, tmp_path
):
    work_dir = tmp_path / 'work'
    result = run_main(
        tool, DEMO, '--work-dir', work_dir, '--cfg-options',
        'train_cfg.max_epochs=2', 'train_dataloader.batch_size=16',
        'train_dataloader.dataset.indices=64',
        'default_hooks.checkpoint.interval=1',
        'default_hooks.non_finite.max_consecutive=3',
    )  # fmt: skip
    assert result.returncode == 1, result.stderr[-2000:]
    assert (
        'Training stopped at iteration 3: loss is nan (loss_aux=nan) for 3 '
        'iterations in a row.'
    ) in result.stderr
    assert not list(work_dir.glob('*.pth'))
