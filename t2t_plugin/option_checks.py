"""The checks of the options every part of the plugin is built with (the
model parts', ``t2t_plugin.models.option_checks``, add theirs): a value
of the wrong type or out of range is one line at build time, naming the
part, the option, the value given and what is accepted
(``test_mode='yes'`` would otherwise be true, a count of ``2.5`` fail deep
in a loader). A bool is a bool, a count an int (not a bool) of at least
its minimum."""

import math
from collections.abc import Iterable
from numbers import Integral, Real
from typing import Any, Optional

from t2t_preflight.config import nearest


def _refuse(owner: str, name: str, value: Any, accepted: str) -> ValueError:
    # a ValueError, as the host's own parts refuse a wrong argument
    return ValueError(f'{owner} got {name}={value!r}; {accepted}.')


def check_bool(owner: str, name: str, value: Any) -> bool:
    """``value`` if it is a bool (``'yes'``, ``'no'``, 0 and 1 are not)."""
    if not isinstance(value, bool):
        raise _refuse(owner, name, value, 'give True or False')
    return value


def check_int(
    owner: str,
    name: str,
    value: Any,
    minimum: int = 1,
    maximum: Optional[int] = None,
) -> int:
    """``value`` if it is an int (not a bool) of at least ``minimum`` (and
    at most ``maximum``: a size whose memory grows with it)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, Integral)
        or value < minimum
        or (maximum is not None and value > maximum)
    ):
        limit = f' and at most {maximum}' if maximum is not None else ''
        raise _refuse(
            owner,
            name,
            value,
            f'give an integer of at least {minimum}{limit}',
        )
    return int(value)


def check_choice(
    owner: str, name: str, value: Any, choices: Iterable[str]
) -> str:
    """``value`` if it is one of ``choices``; else the line names them and
    the nearest one."""
    choices = tuple(choices)
    if isinstance(value, str) and value in choices:
        return value
    close = nearest(value, choices) if isinstance(value, str) else None
    hint = f" (did you mean '{close}'?)" if close else ''
    raise _refuse(
        owner,
        name,
        value,
        f'choose one of {", ".join(repr(c) for c in choices)}{hint}',
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
