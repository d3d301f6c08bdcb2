"""What the models' load-state-dict hooks check, in one place.

Every way a checkpoint reaches a model (mmengine's ``load_checkpoint``, the
Runner's ``load_from`` and resume, ``Pretrained`` initialisation in
mmpretrain, mmdet and mmseg configs, mmpretrain's ``get_model`` and
Inferencers, a plain ``model.load_state_dict``) ends in the modules'
``_load_from_state_dict``, whose pre-hooks run before a tensor is copied.
The backbone and the head check their own weights there, so that wrong
shapes, NaN weights, missing weights or the checkpoint of another model
are one line through every door, instead of a logged warning and a model
that is partly random.
"""

import weakref
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any, Optional

import torch


class CheckpointError(ValueError):
    """A checkpoint that cannot be read; the message is one line."""


class CheckpointMismatchError(RuntimeError, ValueError):
    """A checkpoint whose weights do not fit the model; one line.

    A RuntimeError, as torch's strict loading raises, and a ValueError, as
    every other mistake in a user's input.
    """


# The loaders know the file, the load hooks only see the weights, and
# mmengine rebuilds the state dict on the way (``revise_keys``, a
# ``Pretrained`` prefix, one dict per child module). Two things survive the
# trip and carry the name: the state dict's ``_metadata``, from which torch
# and mmengine hand each module its ``local_metadata``, and the tensors
# themselves (the same objects). Neither puts the name into a file that
# saves them again.
_FILE_KEY = 'checkpoint_file'
_TENSOR_FILES: dict[int, tuple[weakref.ref, str]] = {}


class _FileNamingMetadata(OrderedDict):
    """A state dict's ``_metadata`` whose entries also name its file.

    Pickled (a checkpoint saved again), it is a plain ``OrderedDict``; a
    copy (``OrderedDict.copy`` calls the class with the entries only) names
    no file.
    """

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


def _remember_tensor(tensor: torch.Tensor, path: str) -> None:
    key = id(tensor)

    def forget(_: weakref.ref) -> None:
        _TENSOR_FILES.pop(key, None)

    _TENSOR_FILES[key] = (weakref.ref(tensor, forget), path)


def _remember_tensors(node: Any, path: str) -> None:
    if isinstance(node, torch.Tensor):
        _remember_tensor(node, path)
    elif isinstance(node, Mapping):
        for value in node.values():
            _remember_tensors(value, path)


def mark_checkpoint_file(checkpoint: Any, path: str) -> Any:
    """Let the load hooks name the file ``checkpoint`` was read from.

    Args:
        checkpoint: A checkpoint as read: a dict with the weights in
            ``'state_dict'``, or the weights themselves.
        path (str): The file or URL, as the user gave it.

    Returns:
        The checkpoint, its weights in an ``OrderedDict`` (a plain dict
        cannot carry ``_metadata``).
    """
    if not isinstance(checkpoint, Mapping):
        return checkpoint
    holder = (
        'state_dict'
        if isinstance(checkpoint.get('state_dict'), Mapping)
        else None
    )
    weights = checkpoint[holder] if holder else checkpoint
    named = OrderedDict(weights)
    named._metadata = _FileNamingMetadata(
        getattr(weights, '_metadata', None) or {}, path
    )
    # every tensor, also those of other entries (an EMA copy of the weights)
    _remember_tensors(checkpoint, path)
    if holder is None:
        return named
    checkpoint = OrderedDict(checkpoint)
    checkpoint[holder] = named
    return checkpoint


def checkpoint_name(
    state_dict: Mapping[str, Any], local_metadata: Optional[Mapping] = None
) -> str:
    """``'checkpoint FILE'`` for weights a loader read from FILE, else
    ``'checkpoint'``: the subject of the load hooks' messages.

    Args:
        state_dict (Mapping): The weights a load hook is given.
        local_metadata (Mapping, optional): Its ``local_metadata``.
    """
    path = (local_metadata or {}).get(_FILE_KEY)
    for value in () if path else state_dict.values():
        entry = _TENSOR_FILES.get(id(value))
        if entry is not None and entry[0]() is value:
            path = entry[1]
            break
    return f'checkpoint {path}' if path else 'checkpoint'


def _examples(names: list[str], count: int = 2) -> str:
    return ', '.join(repr(name) for name in names[:count])


def check_supplied_weights(
    owner: str,
    own: Mapping[str, torch.Tensor],
    state_dict: Mapping[str, Any],
    prefix: str,
    optional: Iterable[str] = (),
    advice: str = 'use the config the checkpoint was trained or converted for',
    local_metadata: Optional[Mapping] = None,
) -> tuple[int, list[str]]:
    """Refuse a load that would leave a module partly random or broken.

    Args:
        owner (str): The module, for the messages (``'T2TViT'``).
        own (Mapping): The module's state dict (``keep_vars=True``).
        state_dict (Mapping): The weights being loaded, keys with
            ``prefix``.
        prefix (str): Where the module sits in the model being loaded.
        optional (Iterable[str]): Own keys a checkpoint may leave out (the
            model keeps what it built), e.g. a fixed position table.
        advice (str): What to do when no weight of the module is there.
        local_metadata (Mapping, optional): The hook's ``local_metadata``,
            which names the file when the weights leave nothing to trace.

    Returns:
        tuple: The number of the module's tensors the load supplies and
        the optional keys it leaves as built.

    Raises:
        CheckpointMismatchError: If none of the module's weights is there,
            some are missing, of another shape, or not finite.
    """
    optional = set(optional)
    name = checkpoint_name(state_dict, local_metadata)
    supplied = [key for key in own if prefix + key in state_dict]
    if not supplied:
        found = [str(key) for key in state_dict]
        raise CheckpointMismatchError(
            f'The {name} holds none of the {len(own)} weights of '
            f'{owner} (expected e.g. {_examples([prefix + k for k in own])}'
            f'; it has {len(found)} entries here'
            f'{", e.g. " + _examples(found) if found else ""}): {advice}.'
        )
    missing = [
        prefix + key
        for key in own
        if prefix + key not in state_dict and key not in optional
    ]
    if missing:
        raise CheckpointMismatchError(
            f'The {name} lacks {len(missing)} of the {len(own)} weights '
            f'of {owner} (e.g. {_examples(missing)}): {advice}.'
        )
    other_shapes = [
        f'{prefix + key} {tuple(state_dict[prefix + key].shape)} vs '
        f'{tuple(own[key].shape)}'
        for key in supplied
        if isinstance(state_dict[prefix + key], torch.Tensor)
        and state_dict[prefix + key].shape != own[key].shape
    ]
    if other_shapes:
        raise CheckpointMismatchError(
            f'{len(other_shapes)} weight(s) of the {name} have other '
            f'shapes than those of {owner}, e.g. '
            f'{"; ".join(other_shapes[:2])} (checkpoint vs model): {advice}.'
        )
    not_finite = [
        prefix + key
        for key in supplied
        if isinstance(state_dict[prefix + key], torch.Tensor)
        and state_dict[prefix + key].is_floating_point()
        # meta tensors (shape-only loads) have no values to check
        and not state_dict[prefix + key].is_meta
        and not bool(torch.isfinite(state_dict[prefix + key]).all())
    ]
    if not_finite:
        raise CheckpointMismatchError(
            f'The {name} holds NaN or infinite values in '
            f'{len(not_finite)} weight(s) of {owner}, e.g. '
            f'{_examples(not_finite)}; it comes from a run that diverged: '
            'take an earlier checkpoint.'
        )
    left = sorted(key for key in optional & set(own) if key not in supplied)
    return len(supplied), left


def prefix_not_found_message(
    owner: str,
    checkpoint: str,
    prefix: str,
    state_dict: Mapping[str, Any],
    marker: str,
) -> str:
    """What to do when ``Pretrained`` finds no key with its ``prefix``.

    mmengine's ``Pretrained`` initialiser with a ``prefix`` keeps the
    entries of the file that start with it and asserts that some do
    (``backbone. is not in the pretrained model``), before the module's
    load hooks see the file. This says what the file holds instead and
    which prefix (or none) would find the module's weights in it.

    Args:
        owner (str): The module, for the message (``'T2TViT'``).
        checkpoint (str): The file (or URL) of ``init_cfg``.
        prefix (str): Its ``prefix``.
        state_dict (Mapping): The file's weights.
        marker (str): A key that every checkpoint of the module holds
            (``'tokens_to_token.project.weight'``), to find where the
            module sits in the file.

    Returns:
        str: One line.
    """
    tops = sorted({str(key).split('.')[0] for key in state_dict})
    held = (
        f'its {len(state_dict)} entries start with {_examples(tops, 5)}'
        f'{", ..." if len(tops) > 5 else ""}'
        if tops
        else 'it holds no weights'
    )
    found = sorted(
        str(key)[: -len(marker)]
        for key in state_dict
        if str(key).endswith(marker)
        and (str(key) == marker or str(key)[: -len(marker)].endswith('.'))
    )
    if found == ['']:
        advice = f'it is a bare {owner} checkpoint: drop prefix from init_cfg'
    elif found:
        advice = (
            f'its {owner} weights sit under {found[0]!r}: set prefix to that'
        )
    else:
        advice = (
            f'it holds no {owner} weights: give the checkpoint of a model '
            f'with this {owner} (a classifier, detector or segmentor, or the '
            'bare backbone)'
        )
    return (
        f"Checkpoint {checkpoint} holds no weights under init_cfg's prefix "
        f'{prefix!r} ({held}); {advice}.'
    )
