"""Checkpoints of mmpretrain 1.2.0's ``T2T_ViT`` -> this plugin's numbers.

The keys are ours already; the math is not: mmpretrain's attention hands
its ``qk_scale`` to a helper that divides by it, so its softmax reads
``q.k * sqrt(head_dim)`` where the official model reads ``q.k * scale``
(``scale = (input_dims // heads) ** -0.5``). Multiplying the q rows of each
``qkv`` by ``sqrt(head_dim) / scale`` gives the same outputs here. A leaf
like :mod:`.official`: dicts in, dicts out, only torch imported.
"""

import re
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Optional

import torch

# mmpretrain's default heads of the encoder layers (layer_cfgs)
DEFAULT_HEADS = 6
# where the arch record names the heads (config keys, as T2TViT records)
HEADS_KEY = 'model.backbone.arch.num_heads'
_BACKBONE_TYPE = re.compile(r"""['"](?:mmpretrain\.)?T2T_ViT['"]""")
_HEADS = re.compile(r"""\bnum_heads['"]?\s*[=:]\s*(\d+)""")


def is_mmpretrain_t2t(checkpoint: Mapping[str, Any]) -> bool:
    """Whether ``checkpoint`` was saved by an mmengine Runner training
    mmpretrain's ``T2T_ViT`` (its ``meta['cfg']`` says so). mmcls 0.x
    files (``meta['config']``) scaled correctly and are not meant."""
    meta = checkpoint.get('meta')
    text = meta.get('cfg') if isinstance(meta, Mapping) else None
    return isinstance(text, str) and bool(_BACKBONE_TYPE.search(text))


def recorded_heads(checkpoint: Mapping[str, Any]) -> int:
    """The encoder heads of an mmpretrain ``T2T_ViT`` run, read from its
    config text (ValueError when it names several values)."""
    heads = {int(value) for value in _HEADS.findall(checkpoint['meta']['cfg'])}
    if len(heads) > 1:
        raise ValueError(
            f'its config sets several num_heads ({sorted(heads)}), so the '
            'scale of its attention is unknown; convert it by hand'
        )
    return heads.pop() if heads else DEFAULT_HEADS


def mmpretrain_to_plugin(
    checkpoint: Mapping[str, Any],
) -> Optional[dict[str, Any]]:
    """A checkpoint of mmpretrain's ``T2T_ViT`` (:func:`is_mmpretrain_t2t`)
    with its q weights rescaled and ``meta['t2t_arch']`` recording the
    heads and token layer it was trained with; None for any other."""
    if not is_mmpretrain_t2t(checkpoint):
        return None
    heads = recorded_heads(checkpoint)
    weights = checkpoint.get('state_dict', checkpoint)
    converted = OrderedDict(weights)
    for key, value in weights.items():
        weight = weights.get(re.sub(r'bias$', 'weight', key))
        # other kinds of numbers are left for the fit check to refuse
        if (
            not re.search(r'attn\.qkv\.(weight|bias)$', key)
            or not isinstance(value, torch.Tensor)
            or not value.is_floating_point()
            or not isinstance(weight, torch.Tensor)
        ):
            continue
        layer_heads = 1 if '.tokens_to_token.' in f'.{key}' else heads
        dims = weight.shape[0] // 3
        factor = (
            (dims // layer_heads) * (weight.shape[1] // layer_heads)
        ) ** 0.5
        scaled = value.clone()
        scaled[:dims] *= factor
        converted[key] = scaled
    meta = dict(checkpoint['meta'])
    meta['t2t_arch'] = {
        **meta.get('t2t_arch', {}),
        HEADS_KEY: heads,
        'model.backbone.arch.token_layer': 'transformer',
    }
    return {**checkpoint, 'state_dict': converted, 'meta': meta}
