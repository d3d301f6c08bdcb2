"""Kill-and-resume: a run killed with SIGKILL mid-epoch and resumed from
its last checkpoint logs the same losses and ends with the same accuracy as
the uninterrupted run (ExactResumeHook, and the per-sample augmentation
seeds of SampleSeededRunner for data-loader workers, persistent or not).
The digits runs here, the custom-data run in test_resume_custom_data.py
(two files: the suite's workers take one each)."""

import pytest

from .resume_runs import (
    DIGITS,
    assert_same_run,
    digits_options,
    run_killed_and_resumed,
    train,
)

# the in-process runs compute as the killed process does
pytestmark = pytest.mark.usefixtures('one_thread')

MIXUP_CONFIG = f"""_base_ = {str(DIGITS)!r}
model = dict(
    train_cfg=dict(
        augments=[
            dict(type='Mixup', alpha=0.8),
            dict(type='CutMix', alpha=1.0),
        ]
    )
)
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    'workers, persistent, mixup',
    [(0, False, False), (2, False, False), (2, True, True)],
)
def test_killed_and_resumed_run_equals_uninterrupted(
    workers, persistent, mixup, tmp_path
):
    """The demo's random crops in the loader, and drop path, dropout and
    (with ``mixup``) mixup and cutmix boxes in the training process."""
    options = digits_options(workers, epochs=2) + [
        f'train_dataloader.persistent_workers={persistent}'
    ]
    config = DIGITS
    if mixup:
        config = tmp_path / 'digits_mixup.py'
        config.write_text(MIXUP_CONFIG)
    whole, broken = tmp_path / 'whole', tmp_path / 'broken'
    train(whole, options, resume=False, config=config)
    # epoch 2 is iterations 7-12: killed after iteration 8 is logged,
    # resumed from epoch_1.pth
    run_killed_and_resumed(broken, options, kill_at_iter=8, config=config)
    assert (broken / 'epoch_1.pth').is_file()
    assert_same_run(whole, broken, list(range(2, 13, 2)), epochs=2)
