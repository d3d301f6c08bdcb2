"""A few cases of the corpus trained end to end, each through our
tools/train.py and mmpretrain's, in processes of their own on the tiny
image sets: the lr and the loss of every iteration are the same."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ..helpers import MMPRETRAIN_TOOLS, ROOT, tool_env
from .corpus import (
    ITER_BASED,
    OWN_BASE,
    Case,
    own,
    plain,
    write_case,
    write_data,
)

pytestmark = pytest.mark.slow

# mmpretrain's ResNet-18 recipe with the tiny backbone at 32 pixels, run by
# mmengine's own Runner.
RECIPE_32PX = """
_base_ = '{mm}/resnet/resnet18_8xb32_in1k.py'
custom_imports = dict(imports=['t2t_plugin'], allow_failed_imports=False)
model = dict(
    backbone={tiny}, neck=None,
    head=dict(num_classes=2, in_channels=32, topk=(1,)))
pipeline = [dict(type='LoadImageFromFile'),
            dict(type='Resize', scale=(32, 32)),
            dict(type='PackInputs')]
loader = dict(batch_size=2, num_workers=0,
              dataset=dict(data_root='{data}/imagenet', pipeline=pipeline))
train_dataloader = loader
val_dataloader = loader
test_dataloader = loader
val_evaluator = dict(type='Accuracy', topk=(1,))
test_evaluator = val_evaluator
train_cfg = dict(max_epochs=2)
param_scheduler = dict(milestones=[1])
default_hooks = dict(logger=dict(interval=1))
randomness = dict(seed=0)
"""

TRAININGS = {
    'epoch_based': Case(
        'epoch_based',
        'our runtime, SGD and MultiStepLR by epoch, 2 epochs of 2 steps',
        own(),
        ('--work-dir', '{work}'),
        OWN_BASE,
    ),
    'iter_based': Case(
        'iter_based',
        "IterBasedTrainLoop with mmengine's Runner, 4 steps",
        plain(ITER_BASED),
        ('--work-dir', '{work}'),
        OWN_BASE,
    ),
    'recipe': Case(
        'recipe',
        "mmpretrain's ResNet-18 recipe with T2T-ViT, mmengine's Runner",
        RECIPE_32PX,
        ('--work-dir', '{work}', '--no-persistent-workers'),
    ),
    'finetune': Case(
        'finetune',
        'the recipe fine-tuned from a 3-class checkpoint (load_from)',
        RECIPE_32PX + "load_from = '{data}/tiny3_linear.pth'\n",
        ('--work-dir', '{work}', '--no-persistent-workers'),
    ),
}

TOOLS = {'ours': ROOT / 'tools', 'mmpretrain': MMPRETRAIN_TOOLS}


@pytest.fixture(scope='module')
def data(tmp_path_factory):
    return write_data(tmp_path_factory.mktemp('training_data'))


def run_both(
    case: Case, folder: Path, data: Path, *extra: str, tool: str = 'train'
) -> None:
    """Run ``tools/<tool>.py`` of ours and of mmpretrain on ``case`` at
    once, each in ``folder/<ours|mmpretrain>`` (its work dir ``work``),
    ``extra`` (formatted) after the case's own options."""
    started = {}
    for name, tools in TOOLS.items():
        written = write_case(case, folder / name, data)
        argv = [*written.argv, *(a.format(**written.fields) for a in extra)]
        started[name] = subprocess.Popen(
            [sys.executable, str(tools / f'{tool}.py'), *argv],
            cwd=folder / name,
            env=tool_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
    for name, process in started.items():
        out, _ = process.communicate(timeout=300)
        assert process.returncode == 0, f'{name}: {out[-3000:]}'


def train_both(case: Case, folder: Path, data: Path, *extra: str) -> dict:
    """Train ``case`` with each tool (:func:`run_both`): the iterations
    each logged."""
    run_both(case, folder, data, *extra)
    return {name: iterations(folder / name / 'work') for name in TOOLS}


def iterations(work_dir: Path) -> list:
    """(iteration, lr, loss) of every training iteration the run logged
    (``vis_data/scalars.json``)."""
    (scalars,) = work_dir.glob('*/vis_data/scalars.json')
    lines = [json.loads(line) for line in scalars.read_text().splitlines()]
    return [(x['iter'], x['lr'], x['loss']) for x in lines if 'loss' in x]


@pytest.fixture(scope='module')
def epoch_based(data, tmp_path_factory):
    folder = tmp_path_factory.mktemp('epoch_based')
    return folder, train_both(TRAININGS['epoch_based'], folder, data)


def test_epoch_based(epoch_based):
    _, logged = epoch_based
    assert [step for step, _, _ in logged['ours']] == [1, 2, 3, 4]
    assert [lr for _, lr, _ in logged['ours']] == pytest.approx(
        [0.1, 0.1, 0.01, 0.01]
    )
    assert logged['ours'] == logged['mmpretrain']


@pytest.mark.parametrize('name', ['iter_based', 'recipe', 'finetune'])
def test_training(name, data, tmp_path):
    logged = train_both(TRAININGS[name], tmp_path, data)
    assert len(logged['ours']) == 4
    assert logged['ours'] == logged['mmpretrain']


def test_resume_path(epoch_based, data, tmp_path):
    """``--resume PATH`` of the first epoch's checkpoint into a fresh work
    dir trains the second epoch as the uninterrupted run did."""
    folder, uninterrupted = epoch_based
    for name in TOOLS:
        checkpoint = folder / name / 'work' / 'epoch_1.pth'
        (tmp_path / name).mkdir()
        (tmp_path / name / 'from.pth').symlink_to(checkpoint)
    logged = train_both(
        TRAININGS['epoch_based'], tmp_path, data, '--resume', '{here}/from.pth'
    )
    assert logged['ours'] == uninterrupted['ours'][2:]
    assert logged['ours'] == logged['mmpretrain']


@pytest.mark.parametrize(
    'out, item',
    [('preds.pkl', ()), ('metrics.json', ('--out-item', 'metrics'))],
)
def test_out(out, item, epoch_based, data, tmp_path):
    """tools/test.py ``--out`` of the trained run's checkpoint: the same
    file from both tools."""
    from mmengine.fileio import load

    folder, _ = epoch_based
    checkpoint = folder / 'ours' / 'work' / 'epoch_2.pth'
    case = TRAININGS['epoch_based']
    case = Case(case.name, case.covers, case.config, (), case.files)
    run_both(
        case, tmp_path, data, str(checkpoint), '--work-dir', '{work}',
        '--out', '{here}/' + out, *item, tool='test',
    )  # fmt: skip
    ours, theirs = (load(tmp_path / name / out) for name in TOOLS)
    if out.endswith('.json'):
        assert set(ours) == {'accuracy/top1'}
        assert ours == theirs
        return
    assert len(ours) == len(theirs) == 4
    for mine, other in zip(ours, theirs):
        assert mine['img_path'] == other['img_path']
        assert torch.equal(mine['pred_score'], other['pred_score'])
