"""Whether checkpoint weights fit a model's modules: their load pre-hooks
call :func:`check_fit` (the backbone through :func:`fit_backbone`), so
that a wrong checkpoint is one line, not a warning and a partly random
model. The doors that need the whole model as it was trained use
:mod:`t2t_plugin.runtime.checkpoint_fit`, whose sources and errors these
share.
"""

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any, Callable, Optional

import torch
from mmengine.logging import MMLogger
from torch import nn

from t2t_preflight.errors import CheckpointError

from ..runtime.checkpoint_fit import (  # noqa: F401 (the modules' names)
    checkpoint_name,
    latest_source,
    non_finite_tensors,
    source_of,
)


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
        CheckpointError: One line naming the file the reader read
            the weights from.
    """
    source = source_of(state_dict, prefix)
    the = f'checkpoint {source.path}' if source else 'checkpoint'
    for key, value in (arch or {}).items():
        recorded = source.arch.get(key) if source else None
        if recorded is not None and _plain(recorded) != _plain(value):
            raise CheckpointError(
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
        raise CheckpointError(
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
        raise CheckpointError(
            f'The {the} holds {len(other_kind)} weight(s) of {owner} of '
            f'another kind than the model, e.g. {other_kind[0]}; only '
            'floating-point weights load: save the weights of the trained '
            'model as they are, not cast to integers or quantized.'
        )
    if not entries:
        found = [str(key) for key in state_dict]
        raise CheckpointError(
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
        raise CheckpointError(
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
        raise CheckpointError(
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
        raise CheckpointError(
            f'{len(other_shapes)} weight(s) of the {the} have other shapes '
            f'than those of {owner}, e.g. {"; ".join(other_shapes[:2])} '
            f'(checkpoint vs model): {advice}.'
        )
    not_finite = [prefix + k for k in non_finite_tensors(entries)]
    if not_finite:
        raise CheckpointError(
            f'The {the} holds NaN or infinite values in {len(not_finite)} '
            f'weight(s) of {owner}, e.g. {_examples(not_finite)}; it comes '
            'from a run that diverged: take an earlier checkpoint.'
        )
    left = sorted(key for key in optional & set(own) if key not in entries)
    return len(entries), left


def _adopt_layout(state_dict: dict) -> int:
    # in place: a classifier's ``backbone.`` undone (the reader has
    # converted foreign layouts); returns how many other entries it dropped
    weights = dict(state_dict)
    ours = {
        k.removeprefix('backbone.'): v
        for k, v in weights.items()
        if k.startswith('backbone.')
    } or weights
    state_dict.clear()
    state_dict.update(ours)
    return len(weights) - len(ours)


def _check_shapes_arch(backbone: nn.Module, state_dict: dict, prefix: str):
    # another width, depth or kind of T2T layer: one line naming the arch
    # (the file named only when refusing: a weightless dict's name is read
    # once)
    def the() -> str:
        return f'The {checkpoint_name(state_dict, prefix)} has'

    arch = f'(arch {backbone.arch_settings}). Use the arch the checkpoint '
    table = state_dict.get(
        prefix + 'cls_token', state_dict.get(prefix + 'pos_embed')
    )
    tensor = isinstance(table, torch.Tensor) and table.dim() > 0
    width = table.shape[-1] if tensor else backbone.embed_dims
    if width != backbone.embed_dims:
        raise CheckpointError(
            f'{the()} embed_dims={width}, this T2T-ViT has '
            f'{backbone.embed_dims} {arch}was trained with.'
        )
    pattern = re.escape(prefix) + r'encoder\.(\d+)\.'
    layers = [re.match(pattern, str(k)) for k in state_dict]
    depth = max((int(m.group(1)) + 1 for m in layers if m), default=None)
    if depth not in (None, backbone.num_layers):
        raise CheckpointError(
            f'{the()} {depth} encoder layers, this T2T-ViT has '
            f'{backbone.num_layers} {arch}was trained with.'
        )
    token_layer = backbone.tokens_to_token.token_layer
    for kind, part in (('performer', 'kqv'), ('transformer', 'qkv')):
        if kind != token_layer and any(
            k.startswith(prefix + 'tokens_to_token.') and f'.attn.{part}.' in k
            for k in state_dict
        ):
            raise CheckpointError(
                f'{the()} {kind} T2T layers, this T2T-ViT has '
                f'{token_layer} ones. Pick the matching arch: performer archs '
                "are '7'...'24', transformer ones 't-14', 't-19', 't-24'."
            )


def fit_backbone(
    backbone: nn.Module,
    state_dict: dict,
    prefix: str,
    resize_pos_embed: Callable[[dict, str], None],
) -> tuple[int, list[str], int]:
    """The load pre-hook's work for a ``T2TViT`` ``backbone``: a
    classifier's weights taken as they are when it is loaded as the whole
    model, another width, depth or T2T layer refused by name, the position
    table resized (``resize_pos_embed``, the backbone's), then
    :func:`check_fit`. Returns the tensors loaded, the optional keys left
    as built and the entries of other modules dropped."""
    dropped = _adopt_layout(state_dict) if not prefix else 0
    _check_shapes_arch(backbone, state_dict, prefix)
    # the fixed sinusoidal table: the model's own serves as well; and a
    # model without a class token (its table has no cls position) leaves
    # this one's class token new
    optional = ['pos_embed']
    pos = state_dict.get(prefix + 'pos_embed')
    if (
        prefix + 'cls_token' not in state_dict
        and isinstance(pos, torch.Tensor)
        and pos.dim() == 3
        and math.isqrt(pos.shape[1]) ** 2 == pos.shape[1]
    ):
        optional.append('cls_token')
    resize_pos_embed(state_dict, prefix)
    # what a model built without them knowingly leaves unused
    droppable = [] if backbone.with_cls_token else ['cls_token']
    if not backbone.final_norm:
        droppable += ['norm.weight', 'norm.bias']
    loaded, left = check_fit(
        type(backbone).__name__,
        backbone.state_dict(keep_vars=True),
        state_dict,
        prefix,
        optional=optional,
        advice=(
            'use the config the checkpoint was trained or converted '
            'for; to start only the backbone from a classifier or '
            'detector checkpoint, set backbone.init_cfg=dict(type='
            "'Pretrained', checkpoint=FILE, prefix='backbone.')"
        ),
        droppable=droppable,
        whole_model=not prefix,
        arch=backbone.arch_record(),
    )
    return loaded, left, dropped


def report_load(module: nn.Module, incompatible_keys: Any = None) -> None:
    """A load post-hook: one log line, what the load of ``module`` (its
    ``load_report`` from :func:`fit_backbone`) took from the checkpoint
    and what it left as built."""
    if module.load_report is None:
        return
    (loaded, left, dropped), module.load_report = module.load_report, None
    line = f'{type(module).__name__}: {loaded} tensors loaded from the '
    line += 'checkpoint, '
    line += f'{len(left)} left new'
    if left:
        line += f' ({", ".join(left)}: built by the model)'
    if dropped:
        line += f'; {dropped} entries for other modules ignored'
    MMLogger.get_current_instance().info(line + '.')


def missing_prefix_error(
    owner: str, init_cfg: Any, marker: str
) -> Optional[CheckpointError]:
    """The refusal of a ``Pretrained`` init whose ``prefix`` no key of the
    file it just read starts with (mmengine asserts that, bare), saying
    what the file holds and which prefix would do (``marker``: a key of
    ``owner`` that tells where its weights sit); None for other cases."""
    configs = init_cfg if isinstance(init_cfg, list) else [init_cfg]
    for cfg in configs:
        prefix = cfg.get('prefix') if isinstance(cfg, Mapping) else None
        full = f'{prefix.rstrip(".")}.' if prefix else ''
        source = prefix and latest_source(str(cfg.get('checkpoint')))
        if not source or any(k.startswith(full) for k in source.keys):
            continue
        keys = source.keys
        tops = sorted({key.split('.')[0] for key in keys})
        held = (
            f'its {len(keys)} entries start with '
            f'{", ".join(repr(top) for top in tops[:5])}'
            f'{", ..." if len(tops) > 5 else ""}'
            if tops
            else 'it holds no weights'
        )
        found = sorted(
            k[: -len(marker)] for k in keys if f'.{k}'.endswith(f'.{marker}')
        )
        if found == ['']:
            advice = (
                f'it is a bare {owner} checkpoint: drop prefix from init_cfg'
            )
        elif found:
            advice = (
                f'its {owner} weights sit under {found[0]!r}: set prefix to '
                'that'
            )
        else:
            advice = (
                f'it holds no {owner} weights: give the checkpoint of a model '
                f'with this {owner} (a classifier, detector or segmentor, or '
                'the bare backbone)'
            )
        return CheckpointError(
            f"Checkpoint {source.path} holds no weights under init_cfg's "
            f'prefix {full!r} ({held}); {advice}.'
        )
    return None
