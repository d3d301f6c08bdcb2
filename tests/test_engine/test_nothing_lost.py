"""A run starts only from what it can continue: a ``last_checkpoint`` that
names a missing or cut-short file elsewhere is named for what it is, and a
resume whose optimizer state was saved for other parameters (a
training-only part switched on or off) is refused in one line, through
our tools and mmpretrain's."""

import hashlib
from pathlib import Path

import pytest
import torch

from t2t_plugin.engine.hooks.resume_guard_hook import optimizer_mismatch
from t2t_plugin.engine.sample_seeded_runner import start_point

from ..helpers import DEMO, TINY_DEMO, one_line, run_main, run_mmpretrain_tool


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


@pytest.mark.parametrize('tool', ['ours', 'mmpretrain'])
def test_resume_with_the_localisation_loss_switched_off(tmp_path, tool):
    """A run with the localisation loss resumed without it: its optimizer
    state holds the loss's MLP too. One line, exit 1, before mmengine's
    ``different number of parameter groups``; the checkpoint is left as
    it was, and its weights start a new training with ``load_from``."""
    drloc, plain = write_configs(tmp_path)
    run_a = tmp_path / 'runA'
    run_main(
        'train', drloc, '--work-dir', run_a, '--cfg-options', *TINY_DEMO,
        check=True,
    )  # fmt: skip
    checkpoint = run_a / 'epoch_1.pth'
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
            f't2t_plugin.engine.errors.RunCheckError: {line}'
        )
    assert 'parameter groups' not in result.stderr
    assert digest(checkpoint) == kept
    if tool == 'ours':
        fresh = run_main(
            'train', plain, '--work-dir', tmp_path / 'runC', '--cfg-options',
            *TINY_DEMO, f'load_from={checkpoint}',
        )  # fmt: skip
        assert fresh.returncode == 0, fresh.stderr[-3000:]
