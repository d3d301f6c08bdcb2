"""Runs of mmpretrain 1.2.0's ``T2T_ViT`` -> the arch that gives their
numbers here.

The keys are ours already, one piece of math is not: mmpretrain's
attention hands its ``qk_scale`` to a helper that divides by the head
width's ``** -0.5``, so its softmax reads ``q.k * sqrt(head_dims)`` in
every layer (T2T and encoder), where the official model reads ``q.k *
(input_dims // heads) ** -0.5``. ``T2TViT(attn_scale='mmpretrain')``
computes the same, with the weights as they are (rescaling them instead
rounds the q rows, which a trained model amplifies to other logits). The
rest of that model is ours (LayerNorm eps 1e-5, GELU, the sinusoid table,
the class token, final norm and head keys); what a run may set otherwise
and we cannot compute is refused. A leaf like :mod:`.official`: dicts in,
dicts out; the saved config is read as data, no code of it runs.
"""

import ast
from collections.abc import Mapping
from typing import Any, Optional

# the encoder heads of mmpretrain's T2T_ViT unless its layer_cfgs say
DEFAULT_HEADS = 6
# the arch record's keys (as T2TViT.arch_record names them)
HEADS_KEY = 'model.backbone.arch.num_heads'
SCALE_KEY = 'model.backbone.attn_scale'
_TYPES = ('T2T_ViT', 'mmpretrain.T2T_ViT')


def _data(node: ast.AST) -> Any:
    # a config's pretty text as data: dict(...) calls, lists, constants
    if isinstance(node, ast.Call):
        if not (
            isinstance(node.func, ast.Name)
            and node.func.id == 'dict'
            and not node.args
            and all(keyword.arg for keyword in node.keywords)
        ):
            raise ValueError('not data')
        return {kw.arg: _data(kw.value) for kw in node.keywords}
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_data(element) for element in node.elts]
    if isinstance(node, ast.Dict):
        return {_data(k): _data(v) for k, v in zip(node.keys, node.values)}
    return ast.literal_eval(node)


def saved_backbone(checkpoint: Mapping[str, Any]) -> Optional[dict]:
    """The ``model.backbone`` of the config an mmengine Runner saved in
    ``meta['cfg']``, when it is mmpretrain's ``T2T_ViT``; None otherwise
    (mmcls 0.x files, ``meta['config']``, scaled correctly).

    Raises:
        ValueError: For such a config that cannot be read as data.
    """
    meta = checkpoint.get('meta')
    text = meta.get('cfg') if isinstance(meta, Mapping) else None
    if not isinstance(text, str) or 'T2T_ViT' not in text:
        return None
    try:
        models = [
            _data(node.value)
            for node in ast.parse(text).body
            if isinstance(node, ast.Assign)
            and [getattr(t, 'id', None) for t in node.targets] == ['model']
        ]
    except (SyntaxError, ValueError):
        raise ValueError(
            'its saved config (meta["cfg"]) cannot be read as data, so its '
            'settings are unknown'
        ) from None
    backbone = models[-1].get('backbone') if models else None
    if isinstance(backbone, dict) and backbone.get('type') in _TYPES:
        return backbone
    return None


def mmpretrain_to_plugin(
    checkpoint: Mapping[str, Any],
) -> Optional[dict[str, Any]]:
    """A run of mmpretrain's ``T2T_ViT`` (:func:`saved_backbone`) with
    ``meta['t2t_arch']`` recording the arch that gives its numbers here
    (``attn_scale='mmpretrain'``, its heads, transformer T2T layers), so
    that a model of another arch refuses it in one line; None for any
    other checkpoint.

    Raises:
        ValueError: For settings of that run this plugin cannot compute:
            several numbers of heads, another activation or norm.
    """
    backbone = saved_backbone(checkpoint)
    if backbone is None:
        return None
    layer_cfgs = backbone.get('layer_cfgs') or {}
    if isinstance(layer_cfgs, Mapping):
        layer_cfgs = [layer_cfgs]
    heads = {cfg.get('num_heads', DEFAULT_HEADS) for cfg in layer_cfgs}
    if len(heads) > 1:
        raise ValueError(
            f'its layer_cfgs set several num_heads ({sorted(heads)}), where '
            'T2TViT has one for all layers'
        )
    norms = [backbone.get('norm_cfg', {'type': 'LN'})]
    norms += [cfg['norm_cfg'] for cfg in layer_cfgs if 'norm_cfg' in cfg]
    other = [
        f'norm_cfg={norm}'
        for norm in norms
        if norm.get('type') not in ('LN', 'LayerNorm')
        or norm.get('eps', 1e-5) != 1e-5
    ] + [
        f'act_cfg={cfg["act_cfg"]}'
        for cfg in layer_cfgs
        if cfg.get('act_cfg', {'type': 'GELU'}).get('type') != 'GELU'
    ]
    if other:
        raise ValueError(
            f'its backbone sets {other[0]}, where T2TViT has LayerNorm '
            '(eps 1e-5) and GELU only'
        )
    arch = {
        HEADS_KEY: heads.pop(),
        'model.backbone.arch.token_layer': 'transformer',
        SCALE_KEY: 'mmpretrain',
    }
    meta = {**checkpoint['meta'], 't2t_arch': arch}
    return {**checkpoint, 'meta': meta}
