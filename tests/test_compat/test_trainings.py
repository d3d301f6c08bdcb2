"""The epoch-based case of the corpus trained end to end through our
tools/train.py and mmpretrain's (the same lr and loss at every
iteration), resumed from its first epoch's checkpoint, and its
checkpoint tested with ``--out`` through both tools."""

import pytest
import torch

from ..helpers import MMPRETRAIN_TOOLS, run_main
from .corpus import Case, write_case, write_data
from .trainings import TOOLS, TRAININGS, train_both

pytestmark = pytest.mark.slow


@pytest.fixture(scope='module')
def data(tmp_path_factory):
    return write_data(tmp_path_factory.mktemp('training_data'))


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


# mmpretrain's tools/test.py turns pin_memory on, which warns without a GPU
@pytest.mark.filterwarnings("ignore:'pin_memory' argument is set as true")
@pytest.mark.parametrize(
    'out, item',
    [('preds.pkl', ()), ('metrics.json', ('--out-item', 'metrics'))],
)
def test_out(out, item, epoch_based, data, tmp_path, monkeypatch):
    """tools/test.py ``--out`` of the trained run's checkpoint (in this
    process): the same file from our tool and mmpretrain's."""
    from mmengine.fileio import load

    folder, _ = epoch_based
    checkpoint = folder / 'ours' / 'work' / 'epoch_2.pth'
    case = TRAININGS['epoch_based']
    case = Case(case.name, case.covers, case.config, (), case.files)
    monkeypatch.chdir(tmp_path)
    for name, tool in (
        ('ours', 'test'),
        ('mmpretrain', MMPRETRAIN_TOOLS / 'test.py'),
    ):
        written = write_case(case, tmp_path / name, data)
        run_main(
            tool, *written.argv, checkpoint, '--work-dir',
            written.fields['work'], '--out', tmp_path / name / out, *item,
            check=True,
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
