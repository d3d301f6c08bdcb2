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

from collections.abc import Iterable, Mapping
from typing import Any

import torch


class CheckpointError(ValueError):
    """A checkpoint that cannot be read; the message is one line."""


class CheckpointMismatchError(RuntimeError, ValueError):
    """A checkpoint whose weights do not fit the model; one line.

    A RuntimeError, as torch's strict loading raises, and a ValueError, as
    every other mistake in a user's input.
    """


def _examples(names: list[str], count: int = 2) -> str:
    return ', '.join(repr(name) for name in names[:count])


def check_supplied_weights(
    owner: str,
    own: Mapping[str, torch.Tensor],
    state_dict: Mapping[str, Any],
    prefix: str,
    optional: Iterable[str] = (),
    advice: str = 'use the config the checkpoint was trained or converted for',
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

    Returns:
        tuple: The number of the module's tensors the load supplies and
        the optional keys it leaves as built.

    Raises:
        CheckpointMismatchError: If none of the module's weights is there,
            some are missing, of another shape, or not finite.
    """
    optional = set(optional)
    supplied = [key for key in own if prefix + key in state_dict]
    if not supplied:
        found = [str(key) for key in state_dict]
        raise CheckpointMismatchError(
            f'The checkpoint holds none of the {len(own)} weights of '
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
            f'The checkpoint lacks {len(missing)} of the {len(own)} weights '
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
            f'{len(other_shapes)} weight(s) of the checkpoint have other '
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
            f'The checkpoint holds NaN or infinite values in '
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
