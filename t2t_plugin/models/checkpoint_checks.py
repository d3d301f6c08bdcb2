"""What the models' load pre-hooks check, in one place: every door a
checkpoint takes ends there, so that a wrong checkpoint is one line, not a
warning and a partly random model.
"""

import copy
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any, Optional

import torch


class CheckpointError(ValueError):
    """A checkpoint that cannot be read; the message is one line."""


class CheckpointMismatchError(RuntimeError, ValueError):
    """A checkpoint whose weights do not fit the model; one line.

    A RuntimeError as torch's strict loading raises, and a ValueError as
    every other user mistake. A load hook that was not told the file says
    ``the checkpoint``; a caller that knows the file names it with
    :meth:`naming`.
    """

    def __init__(self, message: str, template: Optional[str] = None) -> None:
        super().__init__(message)
        # the message with CHECKPOINT where the file's name belongs
        self.template = template

    def naming(self, path: str) -> 'CheckpointMismatchError':
        """This error naming the file ``path`` (itself if it names one)."""
        if self.template is None:
            return self
        return type(self)(
            self.template.replace(CHECKPOINT, f'checkpoint {path}')
        )


class ClassCountError(CheckpointMismatchError):
    """A checkpoint whose classifier has ``classes`` classes, not the
    head's number. The message ends with ``advice``, what to do in
    training; a tool that only runs the model gives its own
    (:meth:`advising`)."""

    def __init__(
        self,
        message: str,
        template: Optional[str] = None,
        classes: int = 0,
        advice: str = '',
    ) -> None:
        super().__init__(message, template)
        self.classes = classes
        self.advice = advice

    def naming(self, path: str) -> 'ClassCountError':
        named = super().naming(path)
        named.classes, named.advice = self.classes, self.advice
        return named

    def advising(self, advice: str) -> 'ClassCountError':
        """This error with ``advice`` in place of the training's."""
        template = self.template and self.template.replace(self.advice, advice)
        message = str(self).replace(self.advice, advice)
        return type(self)(message, template, self.classes, advice)


# Where the load hooks' messages name the checkpoint.
CHECKPOINT = '{checkpoint}'


def mismatch(
    template: str,
    local_metadata: Optional[Mapping] = None,
    error: type = CheckpointMismatchError,
    **fields: Any,
) -> CheckpointMismatchError:
    """The error of a load hook: ``template`` with :data:`CHECKPOINT` as
    ``'checkpoint FILE'`` for weights a loader read from FILE (it says so
    in ``local_metadata``), else ``'checkpoint'``, to be named by a caller
    that knows the file; an ``error`` (a CheckpointMismatchError) with
    ``fields``."""
    path = (local_metadata or {}).get(_FILE_KEY)
    if path:
        return error(
            template.replace(CHECKPOINT, f'checkpoint {path}'), **fields
        )
    return error(
        template.replace(CHECKPOINT, 'checkpoint'), template, **fields
    )


# The reader knows the file, the load hooks only see the weights, which
# mmengine rebuilds on the way (``revise_keys``, prefixes): ``_metadata``,
# which torch hands every module as its ``local_metadata``, survives the
# trip and carries the name. It is not saved again. Where a loader drops
# it (mmengine's ``Pretrained`` with a ``prefix``, a state dict filtered
# by hand), the caller names the error (:meth:`CheckpointMismatchError.
# naming`).
_FILE_KEY = 'checkpoint_file'


class _FileNamingMetadata(OrderedDict):
    """A state dict's ``_metadata`` whose entries also name its file, for
    every module whatever its prefix; pickled, a plain ``OrderedDict``; a
    deep copy (mmengine's EMA hook copies the weights) still names it."""

    def __init__(self, entries: Mapping = (), path: str = '') -> None:
        super().__init__(entries)
        self.path = path

    def get(self, key: str, default: Any = None) -> Any:
        entry = super().get(key, default)
        if entry is None or isinstance(entry, Mapping):
            return {**(entry or {}), _FILE_KEY: self.path}
        return entry

    def __reduce__(self) -> tuple:
        return OrderedDict, (list(self.items()),)

    def __deepcopy__(self, memo: dict) -> '_FileNamingMetadata':
        return type(self)(copy.deepcopy(list(self.items()), memo), self.path)


# The entries of an mmengine checkpoint that hold weights.
_WEIGHT_ENTRIES = ('state_dict', 'ema_state_dict')


def mark_checkpoint_file(checkpoint: Any, path: str) -> Any:
    """Let the load hooks name the file (or URL) ``checkpoint`` was read
    from. Returns the checkpoint with its weights (``'state_dict'`` and
    ``'ema_state_dict'``, or the whole) in ``OrderedDict``s, which can
    carry ``_metadata``."""
    if not isinstance(checkpoint, Mapping):
        return checkpoint
    nested = [
        key
        for key in _WEIGHT_ENTRIES
        if isinstance(checkpoint.get(key), Mapping)
    ]
    if not nested:
        return _named_weights(checkpoint, path)
    checkpoint = OrderedDict(checkpoint)
    for key in nested:
        checkpoint[key] = _named_weights(checkpoint[key], path)
    return checkpoint


def _named_weights(weights: Mapping, path: str) -> 'OrderedDict[str, Any]':
    named = OrderedDict(weights)
    named._metadata = _FileNamingMetadata(
        getattr(weights, '_metadata', None) or {}, path
    )
    return named


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


def check_tensors(
    owner: str,
    own: Mapping[str, torch.Tensor],
    state_dict: Mapping[str, Any],
    prefix: str,
    local_metadata: Optional[Mapping] = None,
) -> None:
    """Refuse entries for the weights of a module that are not tensors:
    torch skips them with a warning, leaving those weights as built.

    Args:
        owner (str): The module, for the message (``'T2TViT'``).
        own (Mapping): The module's state dict (``keep_vars=True``).
        state_dict (Mapping): The weights being loaded, keys with ``prefix``.
        prefix (str): Where the module sits in the model being loaded.
        local_metadata (Mapping, optional): The hook's ``local_metadata``.
    """
    wrong = [
        (prefix + key, type(state_dict[prefix + key]).__name__)
        for key in own
        if prefix + key in state_dict
        and not isinstance(state_dict[prefix + key], torch.Tensor)
    ]
    if wrong:
        raise mismatch(
            f'The {CHECKPOINT} holds {len(wrong)} weight(s) of {owner} that '
            f'are not tensors, e.g. {wrong[0][0]!r} (a {wrong[0][1]}); it '
            'was not saved from model.state_dict(): save one with '
            "torch.save({'state_dict': model.state_dict()}, path).",
            local_metadata,
        )


def check_supplied_weights(
    owner: str,
    own: Mapping[str, torch.Tensor],
    state_dict: Mapping[str, Any],
    prefix: str,
    optional: Iterable[str] = (),
    advice: str = 'use the config the checkpoint was trained or converted for',
    local_metadata: Optional[Mapping] = None,
    droppable: Iterable[str] = (),
    whole_model: bool = False,
) -> tuple[int, list[str]]:
    """Refuse a load that would leave a module partly random or broken
    (none of its weights, some missing, not tensors, of another shape or
    not finite) or that would leave entries of the checkpoint under the
    module's ``prefix`` unused (another depth, another head); return how
    many tensors it supplies and the optional keys left as built.

    Args:
        owner (str): The module, for the messages (``'T2TViT'``).
        own (Mapping): The module's state dict (``keep_vars=True``).
        state_dict (Mapping): The weights being loaded, keys with ``prefix``.
        prefix (str): Where the module sits in the model being loaded.
        optional (Iterable[str]): Own keys a checkpoint may leave out.
        advice (str): What to do when no weight of the module is there.
        local_metadata (Mapping, optional): The hook's ``local_metadata``.
        droppable (Iterable[str]): Keys a checkpoint may hold that the
            module knowingly leaves unused (a class token of a model built
            without one).
        whole_model (bool): Every entry of ``state_dict`` is meant for this
            module, loaded as the whole model. Otherwise only the entries
            under a non-empty ``prefix`` must be used. Defaults to False.
    """
    optional = set(optional)
    check_tensors(owner, own, state_dict, prefix, local_metadata)
    given = {
        k: state_dict[prefix + k] for k in own if prefix + k in state_dict
    }
    if not given:
        found = [str(key) for key in state_dict]
        raise mismatch(
            f'The {CHECKPOINT} holds none of the {len(own)} weights of '
            f'{owner} (expected e.g. {_examples([prefix + k for k in own])}'
            f'; it has {len(found)} entries here'
            f'{", e.g. " + _examples(found) if found else ""}): {advice}.',
            local_metadata,
        )
    missing = [prefix + k for k in own if k not in given and k not in optional]
    if missing:
        raise mismatch(
            f'The {CHECKPOINT} lacks {len(missing)} of the {len(own)} weights '
            f'of {owner} (e.g. {_examples(missing)}): {advice}.',
            local_metadata,
        )
    droppable = set(droppable)
    unused = [
        str(key)
        for key in state_dict
        if (prefix or whole_model)
        and str(key).startswith(prefix)
        and str(key)[len(prefix) :] not in own
        and str(key)[len(prefix) :] not in droppable
    ]
    if unused:
        under = f' under {prefix!r}' if prefix else ''
        raise mismatch(
            f'The {CHECKPOINT} holds {len(unused)} entries{under} that '
            f'{owner} does not have (e.g. {_examples(unused)}), which would '
            f'be left unused: {advice}.',
            local_metadata,
        )
    other_shapes = [
        f'{prefix + k} {tuple(v.shape)} vs {tuple(own[k].shape)}'
        for k, v in given.items()
        if v.shape != own[k].shape
    ]
    if other_shapes:
        raise mismatch(
            f'{len(other_shapes)} weight(s) of the {CHECKPOINT} have other '
            f'shapes than those of {owner}, e.g. '
            f'{"; ".join(other_shapes[:2])} (checkpoint vs model): {advice}.',
            local_metadata,
        )
    not_finite = [prefix + k for k in non_finite_tensors(given)]
    if not_finite:
        raise mismatch(
            f'The {CHECKPOINT} holds NaN or infinite values in '
            f'{len(not_finite)} weight(s) of {owner}, e.g. '
            f'{_examples(not_finite)}; it comes from a run that diverged: '
            'take an earlier checkpoint.',
            local_metadata,
        )
    left = sorted(key for key in optional & set(own) if key not in given)
    return len(given), left
