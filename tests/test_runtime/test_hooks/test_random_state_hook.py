"""RandomStateHook: a resumed run draws what the uninterrupted one would,
and the samplers whose order is known to follow the seed are found by
class. The kill-and-resume runs are test_runtime/test_resume*.py."""

import torch
from mmengine.model import BaseModel

from t2t_plugin.runtime import SampleSeededRunner, SampleSeedSampler

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
        custom_hooks=[dict(type='RandomStateHook')],
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

    from t2t_plugin.runtime.hooks.random_state_hook import _is_exact

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
