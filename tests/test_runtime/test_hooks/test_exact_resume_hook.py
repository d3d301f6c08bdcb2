"""ExactResumeHook: a resumed run draws what the uninterrupted one would,
and a resume of another run's checkpoint deletes nothing of that run
(mmengine's CheckpointHook removes the best checkpoint the resumed state
names) and names the settings it changes."""

import hashlib
import shutil
from pathlib import Path

import pytest
import torch
from mmengine.model import BaseModel

from t2t_plugin.runtime import SampleSeededRunner, SampleSeedSampler
from t2t_plugin.runtime.hooks.exact_resume_hook import settings_changes
from t2t_plugin.runtime.sample_seeded_runner import StartPoint, start_point

from ...helpers import (
    DEMO,
    TINY_DEMO,
    as_dict,
    door,
    run_main,
    run_mmpretrain_tool,
)
from ..recorded_draws import KINDS, SEED, NumberedDataset, loader_config


class RecordingModel(BaseModel):
    """Keeps the sample numbers and draws of every training batch."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.batches = []

    def forward(self, mode='loss', **batch):
        self.batches.append(
            list(zip(batch['number'], *(batch[kind] for kind in KINDS)))
        )
        return dict(loss=self.weight.sum() * 0 + self.weight.square())


def iteration_run(work_dir, resume_from=None) -> list:
    """6 iterations of an iteration-based loop (InfiniteSampler, 2
    persistent workers, no config seed), a checkpoint at iteration 3."""
    config = loader_config(2, True)
    config['sampler'] = dict(type='InfiniteSampler', shuffle=True)
    model = RecordingModel()
    runner = SampleSeededRunner(
        model=model,
        work_dir=str(work_dir),
        train_dataloader=config,
        train_cfg=dict(by_epoch=False, max_iters=6),
        optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1)),
        default_hooks=dict(
            checkpoint=dict(type='CheckpointHook', interval=3, by_epoch=False)
        ),
        custom_hooks=[dict(type='ExactResumeHook')],
        randomness=dict(seed=None),
        load_from=resume_from,
        resume=resume_from is not None,
    )
    runner.train()
    return model.batches


def test_iteration_based_run_without_seed_resumes_exactly(tmp_path):
    """The loop starts its loader before the resume restores the seeds:
    the sampler and the batches asked for already follow them again."""
    whole = iteration_run(tmp_path / 'whole')
    resumed = iteration_run(
        tmp_path / 'resumed', resume_from=str(tmp_path / 'whole/iter_3.pth')
    )
    assert len(whole) == 6 and len(resumed) == 3
    assert resumed == whole[3:]


def test_samplers_known_to_be_exact_are_found_by_class():
    """The samplers whose order follows the seed and the epoch alone are
    the classes themselves: a subclass may order otherwise and gets the
    warning."""
    from mmengine.dataset import DefaultSampler, InfiniteSampler

    from t2t_plugin.runtime.hooks.exact_resume_hook import _is_exact

    dataset = NumberedDataset(pipeline=[])

    class OwnOrderSampler(DefaultSampler):
        pass

    for exact in (
        InfiniteSampler(dataset, seed=SEED),
        torch.utils.data.RandomSampler(dataset),
    ):
        assert _is_exact(exact)
    assert _is_exact(DefaultSampler(dataset, seed=SEED))
    assert not _is_exact(OwnOrderSampler(dataset, seed=SEED))
    assert not _is_exact(
        SampleSeedSampler(dict(type='DefaultSampler'), dataset)
    )


def contents(folder: Path) -> dict:
    """Every file below ``folder`` by relative path, with its digest."""
    return {
        str(path.relative_to(folder)): hashlib.sha256(
            path.read_bytes()
        ).hexdigest()
        for path in sorted(folder.rglob('*'))
        if path.is_file()
    }


def run_a(one_epoch: Path, tmp_path: Path) -> Path:
    """A copy of a one-epoch run whose checkpoint names its own best
    checkpoint, at a score any later validation beats."""
    run = tmp_path / 'runA'
    shutil.copytree(one_epoch, run)
    path = run / 'epoch_1.pth'
    checkpoint = torch.load(path, weights_only=False)
    info = checkpoint['message_hub']['runtime_info']
    assert Path(info['best_ckpt']).name == 'best_accuracy_top1_epoch_1.pth'
    info['best_ckpt'] = str(run / 'best_accuracy_top1_epoch_1.pth')
    info['best_score'] = -1.0
    torch.save(checkpoint, path)
    (run / 'last_checkpoint').write_text(str(path))
    return run


@pytest.mark.parametrize('tool', ['ours', 'mmpretrain'])
def test_resume_of_another_run_keeps_its_files(one_epoch, tmp_path, tool):
    """Resuming run A's checkpoint in run B with another batch size and
    learning rate: run A keeps every file, its best checkpoint included,
    B gets a best checkpoint of its own; one line says each."""
    run = run_a(one_epoch, tmp_path)
    before = contents(run)
    work_dir = tmp_path / 'runB'
    options = [
        *TINY_DEMO,
        'train_cfg.max_epochs=2',
        'train_dataloader.batch_size=8',
        'optim_wrapper.optimizer.lr=0.01',
    ]
    main = run_main if tool == 'ours' else run_mmpretrain_tool
    result = main(
        'train',
        DEMO,
        '--work-dir',
        work_dir,
        '--resume',
        run / 'epoch_1.pth',
        '--cfg-options',
        *options,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert contents(run) == before
    best = run / 'best_accuracy_top1_epoch_1.pth'
    assert 'is removed' not in result.stdout
    assert (
        f'The best checkpoint so far, {best}, lies outside this run and is '
        f'kept; a new best checkpoint goes to {work_dir}.'
    ) in result.stdout
    assert (work_dir / 'best_accuracy_top1_epoch_2.pth').is_file()
    # the checkpoint recorded batch 16 and the config's lr 2e-3 (scaled by
    # auto_scale_lr only where asked)
    assert (
        f'Resuming {run / "epoch_1.pth"} with batch size 16 -> 8, lr '
        '0.002 -> 0.01 (checkpoint -> this run): the learning rate and its '
        'schedule continue from the checkpoint, the batch size is the new '
        'one.'
    ) in result.stdout


def test_settings_changes_names_each_change():
    saved = dict(batch_size=64, lr=[0.002, 0.001])
    assert settings_changes(saved, dict(saved)) == []
    assert settings_changes(saved, dict(batch_size=32, lr=[0.002, 0.001])) == [
        'batch size 64 -> 32'
    ]
    assert settings_changes(saved, dict(batch_size=64, lr=[0.004, 0.002])) == [
        'lr 0.002 -> 0.004'
    ]
    # a checkpoint saved without the record: nothing to compare
    assert settings_changes({}, dict(batch_size=8, lr=[0.1])) == []


def test_a_pointer_outside_the_work_dir_is_not_followed(one_epoch, tmp_path):
    """A work dir copied from run A: its last_checkpoint names run A's
    file. The run resumes its own newest checkpoint and names the pointer
    in one line; mmengine's own Runner would follow it, and is refused in
    one line."""
    run = run_a(one_epoch, tmp_path)
    copy = tmp_path / 'runC'
    shutil.copytree(run, copy)
    own = str(copy / 'epoch_1.pth')
    pointer = copy / 'last_checkpoint'
    start = start_point(str(copy), None, True)
    assert (start.load_from, start.resumes) == (own, True)
    assert start.note == (
        f'{pointer} names {run / "epoch_1.pth"}, which lies outside the '
        f'work dir: not followed (--resume {run / "epoch_1.pth"} continues '
        'from it); '
        f'resuming {own}, the newest intact checkpoint of the work dir.'
    )
    # a file given explicitly is resumed wherever it lies
    given = start_point(str(copy), str(run / 'epoch_1.pth'), True)
    assert (given.load_from, given.resumes, given.note) == (
        str(run / 'epoch_1.pth'),
        True,
        None,
    )
    # missing, or inside and intact
    pointer.write_text(str(copy / 'epoch_9.pth'))
    assert start_point(str(copy), None, True).note == (
        f'{pointer} names {copy / "epoch_9.pth"}, which does not exist: not '
        f'followed; resuming {own}, the newest intact checkpoint of the '
        'work dir.'
    )
    pointer.write_text(own)
    assert start_point(str(copy), None, True).note is None
    empty = tmp_path / 'empty'
    empty.mkdir()
    (empty / 'last_checkpoint').write_text(str(run / 'epoch_1.pth'))
    assert start_point(str(empty), None, True).note == (
        f'{empty / "last_checkpoint"} names {run / "epoch_1.pth"}, which '
        'lies outside the work dir: not followed (--resume '
        f'{run / "epoch_1.pth"} continues from it); no checkpoint in '
        f'{empty} to resume; starting from scratch.'
    )

    # through our tool: run A's files untouched, the line in the log
    before = contents(run)
    pointer.write_text(str(run / 'epoch_1.pth'))
    options = [*TINY_DEMO, 'train_cfg.max_epochs=2']
    ours = run_main(
        'train',
        DEMO,
        '--work-dir',
        copy,
        '--resume',
        '--cfg-options',
        *options,
    )
    assert ours.returncode == 0, ours.stderr[-3000:]
    assert (
        f'{pointer} names {run / "epoch_1.pth"}, which lies outside'
        in ours.stdout
    )
    assert contents(run) == before
    assert pointer.read_text() == str(copy / 'epoch_2.pth')

    # mmengine's own Runner would resume run A's file: refused
    pointer.write_text(str(run / 'epoch_1.pth'))
    error = door(DEMO, dict(as_dict(options), resume=True), copy)
    assert str(error) == (
        f'{run / "epoch_1.pth"}, the checkpoint last_checkpoint names in '
        f"{copy}, lies outside the work dir, and mmengine's Runner would "
        'resume it; resume the file you mean with --resume PATH, or set '
        "runner_type = 'SampleSeededRunner' (it takes the newest intact "
        'checkpoint of the work dir).'
    )
    assert contents(run) == before


def test_every_door_asks_start_point(monkeypatch, tmp_path):
    """The choice patched: the configs' runner (what mmpretrain's and our
    tools build) and RunCheckHook under mmengine's own Runner take
    its answer."""
    from mmengine.config import Config
    from mmengine.registry import RUNNERS

    from t2t_plugin.runtime import sample_seeded_runner
    from t2t_plugin.runtime.hooks import run_checks

    asked = []

    def owner(work_dir, load_from, resume, default_hooks=None, **kwargs):
        asked.append(kwargs.get('host_runner', False))
        return StartPoint(None, False, problem='refused by the owner')

    monkeypatch.setattr(sample_seeded_runner, 'start_point', owner)
    monkeypatch.setattr(run_checks, 'start_point', owner)
    cfg = Config.fromfile(DEMO)
    cfg.merge_from_dict(dict(work_dir=str(tmp_path / 'a'), resume=True))
    runner = RUNNERS.build(cfg)
    assert (runner.load_from, runner.resumes) == (None, False)
    error = door(DEMO, dict(resume=True), tmp_path / 'b')
    assert str(error) == 'refused by the owner'
    assert asked == [False, True]
