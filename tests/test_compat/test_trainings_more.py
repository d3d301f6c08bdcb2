"""More cases of the corpus trained end to end through our tools/train.py
and mmpretrain's (a file of their own, for pytest-xdist to spread): the
same lr and loss at every iteration."""

import pytest

from .corpus import write_data
from .trainings import TOOLS, TRAININGS, train_both

pytestmark = pytest.mark.slow


@pytest.fixture(scope='module')
def data(tmp_path_factory):
    return write_data(tmp_path_factory.mktemp('training_data'))


@pytest.mark.parametrize('name', ['iter_based', 'recipe', 'finetune'])
def test_training(name, data, tmp_path):
    logged = train_both(TRAININGS[name], tmp_path, data)
    assert len(logged['ours']) == 4
    assert logged['ours'] == logged['mmpretrain']
    if name == 'finetune':  # both started from the 3-class weights
        for tool in TOOLS:
            (log,) = (tmp_path / tool / 'work').glob('*/*.log')
            loaded = f'Load checkpoint from {data}/tiny3_linear.pth'
            assert loaded in log.read_text()
