"""What the runtime knows of weights and the model they are loaded into:
where the weights were read from (the reader
notes it, every refusal names it), and the doors that need the whole
model as it was trained (a test, an inference, a resume):
:func:`whole_model_error` and :func:`load_state_dict_strictly`. The
modules' own load hooks (``t2t_plugin.models.checkpoint_checks``) judge
the weights they own with the same sources and errors.
"""

import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

import torch
from torch import nn

from t2t_preflight.config import few
from t2t_preflight.errors import CheckpointError

# what to do with a checkpoint whose classifier has other classes, where
# a run needs its classifier (a test, an inference, a resume)
RUN_ADVICE = 'use the config it was trained with (its model.head.num_classes)'


@dataclass(frozen=True)
class CheckpointSource:
    """Where weights were read from: the file (or URL), the arch its
    ``meta['t2t_arch']`` records (config keys to values, empty when the
    file records none) and the names of its weights."""

    path: str
    arch: Mapping[str, Any] = field(default_factory=dict)
    keys: tuple[str, ...] = ()


# id of a tensor the checkpoint reader returned -> (a weak reference to it,
# its source). The load hooks see the tensors only: mmengine rebuilds the
# dicts around them on the way (revise_keys, a Pretrained prefix), but the
# tensors arrive as read, so they tell the file.
_SOURCES: dict[int, tuple[weakref.ref, CheckpointSource]] = {}
# the source read last, for a loader that drops every tensor before a
# hook sees one (mmengine's Pretrained when its prefix finds none)
_LATEST: list[CheckpointSource] = []


def note_source(weights: Mapping[str, Any], source: CheckpointSource) -> None:
    """Remember that the tensors of ``weights`` come from ``source``, for
    as long as they live."""
    _LATEST[:] = [source]
    for value in weights.values():
        if isinstance(value, torch.Tensor):
            key = id(value)
            ref = weakref.ref(value, lambda _, key=key: _SOURCES.pop(key, 0))
            _SOURCES[key] = (ref, source)


def source_of(
    state_dict: Mapping[str, Any], prefix: str = ''
) -> Optional[CheckpointSource]:
    """The source of the weights under ``prefix`` (of the first tensor the
    reader returned, else of any), or None for tensors the reader did not
    return (a deep copy, as mmengine's EMAHook loads, or weights built in
    memory). Weights that a loader's filter left without a tensor come
    from the file read last, once: a refusal follows."""
    tensors = [
        (str(key).startswith(prefix), value)
        for key, value in state_dict.items()
        if isinstance(value, torch.Tensor)
    ]
    if not tensors:
        return _LATEST.pop() if _LATEST else None
    for _, value in sorted(tensors, key=lambda pair: not pair[0]):
        ref, source = _SOURCES.get(id(value), (None, None))
        if ref is not None and ref() is value:
            return source
    return None


def latest_source(path: str) -> Optional[CheckpointSource]:
    """The source of the weights read last, if they were read from
    ``path``."""
    return next((s for s in _LATEST if s.path == path), None)


def checkpoint_name(state_dict: Mapping[str, Any], prefix: str = '') -> str:
    """``'checkpoint FILE'`` for weights read from FILE, else
    ``'checkpoint'``: how a load hook's message names them."""
    source = source_of(state_dict, prefix)
    return f'checkpoint {source.path}' if source else 'checkpoint'


def non_finite_tensors(tensors: Mapping[str, Any]) -> list[str]:
    """Names of the floating-point tensors (weights, predictions) holding
    NaN or infinity; meta tensors (shape-only loads) have no values."""
    return [
        name
        for name, value in tensors.items()
        if isinstance(value, torch.Tensor)
        and value.is_floating_point()
        and not value.is_meta
        and not bool(torch.isfinite(value).all())
    ]


def whole_model_error(
    model: nn.Module,
    weights: Mapping[str, Any],
    advice: str = 'use the config it was trained with',
) -> Optional[CheckpointError]:
    """What the modules' load hooks cannot refuse, for a door that runs
    ``model`` as it was trained (a test, an inference, a resume): a
    classifier of another number of classes (a head's
    ``checkpoint_classes``; a fine-tune leaves it out with a warning),
    with ``advice``, and top-level parts ``model`` lacks (another model's
    weights, which every loader of mmengine would drop with a warning).
    None when neither."""
    the = checkpoint_name(weights)
    for name, module in model.named_modules():
        classes = getattr(module, 'checkpoint_classes', None)
        count = classes and classes(weights, f'{name}.' * bool(name))
        if count:
            return CheckpointError(
                f"The {the} classifies {count} classes, this model's head "
                f'{module.num_classes} (num_classes); {advice}.',
                classes=count,
                advice=advice,
            )
    children = {name for name, _ in model.named_children()}
    own = set(model.state_dict())
    foreign = sorted(
        {
            str(key).split('.')[0]
            for key in weights
            if str(key).split('.')[0] not in children and key not in own
        }
    )
    if foreign:
        return CheckpointError(
            f'The {the} holds weights of {few(foreign)}, which this '
            f"{type(model).__name__} does not have: it is another model's "
            'checkpoint; use the config it was trained with.'
        )
    return None


def load_state_dict_strictly(
    model: nn.Module, checkpoint: Mapping[str, Any], source: str = ''
) -> None:
    """Load a checkpoint (as :func:`~t2t_plugin.runtime.read_checkpoint`
    returns it) into a model that runs as it was trained: the model's load
    hooks judge the weights they own, :func:`whole_model_error` the rest,
    and every entry must be used. ``source`` names the weights in the
    lines of torch's own checks (shapes, missing and unexpected keys);
    else the file the reader read.

    Raises:
        CheckpointError: If weights are missing, unexpected or of another
            shape, or the classifier has other classes (its ``classes``).
    """
    weights = checkpoint.get('state_dict', checkpoint)
    error = whole_model_error(model, weights, RUN_ADVICE)
    if error:
        raise error
    the = source or f'The {checkpoint_name(weights)}'
    try:
        result = model.load_state_dict(weights, strict=False)
    except RuntimeError as error:  # shapes of a module without our hooks
        if isinstance(error, CheckpointError):
            raise
        # torch's message: a header line, then one line per problem
        problems = [
            line.strip().rstrip('.')
            for line in str(error).splitlines()
            if line.strip()
        ]
        detail = '; '.join(problems[1:] or problems)
        if len(detail) > 600:  # e.g. hundreds of unexpected keys
            detail = detail[:600] + ' ...'
        raise CheckpointError(
            f'{the} does not fit the model: {detail}.'
        ) from None
    if result.missing_keys or result.unexpected_keys:
        raise CheckpointError(
            f'{the} does not fit the model: '
            f'{len(result.missing_keys)} weights missing (e.g. '
            f'{result.missing_keys[:2]}), {len(result.unexpected_keys)} '
            f'unexpected (e.g. {result.unexpected_keys[:2]}); use the config '
            'the checkpoint was trained or converted for.'
        )
