"""The options of our datasets, dataset wrappers and run guards are checked
when they are built: a wrong type (a bool is a bool, a count an int) or a
value out of range is one line naming the part, the option, the value and
what is accepted."""

import math

import pytest
from mmengine.registry import DATA_SAMPLERS
from mmpretrain.registry import DATASETS, HOOKS

from t2t_plugin.runtime import SampleSeededDataset, SkipBadImages

from ..helpers import DEMO, MMPRETRAIN_TOOLS, run_main

DIGITS = 'DigitsDataset'
RATIO = 'give a number between 0 and 1 (both excluded).'


@pytest.mark.parametrize(
    'options, line',
    [
        (
            dict(split='tset'),
            "split='tset'; choose one of 'train', 'val', 'all'.",
        ),
        (dict(val_ratio=True), f'val_ratio=True; {RATIO}'),
        (dict(val_ratio=1.5), f'val_ratio=1.5; {RATIO}'),
        (dict(val_ratio=math.nan), f'val_ratio=nan; {RATIO}'),
        (dict(val_ratio='0.2'), f"val_ratio='0.2'; {RATIO}"),
        (dict(seed=-1), 'seed=-1; give an integer of at least 0.'),
        (dict(seed=2.5), 'seed=2.5; give an integer of at least 0.'),
        (dict(test_mode='yes'), "test_mode='yes'; give True or False."),
        (dict(serialize_data=0), 'serialize_data=0; give True or False.'),
        (
            dict(max_refetch=-1),
            'max_refetch=-1; give an integer of at least 0.',
        ),
    ],
)
def test_digits_options_are_checked(options, line):
    with pytest.raises(ValueError) as info:
        DATASETS.build(dict(type=DIGITS, **options))
    assert str(info.value) == f'{DIGITS} got {line}'


def test_digits_options_in_range_split_as_asked():
    # round(1797 * 0.5) = 898 (to even) images go to val
    train = DATASETS.build(dict(type=DIGITS, val_ratio=0.5, seed=3))
    val = DATASETS.build(dict(type=DIGITS, split='val', val_ratio=0.5, seed=3))
    assert (len(train), len(val)) == (899, 898)


@pytest.mark.parametrize('kind', ['LocalCIFAR10', 'LocalCIFAR100'])
@pytest.mark.parametrize(
    'options, line',
    [
        (dict(split='val'), "split='val'; choose one of 'train', 'test'."),
        (dict(split='test', lazy_init=1), 'lazy_init=1; give True or False.'),
        (dict(data_root=''), "data_root=''; give a folder path."),
        (dict(data_root=None), 'data_root=None; give a folder path.'),
    ],
)
def test_cifar_options_are_checked(kind, options, line, tmp_path):
    cfg = dict(type=kind, data_root=str(tmp_path))
    with pytest.raises(ValueError) as info:
        DATASETS.build({**cfg, **options})
    assert str(info.value) == f'{kind} got {line}'


def test_wrapper_and_guard_options_are_checked():
    digits = DATASETS.build(dict(type=DIGITS, split='val'))
    sampler = dict(
        type='SampleSeedSampler', sampler=dict(type='DefaultSampler'), seed='0'
    )
    cases = [
        (
            lambda: SampleSeededDataset('data/train'),
            "SampleSeededDataset got dataset='data/train'; give a dataset or "
            'its config (a dict with its type).',
        ),
        (
            lambda: DATA_SAMPLERS.build(
                sampler, default_args=dict(dataset=digits)
            ),
            "SampleSeedSampler got seed='0'; give an integer of at least 0.",
        ),
        (
            lambda: HOOKS.build(
                dict(type='RunGuardHook', max_bad_images=True)
            ),
            'RunGuardHook got max_bad_images=True; give an integer of at '
            'least 0.',
        ),
        (
            lambda: HOOKS.build(dict(type='RunGuardHook', max_consecutive=0)),
            'RunGuardHook got max_consecutive=0; give an integer of at '
            'least 1.',
        ),
    ]
    for build, line in cases:
        with pytest.raises(ValueError) as info:
            build()
        assert str(info.value) == line
    # None: the run's channels, stride and seed, not checked
    assert SkipBadImages(digits, digits.pipeline).in_channels is None


@pytest.mark.parametrize('tool', ['train', MMPRETRAIN_TOOLS / 'train.py'])
def test_a_dataset_option_of_the_wrong_type_stops_the_run(tool, tmp_path):
    line = "DigitsDataset got test_mode='yes'; give True or False."
    result = run_main(
        tool, DEMO, '--work-dir', tmp_path / 'w',
        '--cfg-options', 'train_dataloader.dataset.test_mode=yes',
    )  # fmt: skip
    assert result.returncode != 0
    if tool == 'train':
        assert result.stderr == (
            f'{DEMO}: ValueError: {line} (set T2T_DEBUG=1 for the traceback)\n'
        )
    else:
        assert result.stderr.strip().endswith(f'ValueError: {line}')
