"""RunGuardHook: a training whose loss stays NaN or infinite stops in one
line, and no checkpoint of non-finite weights is saved; the images a run
cannot use are replaced by the next usable one, counted in one line per
epoch, evaluation or test, and stop the run past a limit; a frozen rank
ends a distributed run within the timeout, and the line names it."""

import math
import os
import select
import shutil
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Optional

import pytest
import torch
import torch.distributed as torch_dist
from mmengine.config import Config
from mmpretrain.registry import DATASETS
from mmpretrain.structures import DataSample

from t2t_plugin.compat import default_store
from t2t_plugin.runtime import SkipBadImages
from t2t_plugin.runtime.distributed import HEARTBEAT_INTERVAL, heartbeat_key
from t2t_plugin.runtime.hooks import (
    RunGuardHook,
    TrainingStopped,
    run_guard_hook,
)

from ...helpers import (
    CUSTOM,
    DEMO,
    MMPRETRAIN_TOOLS,
    TINY_DEMO,
    as_dict,
    custom_options,
    digit_model,
    door,
    fake_runner,
    free_port,
    one_line,
    plain_runner,
    run_main,
    write_class_folders,
    write_image,
)
from ...test_datasets.image_folders import (
    lite_options,
    train_through_both_tools,
)


def test_guard_stops_after_consecutive_non_finite_losses():
    hook = RunGuardHook(max_consecutive=3)
    runner = fake_runner()
    losses = [1.0, math.nan, math.inf, 2.0, math.nan, math.nan]
    for step, loss in enumerate(losses):
        runner.iter = step
        hook.after_train_iter(
            runner, step, outputs={'loss': torch.tensor(loss)}
        )
    runner.iter = 6
    with pytest.raises(TrainingStopped) as info:
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
    hook = RunGuardHook()
    hook.before_save_checkpoint(
        fake_runner(model), {'state_dict': model.state_dict()}
    )
    with torch.no_grad():
        model.bias[1] = math.inf
    with pytest.raises(TrainingStopped, match='weight bias is NaN'):
        hook.before_save_checkpoint(
            fake_runner(model), {'state_dict': model.state_dict()}
        )
    with pytest.raises(TrainingStopped, match='no checkpoint is saved'):
        hook.after_train_epoch(fake_runner(model))


def test_diverging_training_stops_in_one_line(tmp_path):
    work_dir = tmp_path / 'work'
    ours = run_main(
        'train', DEMO, '--work-dir', work_dir, '--cfg-options',
        'optim_wrapper.optimizer.lr=1e5', 'train_cfg.max_epochs=4',
        'train_dataloader.batch_size=16',
        'train_dataloader.dataset.indices=64',
        'default_hooks.checkpoint.interval=1', 'train_cfg.val_interval=10',
        'default_hooks.run_guard.max_consecutive=2',
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
    hook = RunGuardHook(max_consecutive=2)
    runner = fake_runner()
    hook.after_train_iter(runner, 0, outputs=outputs)
    runner.iter = 1
    with pytest.raises(TrainingStopped) as info:
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
        'default_hooks.run_guard.max_consecutive=3',
    )  # fmt: skip
    assert result.returncode == 1, result.stderr[-2000:]
    assert (
        'Training stopped at iteration 3: loss is nan (loss_aux=nan) for 3 '
        'iterations in a row.'
    ) in result.stderr
    assert not list(work_dir.glob('*.pth'))


def bad_image_folder(root: Path) -> None:
    for name in ('a/good0', 'a/good1', 'b/good2'):
        write_image(root / f'{name}.png', (8, 8), content='flat', mode='L')
    (root / 'a' / 'empty.png').write_bytes(b'')
    (root / 'a' / 'text.png').write_text('not an image')
    data = (root / 'a' / 'good0.png').read_bytes()
    (root / 'b' / 'truncated.png').write_bytes(data[: len(data) // 2])
    write_image(root / 'b' / 'odd.png', (9, 9), content='flat', mode='L')


@pytest.mark.parametrize('test_mode', [False, True])
def test_bad_images_are_replaced_counted_and_limited(test_mode, tmp_path):
    bad_image_folder(tmp_path)
    dataset = DATASETS.build(
        dict(
            type='CustomDataset',
            data_root=str(tmp_path),
            test_mode=test_mode,
            pipeline=[
                dict(type='LoadImageFromFile', color_type='grayscale'),
                dict(type='PackInputs'),
            ],
        )
    )
    wrapper = SkipBadImages.wrap(dataset, in_channels=1, size_multiple=2)
    assert SkipBadImages.wrap(dataset) is wrapper  # once
    names = [
        Path(dataset[i]['data_samples'].img_path).name
        for i in range(len(dataset))
    ]
    # a/empty a/good0 a/good1 a/text b/good2 b/odd b/truncated: each bad
    # one is replaced by the next usable one (b/truncated by a/good0)
    assert names == [
        'good0.png',
        'good0.png',
        'good1.png',
        'good2.png',
        'good2.png',
        'good0.png',
        'good0.png',
    ]
    time.sleep(0.2)  # the queue's feeder thread
    reports = wrapper.drain()
    assert {Path(report.path).name for report in reports} == {
        'empty.png',
        'odd.png',
        'text.png',
        'truncated.png',
    }
    # b/odd tries b/truncated and a/empty in its place, b/truncated tries
    # a/empty: 7 bad images met, 4 samples replaced
    assert len(reports) == 7
    assert sorted(
        Path(report.path).name for report in reports if report.asked_for
    ) == ['empty.png', 'odd.png', 'text.png', 'truncated.png']
    odd = next(r.problem for r in reports if r.path.endswith('odd.png'))
    assert (
        odd == '9x9 pixels after the pipeline, not multiples of the stride 2'
    )
    hook = RunGuardHook(max_bad_images=3)
    hook.wrappers = {'test_dataloader': [wrapper]}
    for report in reports:
        wrapper.reports.put(report)
    time.sleep(0.2)
    with pytest.raises(TrainingStopped, match='4 different images'):
        hook.after_test_iter(fake_runner(), 0)


def test_a_bad_validation_image_is_skipped_and_counted(tmp_path):
    root = write_class_folders(tmp_path / 'data', suffix='.png')
    empty = root / 'val' / 'c1' / '0.png'
    empty.write_bytes(b'')
    options = custom_options(root) + ['train_cfg.val_interval=1']
    ours = run_main(
        'train', CUSTOM, '--work-dir', tmp_path / 'w', '--cfg-options',
        *options,
    )  # fmt: skip
    assert ours.returncode == 0, ours.stderr[-2000:]
    assert (
        'Evaluation: skipped 1 sample(s) from 1 image(s) that could not be '
        f'used (each replaced by the next image): {empty}'
    ) in ours.stdout
    checkpoint = tmp_path / 'w' / 'epoch_1.pth'
    tested = run_main(
        'test', CUSTOM, checkpoint, '--work-dir', tmp_path / 'w',
        '--cfg-options', *options,
    )  # fmt: skip
    assert tested.returncode == 0, tested.stderr[-2000:]
    assert 'Test: skipped 1 sample(s) from 1 image(s)' in tested.stdout
    assert 'accuracy/top1: ' in tested.stdout
    # a Runner of the config, as mmpretrain's test.py builds it
    cfg = Config.fromfile(CUSTOM)
    cfg.merge_from_dict(as_dict(options))
    cfg.merge_from_dict(
        dict(work_dir=str(tmp_path / 'd'), load_from=str(checkpoint))
    )
    runner = plain_runner(cfg)
    runner.test()
    hook = next(h for h in runner.hooks if isinstance(h, RunGuardHook))
    assert hook.bad == {str(empty)}


def test_bad_images_in_a_row_count_once_each(tmp_path):
    """Three bad training images in a row: the first sample tries all
    three before a usable one, yet an epoch that reads each sample once
    skipped 3 samples, not 3 + 2 + 1."""
    root = write_class_folders(tmp_path / 'data')
    bad = []
    for index in range(3):
        path = root / 'train' / 'c1' / f'bad{index}.jpg'
        data = write_image(path, (32, 32), index, 'noise').read_bytes()
        path.write_bytes(data[: len(data) // 2])
        bad.append(str(path))
    for done in train_through_both_tools(tmp_path, lite_options(root)):
        assert done.returncode == 0, done.stderr[-3000:]
        assert (
            'Epoch 1: skipped 3 sample(s) from 3 image(s) that could not be '
            f'used (each replaced by the next image): {", ".join(bad)}'
        ) in done.stdout


def frozen_rank() -> None:
    """Rank ``RANK`` of a 2-rank gloo group that all-reduces 50 times:
    rank 1 stops itself (SIGSTOP) at its 4th step, rank 0 ends with the
    line of the TrainingStopped it gets on stderr and exit code 1."""
    from t2t_plugin.runtime.distributed import init_cpu_dist
    from t2t_plugin.runtime.sample_seeded_runner import one_line_failures

    init_cpu_dist('pytorch', timeout=3)
    hook, rank = RunGuardHook(), torch_dist.get_rank()
    hook.start_heartbeat()
    try:
        with one_line_failures(timeout=3):
            for step in range(50):
                if rank == 1 and step == 3:
                    os.kill(os.getpid(), signal.SIGSTOP)
                torch_dist.all_reduce(torch.ones(4))
    except TrainingStopped as error:
        print(error, file=sys.stderr)
        sys.exit(1)


def start_rank(rank: int, env: dict) -> tuple[int, int]:
    """:func:`frozen_rank` as ``rank`` in a process of its own, a fork of
    this one (which has imported the plugin already): its process id and
    the read end of its stderr."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # never returns into the test
        code = 1
        try:
            os.close(read_end)
            os.dup2(write_end, 2)
            sys.stderr = open(2, 'w', buffering=1, closefd=False)  # noqa: SIM115
            os.environ.update(env, RANK=str(rank))
            frozen_rank()
            code = 0
        except SystemExit as exit_info:
            code = exit_info.code if isinstance(exit_info.code, int) else 1
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stderr.flush()
            os._exit(code)
    os.close(write_end)
    return pid, read_end


def read_to_end(fd: int, seconds: float) -> Optional[str]:
    """What is written to ``fd`` until its last writer ends; None if it
    has not ended within ``seconds``."""
    deadline, chunks = time.monotonic() + seconds, []
    while (left := deadline - time.monotonic()) > 0:
        if select.select([fd], [], [], left)[0]:
            chunk = os.read(fd, 65536)
            if not chunk:
                return b''.join(chunks).decode(errors='replace')
            chunks.append(chunk)
    return None


def test_frozen_rank_ends_the_run_naming_it():
    env = dict(
        MASTER_ADDR='127.0.0.1',
        MASTER_PORT=str(free_port()),
        WORLD_SIZE='2',
    )
    (first, first_err), (second, second_err) = [
        start_rank(rank, env) for rank in range(2)
    ]
    err = None
    try:
        # The bound only stops a hang; the message says when rank 0 noticed.
        err = read_to_end(first_err, 300)
    finally:
        os.kill(second, signal.SIGKILL)
        if err is None:  # rank 0 hangs
            os.kill(first, signal.SIGKILL)
        status = os.waitpid(first, 0)[1]
        os.waitpid(second, 0)
        os.close(first_err)
        os.close(second_err)
    assert err is not None, 'rank 0 did not end within 300 s'
    assert os.waitstatus_to_exitcode(status) == 1, err[-3000:]
    line = err.strip().splitlines()[-1]
    assert line.startswith(
        'Rank 0: rank(s) 1 stopped answering (no heartbeat for 5 s)'
    ), err
    assert 'after the 3 s process-group timeout' in line


def test_too_little_space_for_a_checkpoint_stops_before_saving(
    tmp_path, monkeypatch
):
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(
        run_guard_hook.shutil,
        'disk_usage',
        lambda path: usage._replace(free=2**20),
    )
    needed = sum(v.numel() * 4 for v in digit_model().state_dict().values())
    ours = run_main(
        'train', DEMO, '--work-dir', tmp_path / 'w', '--cfg-options',
        *TINY_DEMO,
    )  # fmt: skip
    assert ours.returncode == 1
    line = one_line(ours.stderr)
    assert line.startswith(
        'Training stopped before saving a checkpoint: it needs about '
    )
    # weights, their optimizer moments and gradients' companions
    assert float(line.split('about ')[1].split(' MiB')[0]) > needed / 2**20
    assert f'{tmp_path}/w has 1.0 MiB free' in line
    assert not (tmp_path / 'w' / 'epoch_1.pth').exists()
    error = door(DEMO, as_dict(TINY_DEMO), tmp_path / 'door')
    assert isinstance(error, TrainingStopped)
    assert str(error).startswith('Training stopped before saving')


def test_a_second_training_of_the_hook_beats_again(tmp_path):
    # a hook that trains twice in one process (a notebook) starts its
    # heartbeat again: the first stop must not end the second beat
    torch_dist.init_process_group(
        'gloo',
        init_method=f'file://{tmp_path / "store"}',
        rank=0,
        world_size=1,
    )
    try:
        hook, key = RunGuardHook(), heartbeat_key(0)
        hook.start_heartbeat()
        hook.stop_heartbeat()
        beats = default_store().add(key, 0)
        hook.start_heartbeat()
        time.sleep(2.5 * HEARTBEAT_INTERVAL)
        hook.stop_heartbeat()
        assert default_store().add(key, 0) > beats
    finally:
        torch_dist.destroy_process_group()
