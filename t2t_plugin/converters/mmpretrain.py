"""Runs of mmpretrain 1.2.0's ``T2T_ViT`` -> this plugin's numbers.

The keys are ours already, the math is not: mmpretrain's attention hands
its ``qk_scale`` to a helper that divides by it, so its softmax reads
``q.k * sqrt(head_dim)`` where the official model reads ``q.k * scale``,
``scale = (input_dims // heads) ** -0.5``. The q rows of each ``qkv``
times ``sqrt(head_dim) / scale`` give the same outputs here. A leaf like
:mod:`.official`: dicts in, dicts out, only torch imported.
"""

import re
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Optional

import torch

# the encoder heads of mmpretrain's T2T_ViT unless its layer_cfgs say
DEFAULT_HEADS = 6
# the arch record's key of the heads (as T2TViT.arch_record names it)
HEADS_KEY = 'model.backbone.arch.num_heads'
_BACKBONE_TYPE = re.compile(r"""['"](?:mmpretrain\.)?T2T_ViT['"]""")
_HEADS = re.compile(r"""\bnum_heads['"]?\s*[=:]\s*(\d+)""")
_QKV = re.compile(r'attn\.qkv\.(weight|bias)$')


def is_mmpretrain_t2t(checkpoint: Mapping[str, Any]) -> bool:
    """Whether an mmengine Runner saved ``checkpoint`` while training
    mmpretrain's ``T2T_ViT`` (its ``meta['cfg']`` names the type); mmcls
    0.x files (``meta['config']``) scaled correctly."""
    meta = checkpoint.get('meta')
    text = meta.get('cfg') if isinstance(meta, Mapping) else None
    return isinstance(text, str) and bool(_BACKBONE_TYPE.search(text))


def mmpretrain_to_plugin(
    checkpoint: Mapping[str, Any],
) -> Optional[dict[str, Any]]:
    """A run of mmpretrain's ``T2T_ViT`` (:func:`is_mmpretrain_t2t`) with
    its q rows rescaled and ``meta['t2t_arch']`` recording the heads and
    token layer of that run; None for any other checkpoint (ValueError for
    a config that sets several numbers of heads)."""
    if not is_mmpretrain_t2t(checkpoint):
        return None
    heads = {int(n) for n in _HEADS.findall(checkpoint['meta']['cfg'])}
    if len(heads) > 1:
        raise ValueError(
            f'its config sets several num_heads ({sorted(heads)}), so the '
            'scale of its attention is unknown'
        )
    heads = heads.pop() if heads else DEFAULT_HEADS
    weights = checkpoint.get('state_dict', checkpoint)
    converted = OrderedDict(weights)
    for key, value in weights.items():
        weight = weights.get(re.sub(r'bias$', 'weight', key))
        # other kinds of numbers are left for the fit check to refuse
        if not (
            _QKV.search(key)
            and isinstance(value, torch.Tensor)
            and isinstance(weight, torch.Tensor)
            and value.is_floating_point()
        ):
            continue
        layer_heads = 1 if '.tokens_to_token.' in f'.{key}' else heads
        dims = weight.shape[0] // 3
        inputs = weight.shape[1] // layer_heads
        converted[key] = value.clone()
        converted[key][:dims] *= (dims // layer_heads * inputs) ** 0.5
    arch = {HEADS_KEY: heads, 'model.backbone.arch.token_layer': 'transformer'}
    meta = {**checkpoint['meta'], 't2t_arch': arch}
    return {**checkpoint, 'state_dict': converted, 'meta': meta}
