"""A run starts only from what it can continue: a ``last_checkpoint`` that
names a missing or cut-short file elsewhere is named for what it is, a
resume whose optimizer state was saved for other parameters (a
training-only part switched on or off) is refused in one line, and
``--resume`` into a new work dir takes no other run's epoch or optimizer.
Nothing is lost in the run's own folder: a checkpoint is removed only once
its successor is saved, a refused training writes nothing, and a test of
a run's saved config leaves it as it is. Through our tools and
mmpretrain's."""

import hashlib
from pathlib import Path

import pytest
import torch

from t2t_plugin.runtime.hooks.run_check_hook import optimizer_mismatch
from t2t_plugin.runtime.sample_seeded_runner import start_point

from ..helpers import (
    DEMO,
    TINY_DEMO,
    held_work_dir,
    one_line,
    run_main,
    run_mmpretrain_tool,
)


def test_a_pointer_elsewhere_is_named_for_what_it_is(tmp_path):
    """``--resume PATH continues from it`` is said only of a whole file:
    a missing one outside the work dir does not exist, a cut-short one is
    cut short, wherever it lies."""
    work_dir = tmp_path / 'run'
    work_dir.mkdir()
    own = work_dir / 'epoch_1.pth'
    torch.save({'meta': {}}, own)
    other = tmp_path / 'other'
    other.mkdir()
    pointer = work_dir / 'last_checkpoint'
    resuming = f'resuming {own}, the newest intact checkpoint of the work dir.'

    pointer.write_text(str(other / 'epoch_9.pth'))
    start = start_point(str(work_dir), None, True)
    assert (start.load_from, start.resumes) == (str(own), True)
    assert start.note == (
        f'{pointer} names {other / "epoch_9.pth"}, which does not exist: '
        f'not followed; {resuming}'
    )
    # mmengine's own Runner is stopped by the missing-file check instead
    assert (
        start_point(str(work_dir), None, True, host_runner=True).problem
        is None
    )

    cut = other / 'epoch_2.pth'
    torch.save({'meta': {}, 'state_dict': {'w': torch.ones(1000)}}, cut)
    cut.write_bytes(cut.read_bytes()[:100])
    pointer.write_text(str(cut))
    assert start_point(str(work_dir), None, True).note == (
        f'{pointer} names {cut}, which is cut short: not followed; {resuming}'
    )
    assert start_point(
        str(work_dir), None, True, host_runner=True
    ).problem.startswith(f'{cut}, the checkpoint last_checkpoint names in ')

    whole = other / 'epoch_3.pth'
    torch.save({'meta': {}}, whole)
    pointer.write_text(str(whole))
    assert start_point(str(work_dir), None, True).note == (
        f'{pointer} names {whole}, which lies outside the work dir: not '
        f'followed (--resume {whole} continues from it); {resuming}'
    )


def groups(*sizes: int) -> list:
    """Optimizer param groups of ``sizes`` parameters each, numbered as
    ``Optimizer.state_dict`` numbers them."""
    found, start = [], 0
    for size in sizes:
        found.append(dict(lr=0.1, params=list(range(start, start + size))))
        start += size
    return found


def test_optimizer_mismatch_names_both_counts():
    path = 'runA/epoch_1.pth'
    saved = dict(state={}, param_groups=groups(2, 3))
    assert optimizer_mismatch(path, saved, groups(2, 3)) is None
    assert optimizer_mismatch(path, saved, groups(2, 3, 1)) == (
        'The checkpoint runA/epoch_1.pth holds the optimizer state of 5 '
        'parameters in 2 groups, this run optimises 6 in 3: the trainable '
        'parts of the model differ (e.g. a training-only loss switched on '
        'or off). Resume with the config it was trained with, or start a '
        'new training from its weights with load_from=runA/epoch_1.pth '
        'instead of --resume.'
    )
    # the same number of groups, one parameter more in one of them
    assert optimizer_mismatch(path, saved, groups(2, 4)) is not None
    # nothing to compare: an optimizer state of another layout
    assert optimizer_mismatch(path, {'AdamW': saved}, groups(2)) is None
    assert optimizer_mismatch(path, None, groups(2)) is None


def write_configs(folder: Path) -> tuple[Path, Path]:
    """The demo without a class token, with the localisation loss of
    projects/small_data (``drloc.py``) and without it (``plain.py``)."""
    drloc = folder / 'drloc.py'
    drloc.write_text(
        f'_base_ = [{DEMO!r}]\n'
        "custom_imports = dict(imports=['t2t_plugin', "
        "'projects.small_data.levers'], allow_failed_imports=False)\n"
        "model = dict(backbone=dict(with_cls_token=False, out_type='raw'), "
        "head=dict(type='DRLocClsHead', pool='attention', "
        'drloc=dict(weight=0.1)))\n'
    )
    plain = folder / 'plain.py'
    plain.write_text(
        "_base_ = ['./drloc.py']\n"
        "model = dict(head=dict(_delete_=True, type='T2TClsHead', "
        "num_classes=10, in_channels=64, pool='attention', topk=(1, 5), "
        "loss=dict(type='CrossEntropyLoss')))\n"
    )
    return drloc, plain


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope='module')
def localisation_run(tmp_path_factory) -> tuple[Path, Path]:
    """The configs of :func:`write_configs` and the checkpoint of one
    epoch with the localisation loss, which the tests only read."""
    folder = tmp_path_factory.mktemp('localisation')
    drloc, plain = write_configs(folder)
    run_a = folder / 'runA'
    run_main(
        'train', drloc, '--work-dir', run_a, '--cfg-options', *TINY_DEMO,
        check=True,
    )  # fmt: skip
    return plain, run_a / 'epoch_1.pth'


@pytest.mark.parametrize('tool', ['ours', 'mmpretrain'])
def test_resume_with_the_localisation_loss_switched_off(
    localisation_run, tmp_path, tool
):
    """A run with the localisation loss resumed without it: its optimizer
    state holds the loss's MLP too. One line, exit 1, before mmengine's
    ``different number of parameter groups``; the checkpoint is left as
    it was, and its weights start a new training with ``load_from``."""
    plain, checkpoint = localisation_run
    kept = digest(checkpoint)
    options = [*TINY_DEMO, 'train_cfg.max_epochs=2']
    main = run_main if tool == 'ours' else run_mmpretrain_tool
    result = main(
        'train', plain, '--work-dir', tmp_path / 'runB', '--resume',
        checkpoint, '--cfg-options', *options,
    )  # fmt: skip
    assert result.returncode == 1
    saved = torch.load(checkpoint, weights_only=False)['optimizer']
    total = sum(len(group['params']) for group in saved['param_groups'])
    # the loss's MLP: three linear layers, a weight and a bias each
    line = (
        f'The checkpoint {checkpoint} holds the optimizer state of {total} '
        f'parameters in {total} groups, this run optimises {total - 6} in '
        f'{total - 6}: the trainable parts of the model differ (e.g. a '
        'training-only loss switched on or off). Resume with the config it '
        'was trained with, or start a new training from its weights with '
        f'load_from={checkpoint} instead of --resume.'
    )
    if tool == 'ours':
        assert one_line(result.stderr) == line
    else:
        assert result.stderr.strip().splitlines()[-1] == (
            f't2t_preflight.errors.RunCheckError: {line}'
        )
    assert 'parameter groups' not in result.stderr
    assert digest(checkpoint) == kept
    if tool == 'ours':
        fresh = run_main(
            'train', plain, '--work-dir', tmp_path / 'runC', '--cfg-options',
            *TINY_DEMO, f'load_from={checkpoint}',
        )  # fmt: skip
        assert fresh.returncode == 0, fresh.stderr[-3000:]


def fail_saving(name: str):
    """mmengine's ``save_checkpoint``, stopped half-way through the file
    ``name`` as a kill would stop it."""
    from mmengine.runner import checkpoint

    def save(state, filepath, *args, **kwargs):
        if Path(filepath).name != name:
            return checkpoint.save_checkpoint(state, filepath, *args, **kwargs)
        checkpoint.save_checkpoint(state, filepath)
        Path(filepath).write_bytes(Path(filepath).read_bytes()[:1000])
        raise RuntimeError('killed while saving')

    return save


# A config of one's own naming mmengine's CheckpointHook: SampleSeededRunner
# builds it as SaveFirstCheckpointHook.
@pytest.mark.parametrize(
    'door_name', ['ours', 'mmpretrain', 'Runner', 'CheckpointHook']
)
def test_a_checkpoint_is_removed_only_after_its_successor_is_saved(
    tmp_path, monkeypatch, door_name
):
    """max_keep_ckpts=1 and a run killed while saving epoch 2: epoch 1
    stays, and --resume trains epoch 2 only (mmengine's CheckpointHook
    removed epoch 1 first, and the resume trained from scratch)."""
    options = [
        *TINY_DEMO, 'train_cfg.max_epochs=2',
        'default_hooks.checkpoint.max_keep_ckpts=1',
    ]  # fmt: skip
    if door_name == 'Runner':
        options.append('runner_type=Runner')
    if door_name == 'CheckpointHook':
        options.append('default_hooks.checkpoint.type=CheckpointHook')
    main = run_mmpretrain_tool if door_name == 'mmpretrain' else run_main
    work_dir = tmp_path / 'run'
    args = ['train', DEMO, '--work-dir', work_dir]
    with monkeypatch.context() as patch:
        patch.setattr(
            'mmengine.runner.runner.save_checkpoint',
            fail_saving('epoch_2.pth'),
        )
        killed = main(*args, '--cfg-options', *options)
    assert killed.returncode == 1
    kept = torch.load(work_dir / 'epoch_1.pth', weights_only=False)
    assert kept['meta']['epoch'] == 1
    resumed = main(*args, '--resume', '--cfg-options', *options)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    logs = ''.join(path.read_text() for path in work_dir.glob('*/*.log'))
    assert 'resumed epoch: 1, iter: 2' in logs
    assert sorted(p.name for p in work_dir.glob('epoch_*.pth')) == [
        'epoch_2.pth'
    ]
    saved = torch.load(work_dir / 'epoch_2.pth', weights_only=False)
    assert (saved['meta']['epoch'], saved['meta']['iter']) == (2, 4)


def snapshot(folder: Path) -> dict:
    """Every file and folder below ``folder``, files with their digest."""
    return {
        str(path.relative_to(folder)): path.is_file() and digest(path)
        for path in folder.rglob('*')
    }


@pytest.mark.parametrize('tool', ['ours', 'mmpretrain'])
def test_a_refused_training_writes_nothing(tmp_path, tool):
    """A second training into a work dir another training holds is
    refused before it writes anything: mmengine's Runner saved its config
    over the running training's as it was built."""
    work_dir = tmp_path / 'w'
    work_dir.mkdir()
    (work_dir / Path(DEMO).name).write_text("# the running run's config\n")
    main = run_main if tool == 'ours' else run_mmpretrain_tool
    with held_work_dir(work_dir):
        before = snapshot(work_dir)
        refused = main('train', DEMO, '--work-dir', work_dir)
    assert refused.returncode == 1
    assert f'{work_dir} is in use by another training' in refused.stderr
    assert snapshot(work_dir) == before


@pytest.mark.parametrize('tool', ['ours', 'mmpretrain'])
def test_a_test_of_a_saved_config_leaves_it_as_it_is(tmp_path, tool):
    """A run's saved config names the run's folder as its work dir; a test
    of it with --cfg-options saved the changed config over it."""
    work_dir = tmp_path / 'run'
    run_main(
        'train', DEMO, '--work-dir', work_dir, '--cfg-options', *TINY_DEMO,
        check=True,
    )  # fmt: skip
    saved = work_dir / Path(DEMO).name
    kept = digest(saved)
    main = run_main if tool == 'ours' else run_mmpretrain_tool
    tested = main(
        'test', saved, work_dir / 'epoch_1.pth', '--cfg-options',
        'test_dataloader.batch_size=4',
    )  # fmt: skip
    assert tested.returncode == 0, tested.stderr[-3000:]
    assert 'accuracy/top1' in tested.stdout
    assert digest(saved) == kept
    logs = ''.join(path.read_text() for path in work_dir.glob('*/*.log'))
    assert (
        f'The config is not saved to {saved}: the run was read from that file.'
    ) in logs


@pytest.mark.parametrize(
    'tool, runner, hooks',
    [
        ('ours', 'SampleSeededRunner', ''),
        ('ours', 'Runner', ''),
        # mmpretrain's hooks only: mmengine's Runner resumed load_from
        (
            'ours',
            'Runner',
            'default_hooks = dict(_delete_=True, logger=dict(type='
            "'LoggerHook'), checkpoint=dict(type='CheckpointHook'))\n",
        ),
        ('mmpretrain', 'SampleSeededRunner', ''),
    ],
)
def test_resume_into_a_new_work_dir_takes_no_other_runs_state(
    one_epoch, tmp_path, tool, runner, hooks
):
    """--resume into a work dir without a checkpoint, with a config whose
    load_from is another run's checkpoint: every epoch is trained, as
    mmpretrain's tool trains them; SampleSeededRunner starts from the
    checkpoint's weights, mmengine's Runner from scratch (as mmpretrain's
    tool sets it), never from its epoch counter and optimizer."""
    other = one_epoch / 'epoch_1.pth'
    config = tmp_path / 'fine_tune.py'
    config.write_text(
        f'_base_ = [{DEMO!r}]\nload_from = {str(other)!r}\n{hooks}'
    )
    options = [*TINY_DEMO, 'train_cfg.max_epochs=2', f'runner_type={runner}']
    main = run_main if tool == 'ours' else run_mmpretrain_tool
    work_dir = tmp_path / 'new'
    result = main(
        'train', config, '--work-dir', work_dir, '--resume', '--cfg-options',
        *options,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    logs = ''.join(path.read_text() for path in work_dir.glob('*/*.log'))
    assert 'resumed epoch' not in logs
    for epoch in (1, 2):
        saved = torch.load(work_dir / f'epoch_{epoch}.pth', weights_only=False)
        assert saved['meta']['epoch'] == epoch
        assert saved['meta']['iter'] == 2 * epoch
    loaded = f'Load checkpoint from {other}' in logs
    assert loaded == (tool == 'ours' and runner == 'SampleSeededRunner')
    if runner == 'Runner':
        assert (
            f'--resume with runner_type=Runner: only a checkpoint of the '
            "work dir is resumed, as mmpretrain's tools/train.py does; "
            f'load_from={other} is not used (SampleSeededRunner starts from '
            'it when the work dir has no checkpoint).'
        ) in result.stdout


@pytest.mark.parametrize('tool', ['ours', 'mmpretrain'])
def test_default_hooks_key_none_switches_a_check_off(tmp_path, tool):
    """``default_hooks.<key>=None`` removes one of the configs' hooks
    (docs/troubleshooting.md), as it removes mmengine's own: mmengine's
    Runner asserts on a None it has no default for."""
    work_dir = tmp_path / 'run'
    main = run_main if tool == 'ours' else run_mmpretrain_tool
    run = main(
        'train', DEMO, '--work-dir', work_dir, '--cfg-options', *TINY_DEMO,
        'default_hooks.summary=None', 'default_hooks.run_check=None',
        'default_hooks.checkpoint=None',
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert not (work_dir / 'curves.png').exists()
    assert not list(work_dir.glob('*.pth'))
    logs = ''.join(path.read_text() for path in work_dir.glob('*/*.log'))
    assert 'RunCheckHook' not in logs and 'RunSummaryHook' not in logs
    assert 'RunGuardHook' in logs  # the others stay
