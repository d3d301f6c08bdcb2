"""The arguments of a class read from its source equal those of the
imported class (mmengine's builders pass the dict's keys to it)."""

import inspect

import pytest
import torch
from mmengine.optim.scheduler import CosineAnnealingLR, LinearLR
from mmpretrain.datasets import CustomDataset, ImageNet

from t2t_plugin.datasets import DigitsDataset
from t2t_preflight.signatures import class_arguments


def imported_arguments(cls) -> set:
    """The keyword arguments ``cls`` takes, following ``**kwargs`` up its
    MRO with ``inspect`` (the reference the source reader must match)."""
    names = set()
    for klass in cls.__mro__:
        if '__init__' not in vars(klass):
            continue
        parameters = inspect.signature(klass.__init__).parameters.values()
        names |= {
            p.name
            for p in parameters
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        }
        if not any(p.kind == p.VAR_KEYWORD for p in parameters):
            return names - {'self'}
    raise AssertionError(f'{cls} takes open **kwargs')


@pytest.mark.parametrize(
    'kind, cls',
    [
        ('optimizer', torch.optim.AdamW),
        ('optimizer', torch.optim.SGD),
        ('param scheduler', LinearLR),
        ('param scheduler', CosineAnnealingLR),
        ('dataset', CustomDataset),
        ('dataset', ImageNet),
        ('dataset', DigitsDataset),
    ],
)
def test_source_arguments_are_those_of_the_class(kind, cls):
    assert class_arguments(kind, 'mmpretrain', cls.__name__) == (
        imported_arguments(cls)
    )
    scoped = f'mmpretrain.{cls.__name__}'
    if kind == 'dataset':
        assert class_arguments(kind, 'mmpretrain', scoped) == (
            imported_arguments(cls)
        )


def test_classes_it_cannot_find_are_left_to_their_builders():
    assert class_arguments('optimizer', 'mmpretrain', 'NoSuchAdam') is None
    assert class_arguments('dataset', 'mmdet', 'CocoDataset') is None
