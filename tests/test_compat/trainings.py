"""The cases of the corpus trained end to end (test_trainings*.py), each
through our tools/train.py and mmpretrain's, in the test's process on
the tiny image sets."""

import contextlib
import json
from pathlib import Path

from ..helpers import MMPRETRAIN_TOOLS, ROOT, run_main
from .corpus import (
    ITER_BASED,
    OWN_BASE,
    Case,
    own,
    plain,
    write_case,
)

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


def run_both(
    case: Case, folder: Path, data: Path, *extra: str, tool: str = 'train'
) -> None:
    """Run ``tools/<tool>.py`` of ours and of mmpretrain on ``case``, one
    after the other in this process (:func:`run_main`), each in
    ``folder/<ours|mmpretrain>`` (its work dir ``work``), ``extra``
    (formatted) after the case's own options."""
    for name, tools in TOOLS.items():
        written = write_case(case, folder / name, data)
        argv = [*written.argv, *(a.format(**written.fields) for a in extra)]
        with contextlib.chdir(folder / name):
            done = run_main(tools / f'{tool}.py', *argv)
        assert done.returncode == 0, f'{name}: {done.stderr[-3000:]}'


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
