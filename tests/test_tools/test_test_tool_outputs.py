"""tools/test.py as mmpretrain's: --tta, refused NaN weights, flagged NaN
outputs (also by a Runner of the config); the demo config under
mmpretrain's own tools/train.py."""

import pickle
import sys
from pathlib import Path

import mmpretrain
import pytest
import torch
from mmengine.config import Config
from mmengine.runner import Runner
from mmpretrain.registry import MODELS

import t2t_plugin  # noqa: F401
from t2t_plugin.engine import CheckpointMismatchError
from t2t_plugin.engine.hooks import RunCheckError

from ..helpers import ROOT, load_tool

DEMO = ROOT / 'configs/t2t-vit-mini_1xb64_digits.py'
MMPRETRAIN_TOOLS = Path(mmpretrain.__file__).parent / '.mim' / 'tools'


def run_tool(path, *args):
    """``main()`` of a tool script, in this process, with ``args``: ours
    take them, mmpretrain's read ``sys.argv``."""
    tool = load_tool(str(path))
    args = [str(arg) for arg in args]
    if Path(path).parent == ROOT / 'tools':
        return tool.main(args)
    sys.argv = [str(path), *args]
    return tool.main()


def demo_weights(folder, change=None):
    cfg = Config.fromfile(str(DEMO))
    model = MODELS.build(cfg.model)
    with torch.no_grad():
        for param in model.parameters():
            param.normal_(0, 0.1)
    state = model.state_dict()
    if change:
        change(state)
    path = Path(folder) / 'weights.pth'
    torch.save(dict(state_dict=state), path)
    return path


def runner_of_demo(work_dir, load_from):
    """A Runner of the demo config, as mmpretrain's tools build it."""
    cfg = Config.fromfile(str(DEMO))
    cfg.merge_from_dict(dict(work_dir=str(work_dir), load_from=str(load_from)))
    return Runner.from_cfg(cfg)


FLIPPED = """
_base_ = ['{demo}']
test_dataloader = dict(dataset=dict(pipeline=[
    dict(type='ConvertImage', channels=1),
    dict(type='RandomFlip', prob=1.0),
    dict(type='PackInputs'),
]))
"""


def test_tta_averages_the_scores_of_the_image_and_its_flip(tmp_path):
    def sharpen(state):  # scores far from uniform, so that flips count
        state['head.layers.head.weight'] *= 30

    weights = demo_weights(tmp_path, sharpen)
    flipped = tmp_path / 'flipped.py'
    flipped.write_text(FLIPPED.format(demo=DEMO))
    scores = {}
    for name, config, extra in (
        ('plain', DEMO, []),
        ('flipped', flipped, []),
        ('tta', DEMO, ['--tta']),
    ):
        out = tmp_path / f'{name}.pkl'
        assert (
            run_tool(
                ROOT / 'tools/test.py',
                config,
                weights,
                '--out',
                out,
                '--work-dir',
                tmp_path / 'work',
                *extra,
            )
            == 0
        )
        with open(out, 'rb') as f:
            scores[name] = torch.stack(
                [p['pred_score'] for p in pickle.load(f)]
            )
    assert scores['tta'].shape == (359, 10)
    assert (scores['plain'] - scores['flipped']).abs().max() > 1e-3
    torch.testing.assert_close(
        scores['tta'],
        (scores['plain'] + scores['flipped']) / 2,
        atol=1e-5,
        rtol=0,
    )


def test_non_finite_weights_are_refused_in_one_line(tmp_path, capsys):
    def poison(state):
        state['head.layers.head.weight'][0, 0] = float('nan')

    weights = demo_weights(tmp_path, poison)
    assert (
        run_tool(
            ROOT / 'tools/test.py',
            DEMO,
            weights,
            '--work-dir',
            tmp_path / 'work',
        )
        == 1
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    # the head's own load hook: the same line through every loader
    assert err[0] == (
        f'The checkpoint {weights} holds NaN or infinite values in 1 '
        "weight(s) of T2TClsHead, e.g. 'head.layers.head.weight'; it comes "
        'from a run that diverged: take an earlier checkpoint.'
    )
    with pytest.raises(CheckpointMismatchError) as info:
        runner_of_demo(tmp_path / 'door', weights).test()
    assert str(info.value) == err[0]


def test_non_finite_outputs_are_flagged(tmp_path, capsys):
    def overflow(state):  # finite weights, features that overflow
        state['backbone.norm.weight'].fill_(3e38)

    weights = demo_weights(tmp_path, overflow)
    assert (
        run_tool(
            ROOT / 'tools/test.py',
            DEMO,
            weights,
            '--work-dir',
            tmp_path / 'work',
        )
        == 1
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        '359 of 359 predictions hold NaN or infinite values: '
        'the metrics above are not meaningful.'
    )
    with pytest.raises(RunCheckError) as info:
        runner_of_demo(tmp_path / 'door', weights).test()
    assert str(info.value) == err[-1]


def test_demo_config_trains_under_mmpretrain_train_tool(tmp_path):
    run_tool(
        MMPRETRAIN_TOOLS / 'train.py',
        DEMO,
        '--work-dir',
        tmp_path,
        '--cfg-options',
        'train_cfg.max_epochs=1',
        'train_dataloader.batch_size=512',
    )
    assert (tmp_path / 'epoch_1.pth').is_file()
