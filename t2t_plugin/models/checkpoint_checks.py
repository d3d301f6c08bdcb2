"""The one fit check of checkpoint weights, which every module's load
pre-hook calls: every door a checkpoint takes ends there, so that a wrong
checkpoint is one line, not a warning and a partly random model.
"""

import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

import torch


class CheckpointError(ValueError):
    """A checkpoint that cannot be read; the message is one line."""


class CheckpointMismatchError(RuntimeError, ValueError):
    """A checkpoint whose weights do not fit the model; one line.

    A RuntimeError as torch's strict loading raises, and a ValueError as
    every other user mistake.
    """


class ClassCountError(CheckpointMismatchError):
    """A checkpoint whose classifier has ``classes`` classes, not the
    head's number. The message ends with ``advice``, what to do in
    training; a tool that only runs the model gives its own
    (:meth:`advising`)."""

    def __init__(
        self, message: str, classes: int = 0, advice: str = ''
    ) -> None:
        super().__init__(message)
        self.classes = classes
        self.advice = advice

    def advising(self, advice: str) -> 'ClassCountError':
        """This error with ``advice`` in place of the training's."""
        message = str(self).replace(self.advice, advice)
        return type(self)(message, self.classes, advice)


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


def _examples(names: list[str], count: int = 2) -> str:
    return ', '.join(repr(name) for name in names[:count])


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, (list, tuple)) else value


def check_fit(
    owner: str,
    own: Mapping[str, torch.Tensor],
    state_dict: Mapping[str, Any],
    prefix: str,
    optional: Iterable[str] = (),
    advice: str = 'use the config the checkpoint was trained or converted for',
    droppable: Iterable[str] = (),
    whole_model: bool = False,
    arch: Optional[Mapping[str, Any]] = None,
) -> tuple[int, list[str]]:
    """Refuse a load that would leave a module partly random or broken
    (another recorded arch, none of its weights, some missing, not
    floating tensors, of another shape or not finite) or that would leave
    entries of the checkpoint under the module's ``prefix`` unused
    (another depth, another head); return how many tensors it supplies
    and the optional keys left as built.

    Args:
        owner (str): The module, for the messages (``'T2TViT'``).
        own (Mapping): The module's state dict (``keep_vars=True``).
        state_dict (Mapping): The weights being loaded, keys with ``prefix``.
        prefix (str): Where the module sits in the model being loaded.
        optional (Iterable[str]): Own keys a checkpoint may leave out.
        advice (str): What to do when the weights do not fit.
        droppable (Iterable[str]): Keys a checkpoint may hold that the
            module knowingly leaves unused (a class token of a model built
            without one).
        whole_model (bool): Every entry of ``state_dict`` is meant for this
            module, loaded as the whole model. Otherwise only the entries
            under a non-empty ``prefix`` must be used. Defaults to False.
        arch (Mapping, optional): The module's arch as config keys to
            values, compared with the arch the checkpoint records.

    Raises:
        CheckpointMismatchError: One line naming the file the reader read
            the weights from.
    """
    source = source_of(state_dict, prefix)
    the = f'checkpoint {source.path}' if source else 'checkpoint'
    for key, value in (arch or {}).items():
        recorded = source.arch.get(key) if source else None
        if recorded is not None and _plain(recorded) != _plain(value):
            raise CheckpointMismatchError(
                f'The {the} was trained with {key}={_plain(recorded)}, this '
                f'model has {key}={_plain(value)}: the weights have the same '
                'shapes but mean something else; use the config it was '
                f'trained with (set {key}={_plain(recorded)}).'
            )
    entries = {
        k: state_dict[prefix + k] for k in own if prefix + k in state_dict
    }
    wrong = [
        (prefix + k, type(v).__name__)
        for k, v in entries.items()
        if not isinstance(v, torch.Tensor)
    ]
    if wrong:
        raise CheckpointMismatchError(
            f'The {the} holds {len(wrong)} weight(s) of {owner} that are not '
            f'tensors, e.g. {wrong[0][0]!r} (a {wrong[0][1]}); it was not '
            'saved from model.state_dict(): save one with '
            "torch.save({'state_dict': model.state_dict()}, path)."
        )
    # copy_ casts an integer or boolean tensor silently and skips a
    # quantized one: another kind of number is another model
    other_kind = [
        f'{prefix + k} ({v.dtype})'
        for k, v in entries.items()
        if v.is_quantized
        or v.is_floating_point() != own[k].is_floating_point()
    ]
    if other_kind:
        raise CheckpointMismatchError(
            f'The {the} holds {len(other_kind)} weight(s) of {owner} of '
            f'another kind than the model, e.g. {other_kind[0]}; only '
            'floating-point weights load: save the weights of the trained '
            'model as they are, not cast to integers or quantized.'
        )
    if not entries:
        found = [str(key) for key in state_dict]
        raise CheckpointMismatchError(
            f'The {the} holds none of the {len(own)} weights of {owner} '
            f'(expected e.g. {_examples([prefix + k for k in own])}; it has '
            f'{len(found)} entries here'
            f'{", e.g. " + _examples(found) if found else ""}): {advice}.'
        )
    optional = set(optional)
    missing = [
        prefix + k for k in own if k not in entries and k not in optional
    ]
    if missing:
        raise CheckpointMismatchError(
            f'The {the} lacks {len(missing)} of the {len(own)} weights of '
            f'{owner} (e.g. {_examples(missing)}): {advice}.'
        )
    known = set(own) | set(droppable)
    unused = [
        str(key)
        for key in state_dict
        if (prefix or whole_model)
        and str(key).startswith(prefix)
        and str(key)[len(prefix) :] not in known
    ]
    if unused:
        under = f' under {prefix!r}' if prefix else ''
        raise CheckpointMismatchError(
            f'The {the} holds {len(unused)} entries{under} that {owner} does '
            f'not have (e.g. {_examples(unused)}), which would be left '
            f'unused: {advice}.'
        )
    other_shapes = [
        f'{prefix + k} {tuple(v.shape)} vs {tuple(own[k].shape)}'
        for k, v in entries.items()
        if v.shape != own[k].shape
    ]
    if other_shapes:
        raise CheckpointMismatchError(
            f'{len(other_shapes)} weight(s) of the {the} have other shapes '
            f'than those of {owner}, e.g. {"; ".join(other_shapes[:2])} '
            f'(checkpoint vs model): {advice}.'
        )
    not_finite = [prefix + k for k in non_finite_tensors(entries)]
    if not_finite:
        raise CheckpointMismatchError(
            f'The {the} holds NaN or infinite values in {len(not_finite)} '
            f'weight(s) of {owner}, e.g. {_examples(not_finite)}; it comes '
            'from a run that diverged: take an earlier checkpoint.'
        )
    left = sorted(key for key in optional & set(own) if key not in entries)
    return len(entries), left
