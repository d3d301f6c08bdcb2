"""The options of our datasets, dataset wrappers and run guards are checked
when they are built: a wrong type (a bool is a bool, a count a whole
number) or a value out of range is one line naming the part, the option,
what it takes and the value."""

import math

import pytest
from mmengine.registry import DATA_SAMPLERS
from mmpretrain.registry import DATASETS, HOOKS

from t2t_plugin.datasets import SampleSeededDataset, SkipBadImages

from ..helpers import DEMO, MMPRETRAIN_TOOLS, run_main

DIGITS = 'DigitsDataset'
FRACTION = 'a number between 0 and 1 (both excluded)'


@pytest.mark.parametrize(
    'options, line',
    [
        (
            dict(split='tset'),
            "split must be one of 'train', 'val', 'all', got 'tset'.",
        ),
        (dict(val_ratio=True), f'val_ratio must be {FRACTION}, got True.'),
        (dict(val_ratio=1.5), f'val_ratio must be {FRACTION}, got 1.5.'),
        (dict(val_ratio=math.nan), f'val_ratio must be {FRACTION}, got nan.'),
        (dict(val_ratio='0.2'), f"val_ratio must be {FRACTION}, got '0.2'."),
        (
            dict(seed=-1),
            'seed must be a whole number of at least 0, got -1.',
        ),
        (
            dict(seed=2.5),
            'seed must be a whole number of at least 0, got 2.5.',
        ),
        (
            dict(test_mode='yes'),
            "test_mode must be True or False, got 'yes'.",
        ),
        (
            dict(serialize_data=0),
            'serialize_data must be True or False, got 0.',
        ),
    ],
)
def test_digits_options_are_checked(options, line):
    with pytest.raises(ValueError) as info:
        DATASETS.build(dict(type=DIGITS, **options))
    assert str(info.value) == f'{DIGITS}: {line}'


def test_digits_options_in_range_split_as_asked():
    # round(1797 * 0.5) = 898 (to even) images go to val
    train = DATASETS.build(dict(type=DIGITS, val_ratio=0.5, seed=3))
    val = DATASETS.build(dict(type=DIGITS, split='val', val_ratio=0.5, seed=3))
    assert (len(train), len(val)) == (899, 898)


@pytest.mark.parametrize('kind', ['LocalCIFAR10', 'LocalCIFAR100'])
@pytest.mark.parametrize(
    'options, line',
    [
        (
            dict(split='val'),
            "split must be one of 'train', 'test', got 'val'.",
        ),
        (
            dict(split='test', lazy_init=1),
            'lazy_init must be True or False, got 1.',
        ),
        (
            dict(data_root=''),
            "data_root must be a path (text that is not empty), got ''.",
        ),
        (
            dict(data_root=None),
            'data_root must be a path (text that is not empty), got None.',
        ),
    ],
)
def test_cifar_options_are_checked(kind, options, line, tmp_path):
    cfg = dict(type=kind, data_root=str(tmp_path))
    with pytest.raises(ValueError) as info:
        DATASETS.build({**cfg, **options})
    assert str(info.value) == f'{kind}: {line}'


def test_wrapper_and_guard_options_are_checked():
    digits = DATASETS.build(dict(type=DIGITS, split='val'))
    cases = [
        (
            lambda: SampleSeededDataset('data/train'),
            'SampleSeededDataset: dataset must be a dataset or its config (a '
            "dict with its type), got 'data/train'.",
        ),
        (
            lambda: SkipBadImages(digits, digits.pipeline, in_channels=0),
            'SkipBadImages: in_channels must be a whole number of at least 1 '
            'or None, got 0.',
        ),
        (
            lambda: SkipBadImages(digits, digits.pipeline, size_multiple=2.0),
            'SkipBadImages: size_multiple must be a whole number of at least '
            '1 or None, got 2.0.',
        ),
        (
            lambda: HOOKS.build(
                dict(type='BadImageHook', max_bad_images=True)
            ),
            'BadImageHook: max_bad_images must be a whole number of at least '
            '0, got True.',
        ),
        (
            lambda: HOOKS.build(
                dict(type='NonFiniteGuardHook', max_consecutive=0)
            ),
            'NonFiniteGuardHook: max_consecutive must be a whole number of at '
            'least 1, got 0.',
        ),
    ]
    for build, line in cases:
        with pytest.raises(ValueError) as info:
            build()
        assert str(info.value) == line
    sampler = dict(
        type='SampleSeedSampler', sampler=dict(type='DefaultSampler'), seed='0'
    )
    with pytest.raises(ValueError) as info:
        DATA_SAMPLERS.build(sampler, default_args=dict(dataset=digits))
    assert str(info.value) == (
        "SampleSeedSampler: seed must be a whole number or None, got '0'."
    )


@pytest.mark.parametrize('tool', ['train', MMPRETRAIN_TOOLS / 'train.py'])
def test_a_dataset_option_of_the_wrong_type_stops_the_run(tool, tmp_path):
    line = "DigitsDataset: test_mode must be True or False, got 'yes'."
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
