"""The checks of the model parts' options, made when a part is built.

Every option of the backbone, the T2T module, its token layers, the head
and the neck (and of the parts of ``projects/``) goes through these
functions, so that a wrong value is one ValueError line at build time,
whatever door builds the model (our tools, which print it after the
config's name, mmpretrain's ``get_model``, ``MODELS.build``): the class,
the option, the value given and what is accepted. A bool is a
bool (``'no'`` is no bool), a count a positive int, a loss weight a finite
positive number; a key a part does not take is named with its nearest
valid key.
"""

import inspect
import math
from collections.abc import Iterable, Mapping
from numbers import Integral, Real
from typing import Any, Callable, Optional

from t2t_preflight.config import nearest

from ..option_checks import (  # noqa: F401 (the model parts' names)
    _refuse,
    check_bool,
    check_choice,
    check_int,
)


def _real(value: Any) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


def check_positive(
    owner: str, name: str, value: Any, maximum: Optional[float] = None
) -> float:
    """``value`` if it is a finite number above 0 (at most ``maximum``):
    a loss weight, a temperature, a ratio of widths."""
    if (
        not _real(value)
        or not math.isfinite(value)
        or value <= 0
        or (maximum is not None and value > maximum)
    ):
        limit = f' and at most {maximum:g}' if maximum is not None else ''
        raise _refuse(
            owner, name, value, f'give a finite number above 0{limit}'
        )
    return float(value)


def check_number(owner: str, name: str, value: Any) -> float:
    """``value`` if it is a finite number (a coefficient of any sign)."""
    if not _real(value) or not math.isfinite(value):
        raise _refuse(owner, name, value, 'give a finite number')
    return float(value)


def check_fraction(
    owner: str, name: str, value: Any, closed: bool = False
) -> float:
    """``value`` if it is a number in ``[0, 1)`` (``[0, 1]`` when
    ``closed``): a dropout rate, a share of a loss."""
    if (
        not _real(value)
        or not math.isfinite(value)
        or not (value >= 0 and (value <= 1 if closed else value < 1))
    ):
        interval = '[0, 1]' if closed else '[0, 1)'
        raise _refuse(owner, name, value, f'give a number in {interval}')
    return float(value)


def check_keys(
    owner: str, name: str, given: Any, known: Iterable[str]
) -> dict:
    """``given`` as a dict if it is a mapping whose keys are all in
    ``known``; an unknown key is named with the nearest known one."""
    known = sorted(known)
    if not isinstance(given, Mapping):
        raise _refuse(
            owner, name, given, f'give a dict with keys among {known}'
        )
    for key in given:
        if key not in known:
            close = nearest(key, known)
            hint = f"did you mean '{close}'? " if close else ''
            raise ValueError(
                f'{owner} got an unknown key {key!r} in {name}; {hint}'
                f'it takes {", ".join(known)}.'
            )
    return dict(given)


def check_ints(
    owner: str, name: str, value: Any, length: int, minimum: int = 1
) -> tuple[int, ...]:
    """``value`` if it is a sequence of ``length`` ints, each of at least
    ``minimum``."""
    if (
        isinstance(value, (str, bytes, Mapping))
        or not isinstance(value, Iterable)
        or len(tuple(value)) != length
        or any(
            isinstance(v, bool) or not isinstance(v, Integral) or v < minimum
            for v in value
        )
    ):
        raise _refuse(
            owner,
            name,
            value,
            f'give {length} integers, each of at least {minimum}',
        )
    return tuple(int(v) for v in value)


def check_int_or_ints(owner: str, name: str, value: Any) -> Any:
    """``value`` if it is a positive int or a sequence of them (the
    ``topk`` of mmpretrain's heads, widths)."""
    if isinstance(value, (list, tuple)):
        return check_ints(owner, name, value, len(value))
    return check_int(owner, name, value)


def check_size(owner: str, name: str, value: Any) -> tuple[int, int]:
    """``value`` as ``(height, width)`` if it is a positive int or a pair
    of them: an image size."""
    pair = (
        (value, value)
        if isinstance(value, Integral) and not isinstance(value, bool)
        else value
    )
    try:
        return check_ints(owner, name, pair, 2)
    except ValueError:
        raise _refuse(
            owner, name, value, 'give a positive integer or a pair of them'
        ) from None


# A rule of a class's option table: a check of this module and its extra
# arguments, e.g. ``(check_int, -1)`` (an int of at least -1).
Rule = tuple


def optional(check: Callable) -> Callable:
    """``check`` for an option whose default None means 'not set'."""

    def check_optional(owner: str, name: str, value: Any, *args) -> Any:
        return None if value is None else check(owner, name, value, *args)

    return check_optional


def check_options(
    owner: str,
    rules: Mapping[str, Rule],
    values: Mapping[str, Any],
    prefix: str = '',
) -> dict[str, Any]:
    """Check the options ``values`` (a constructor's ``locals()``, a
    config dict) that the table ``rules`` names, the one way every model
    part checks its options; returns them as checked (a size as a pair,
    a sequence as a tuple). ``prefix`` names a nested dict
    (``'arch.'``)."""
    return {
        name: check(owner, prefix + name, values[name], *args)
        for name, (check, *args) in rules.items()
        if name in values
    }


# a custom arch's numbers, before and after the arch table fills it in
ARCH_RULES: dict[str, Rule] = dict(
    embed_dims=(check_int,),
    num_layers=(check_int,),
    num_heads=(check_int,),
    mlp_ratio=(check_positive,),
    feedforward_channels=(check_int,),
)
ATTN_INIT_RULES: dict[str, Rule] = dict.fromkeys(
    ('alpha_qk', 'beta_qk', 'alpha_vo', 'beta_vo'), (check_number,)
)


def check_attn_init(owner: str, attn_init: Any) -> Optional[dict]:
    """The settings of a backbone's ``attn_init`` (None, or
    ``dict(type='mimetic')`` with optional coefficients), without its
    type."""
    if attn_init is None:
        return None
    known = tuple(ATTN_INIT_RULES)
    if not isinstance(attn_init, Mapping) or (
        attn_init.get('type') != 'mimetic'
    ):
        raise ValueError(
            f'Unknown attn_init {attn_init!r}; give None (the official '
            "initialisation) or dict(type='mimetic') with optional "
            f'{", ".join(sorted(known))}.'
        )
    settings = check_keys(owner, 'attn_init', attn_init, ('type', *known))
    del settings['type']
    check_options(owner, ATTN_INIT_RULES, settings, 'attn_init.')
    return settings


def check_layer_cfg(owner: str, layer_cfg: Any, base: type) -> dict:
    """A ``layer_cfgs`` entry whose keys are arguments of the class it
    builds (a registered subclass of ``base``; an unknown key named with
    the nearest one), its ``type`` the class itself: built under another
    default scope (mmdet's), a name would be looked up in that scope's
    registry."""
    from mmpretrain.registry import MODELS

    if not isinstance(layer_cfg, Mapping):
        raise ValueError(
            f'{owner} got layer_cfgs entry {layer_cfg!r}; give a dict of '
            'encoder layer arguments.'
        )
    cfg = {'type': base.__name__, **layer_cfg}
    layer_cls = MODELS.get(cfg['type'])
    if not (isinstance(layer_cls, type) and issubclass(layer_cls, base)):
        raise ValueError(
            f'{owner} got layer_cfgs type {cfg["type"]!r}; give the '
            f'registered type of a {base.__name__} (or leave it out).'
        )
    accepted = set(inspect.signature(layer_cls).parameters) | {'type'}
    check_keys(owner, 'layer_cfgs', cfg, accepted)
    return {**cfg, 'type': layer_cls}


def check_out_indices(owner: str, out_indices: Any, depth: int) -> list[int]:
    """``out_indices`` (an int or ints, negative from the end) as indices
    of ``depth`` layers."""
    parsed = []
    for index in (
        [out_indices] if isinstance(out_indices, int) else out_indices
    ):
        check_int(owner, 'out_indices entry', index, -depth)
        resolved = index + depth if index < 0 else index
        if not 0 <= resolved < depth:
            raise ValueError(
                f'out_indices entry {index} is outside the {depth} encoder '
                f'layers (0..{depth - 1}, or negative from the end).'
            )
        parsed.append(resolved)
    return parsed
