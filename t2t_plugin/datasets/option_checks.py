"""Checks of the options our datasets, dataset wrappers and run guards are
built with: a value of the wrong type or out of range is refused when the
part is built, in one line naming the part, the option, what it takes and
the value given (``test_mode='yes'`` would otherwise be true, a count of
``2.5`` fail deep in a loader)."""

import math
from collections.abc import Sequence
from typing import Any, Optional


def _refuse(owner: str, name: str, what: str, value: Any) -> None:
    raise ValueError(f'{owner}: {name} must be {what}, got {value!r}.')


def check_bool(owner: str, name: str, value: Any) -> None:
    """``value`` is ``True`` or ``False`` (not ``'yes'``, ``0`` or None)."""
    if not isinstance(value, bool):
        _refuse(owner, name, 'True or False', value)


def check_integer(
    owner: str,
    name: str,
    value: Any,
    minimum: Optional[int] = None,
    optional: bool = False,
) -> None:
    """``value`` is a whole number (not a bool, not ``2.0``) of at least
    ``minimum``; None too if ``optional``."""
    if optional and value is None:
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or (minimum is not None and value < minimum)
    ):
        what = 'a whole number' + (
            f' of at least {minimum}' if minimum is not None else ''
        )
        _refuse(owner, name, what + (' or None' if optional else ''), value)


def check_fraction(owner: str, name: str, value: Any) -> None:
    """``value`` is a number strictly between 0 and 1."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not 0 < value < 1
        or not math.isfinite(value)
    ):
        _refuse(owner, name, 'a number between 0 and 1 (both excluded)', value)


def check_choice(owner: str, name: str, value: Any, choices: Sequence) -> None:
    """``value`` is one of ``choices``."""
    if not any(type(value) is type(c) and value == c for c in choices):
        _refuse(owner, name, f'one of {", ".join(map(repr, choices))}', value)


def check_text(owner: str, name: str, value: Any) -> None:
    """``value`` is a string that is not empty (a path, a name)."""
    if not isinstance(value, str) or not value:
        _refuse(owner, name, 'a path (text that is not empty)', value)


def check_dataset_options(owner: str, options: dict) -> None:
    """The options of mmengine's ``BaseDataset`` that ``options`` (the
    keyword arguments a dataset of ours passes on) sets: its switches are
    bools, ``max_refetch`` a whole number of at least 0."""
    for name in ('test_mode', 'lazy_init', 'serialize_data'):
        if name in options:
            check_bool(owner, name, options[name])
    if 'max_refetch' in options:
        check_integer(owner, 'max_refetch', options['max_refetch'], minimum=0)
