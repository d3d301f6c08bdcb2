"""tools/test.py as mmpretrain's: --tta, refused NaN weights, flagged NaN
outputs (also by a Runner of the config), --show-dir pictures; the demo
config under mmpretrain's own tools/train.py."""

import pickle
from pathlib import Path

import mmengine
import pytest
import torch
from mmengine.config import Config
from mmpretrain.registry import MODELS
from PIL import Image

import t2t_plugin  # noqa: F401
from t2t_plugin.runtime import CheckpointError
from t2t_plugin.runtime.hooks import RunCheckError

from ..helpers import (
    ROOT,
    plain_runner,
    run_main,
    run_mmpretrain_tool,
    write_class_folders,
)

DEMO = ROOT / 'configs/t2t-vit-mini_1xb64_digits.py'


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
    return plain_runner(cfg)


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
        tested = run_main(
            'test', config, weights, '--out', out,
            '--work-dir', tmp_path / 'work', *extra,
        )  # fmt: skip
        assert tested.returncode == 0, tested.stderr[-3000:]
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


@pytest.mark.parametrize(
    'out, item',
    [('p.pickle', 'pred'), ('m.yml', 'metrics'), ('m.pickle', 'metrics')],
)
def test_out_takes_every_form_mmengines_dumping_takes(out, item, tmp_path):
    # mmpretrain's test.py: DumpResults (.pkl, .pickle) for the
    # predictions, mmengine's dump (json, yaml, yml, pkl, pickle) for the
    # metrics; both tools write the same
    weights = demo_weights(tmp_path)
    saved = {}
    for name, tool in (('ours', run_main), ('theirs', run_mmpretrain_tool)):
        path = tmp_path / name / out
        tested = tool(
            'test', DEMO, weights, '--out', path, '--out-item', item,
            '--work-dir', tmp_path / f'work-{name}',
        )  # fmt: skip
        assert tested.returncode == 0, tested.stderr[-3000:]
        saved[name] = mmengine.load(path)
    if item == 'metrics':
        assert saved['ours'] == saved['theirs']
        assert set(saved['ours']) == {'accuracy/top1', 'accuracy/top5'}
    else:
        assert len(saved['ours']) == len(saved['theirs']) == 359
        for ours, theirs in zip(saved['ours'], saved['theirs']):
            torch.testing.assert_close(
                ours['pred_score'], theirs['pred_score'], rtol=0, atol=0
            )


def test_non_finite_weights_are_refused_in_one_line(tmp_path):
    def poison(state):
        state['head.layers.head.weight'][0, 0] = float('nan')

    weights = demo_weights(tmp_path, poison)
    tested = run_main('test', DEMO, weights, '--work-dir', tmp_path / 'work')
    assert tested.returncode == 1
    err = tested.stderr.strip().splitlines()
    assert len(err) == 1
    # the head's own load hook: the same line through every loader
    assert err[0] == (
        f'The checkpoint {weights} holds NaN or infinite values in 1 '
        "weight(s) of T2TClsHead, e.g. 'head.layers.head.weight'; it comes "
        'from a run that diverged: take an earlier checkpoint.'
    )
    with pytest.raises(CheckpointError) as info:
        runner_of_demo(tmp_path / 'door', weights).test()
    assert str(info.value) == err[0]


def test_non_finite_outputs_are_flagged(tmp_path):
    def overflow(state):  # finite weights, features that overflow
        state['backbone.norm.weight'].fill_(3e38)

    weights = demo_weights(tmp_path, overflow)
    tested = run_main('test', DEMO, weights, '--work-dir', tmp_path / 'work')
    assert tested.returncode == 1
    err = tested.stderr.strip().splitlines()
    assert err[-1] == (
        '359 of 359 predictions hold NaN or infinite values: '
        'the metrics above are not meaningful.'
    )
    with pytest.raises(RunCheckError) as info:
        runner_of_demo(tmp_path / 'door', weights).test()
    assert str(info.value) == err[-1]


def test_demo_config_trains_under_mmpretrain_train_tool(tmp_path):
    trained = run_mmpretrain_tool(
        'train', DEMO, '--work-dir', tmp_path, '--cfg-options',
        'train_cfg.max_epochs=1', 'train_dataloader.batch_size=512',
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert (tmp_path / 'epoch_1.pth').is_file()


def test_show_dir_draws_every_interval_th_demo_digit_readably(tmp_path):
    """The 8x8 digits, without file names, drawn at 224x224: every 7th
    of the 359, none overwritten by the smaller last batch (128, 128,
    103)."""
    weights = demo_weights(tmp_path)
    tested = run_main(
        'test', DEMO, weights, '--work-dir', tmp_path / 'work',
        '--show-dir', 'vis', '--interval', '7',
    )  # fmt: skip
    assert tested.returncode == 0, tested.stderr[-3000:]
    drawn = sorted((tmp_path / 'work' / 'vis').iterdir())
    assert sorted(p.name for p in drawn) == sorted(
        f'{index}_0.png' for index in range(0, 359, 7)
    )
    for path in drawn[:5]:
        assert Image.open(path).size == (224, 224)  # 8 px x 28


def test_show_dir_keeps_same_named_images_of_every_class_folder(tmp_path):
    """The 32 px recipe on a 3-class folder with the same 8 file names in
    each class: 24 pictures of 224x224, the class folder in their names."""
    config = ROOT / 'configs/t2t-vit-lite_1xb64_custom-32px.py'
    model = MODELS.build(Config.fromfile(str(config)).model)
    weights = tmp_path / 'lite.pth'
    torch.save(dict(state_dict=model.state_dict()), weights)
    classes = ('ant', 'bee', 'cat')
    write_class_folders(
        tmp_path / 'data', classes, 8, splits=('val',), suffix='.png'
    )
    tested = run_main(
        'test', config, weights, '--work-dir', tmp_path / 'work',
        '--show-dir', 'vis', '--cfg-options',
        f'test_dataloader.dataset.data_root={tmp_path / "data"}',
        'test_dataloader.batch_size=10',
    )  # fmt: skip
    assert tested.returncode == 0, tested.stderr[-3000:]
    drawn = sorted((tmp_path / 'work' / 'vis').iterdir())
    assert [p.name for p in drawn] == [
        f'{name}_{index}_0.png' for name in classes for index in range(8)
    ]
    assert {Image.open(path).size for path in drawn} == {(224, 224)}


def test_readable_hook_under_mmpretrain_test_tool(tmp_path):
    """A config that names the hook gets it through mmpretrain's own
    tools/test.py --show-dir too."""
    config = tmp_path / 'readable.py'
    config.write_text(
        f"_base_ = ['{DEMO}']\n"
        'default_hooks = dict(visualization=dict('
        "type='ReadableVisualizationHook'))\n"
    )
    weights = demo_weights(tmp_path)
    tested = run_mmpretrain_tool(
        'test', config, weights, '--work-dir', tmp_path / 'work',
        '--show-dir', tmp_path / 'vis', '--interval', '50',
    )  # fmt: skip
    assert tested.returncode == 0, tested.stderr[-3000:]
    drawn = sorted((tmp_path / 'vis').iterdir())
    assert sorted(p.name for p in drawn) == sorted(
        f'{index}_0.png' for index in range(0, 359, 50)
    )
    assert {Image.open(path).size for path in drawn} == {(224, 224)}


def test_readable_hook_numbers_validation_pictures_by_epoch(tmp_path):
    vis = tmp_path / 'vis'
    trained = run_main(
        'train', DEMO, '--work-dir', tmp_path / 'work', '--cfg-options',
        'train_cfg.max_epochs=1', 'train_cfg.val_interval=1',
        'default_hooks.visualization.type=ReadableVisualizationHook',
        'default_hooks.visualization.enable=True',
        'default_hooks.visualization.interval=100',
        f'default_hooks.visualization.out_dir={vis}',
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert sorted(p.name for p in vis.iterdir()) == [
        f'{index}_1.png' for index in (0, 100, 200, 300)
    ]


def test_amp_tests_in_mixed_precision_as_mmpretrains_tool(tmp_path):
    """--amp sets test_cfg.fp16, as mmpretrain's test.py: both tools give
    the same bf16 scores on the CPU, which differ from float32's."""
    weights = demo_weights(tmp_path)
    scores = {}
    for name, tool, extra in (
        ('fp32', run_main, []),
        ('ours', run_main, ['--amp']),
        ('theirs', run_mmpretrain_tool, ['--amp']),
    ):
        out = tmp_path / f'{name}.pkl'
        tested = tool(
            'test', DEMO, weights, '--out', out,
            '--work-dir', tmp_path / f'work-{name}', *extra,
        )  # fmt: skip
        assert tested.returncode == 0, tested.stderr[-3000:]
        with open(out, 'rb') as f:
            scores[name] = torch.stack(
                [p['pred_score'] for p in pickle.load(f)]
            )
    torch.testing.assert_close(
        scores['ours'], scores['theirs'], atol=0, rtol=0
    )
    # bf16 keeps 8 bits of mantissa: far from float32's scores, close enough
    difference = (scores['ours'] - scores['fp32']).abs().max()
    assert 1e-6 < difference < 0.1
