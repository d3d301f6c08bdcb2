"""Kill-and-resume on an image folder through the custom-data config with
its loaders as shipped (see test_resume.py)."""

import pytest

from .resume_runs import (
    CUSTOM,
    assert_same_run,
    resume_options,
    run_killed_and_resumed,
    train,
    write_custom_data,
)

# the in-process runs compute as the killed process does
pytestmark = pytest.mark.usefixtures('one_thread')


@pytest.mark.slow
def test_custom_data_with_persistent_workers_resumes_exactly(tmp_path):
    """RandomResizedCrop and flips in 2 persistent workers, drop path in
    the training process: killed in the middle of epoch 2, resumed from
    epoch_1.pth, every logged loss and the top-1 equal."""
    write_custom_data(tmp_path / 'data')
    options = resume_options(tmp_path / 'data', epochs=2)
    whole, broken = tmp_path / 'whole', tmp_path / 'broken'
    train(whole, options, resume=False, config=CUSTOM)
    # epoch 2 is iterations 4-6: killed after iteration 4 is logged
    output = run_killed_and_resumed(broken, options, 4, config=CUSTOM)
    assert 'Load checkpoint from' in output and 'epoch_1.pth' in output
    assert 'random' not in ' '.join(
        line for line in output.splitlines() if 'WARNING' in line
    )
    assert_same_run(whole, broken, list(range(1, 7)), epochs=2)
