"""The checks of the options our datasets, dataset wrappers and run guards
are built with: a value of the wrong type or out of range is one line at
build time, naming the part, the option, the value given and what is
accepted (``test_mode='yes'`` would otherwise be true, a count of ``2.5``
fail deep in a loader). A bool is a bool, a count an int (not a bool) of
at least its minimum. The lines read as those of the model parts'
options."""

import math
from numbers import Real
from typing import Any

# One set of checks for every part: the type and range rules, and the
# wording of the line, are the model options'.
from ..models.option_checks import (  # noqa: F401
    _refuse,
    check_bool,
    check_choice,
    check_int,
)


def check_ratio(owner: str, name: str, value: Any) -> float:
    """``value`` if it is a number strictly between 0 and 1: a share that
    leaves something on both sides (the images of a split)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, Real)
        or not math.isfinite(value)
        or not 0 < value < 1
    ):
        raise _refuse(
            owner, name, value, 'give a number between 0 and 1 (both excluded)'
        )
    return float(value)


def check_path(owner: str, name: str, value: Any) -> str:
    """``value`` if it is a path: text that is not empty."""
    if not isinstance(value, str) or not value:
        raise _refuse(owner, name, value, 'give a folder path')
    return value


def check_dataset_options(owner: str, options: dict) -> None:
    """The options of mmengine's ``BaseDataset`` that ``options`` (the
    keyword arguments a dataset of ours passes on) sets: its switches are
    bools, ``max_refetch`` an int of at least 0."""
    for name in ('test_mode', 'lazy_init', 'serialize_data'):
        if name in options:
            check_bool(owner, name, options[name])
    if 'max_refetch' in options:
        check_int(owner, 'max_refetch', options['max_refetch'], minimum=0)
