"""Official T2T-ViT weights (timm names) -> mmpretrain ``T2T_ViT`` keys.

Only renames, so the official logits are reproduced exactly; a leaf like
timm's ``checkpoint_filter_fn``: dicts in, dicts out, only torch imported.
"""

import re
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Optional

import torch

# official T2T layer names -> ours, per kind of token layer
PERFORMER_T2T_KEYS = {
    'norm1': 'ln1',
    'kqv': 'attn.kqv',
    'proj': 'attn.proj',
    'w': 'attn.random_matrix',
    'norm2': 'ln2',
    'mlp.0': 'ffn.layers.0.0',
    'mlp.2': 'ffn.layers.1',
}
# timm-style blocks: the transformer T2T layers and the encoder blocks
BLOCK_KEYS = {
    'norm1': 'ln1',
    'attn.qkv': 'attn.qkv',
    'attn.proj': 'attn.proj',
    'norm2': 'ln2',
    'mlp.fc1': 'ffn.layers.0.0',
    'mlp.fc2': 'ffn.layers.1',
}
_T2T_LAYER = re.compile(r'tokens_to_token\.attention([12])\.(.+)$')
_BLOCK = re.compile(r'blocks\.(\d+)\.(.+)$')
# the keys that tell official weights
_OFFICIAL_KEYS = ('tokens_to_token.project.weight', 'blocks.0.attn.qkv.weight')
_BACKBONE_TOP_LEVEL = (
    'cls_token',
    'pos_embed',
    'tokens_to_token.project.weight',
    'tokens_to_token.project.bias',
    'norm.weight',
    'norm.bias',
)
# the official total stride, which turns the position table into a size
_TOTAL_STRIDE = 16
# where official files keep their weights; the EMA weights first, the ones
# the official results were measured with
CONTAINER_KEYS = ('state_dict_ema', 'state_dict', 'model')


def strip_module_prefix(
    state_dict: Mapping[str, Any],
) -> 'OrderedDict[str, Any]':
    """The weights without the ``module.`` prefix that DDP adds."""
    return OrderedDict(
        (k.removeprefix('module.'), v) for k, v in state_dict.items()
    )


def unwrap_checkpoint(checkpoint: Mapping[str, Any]) -> Mapping[str, Any]:
    """The weights in the first of ``CONTAINER_KEYS``, else ``checkpoint``."""
    for key in CONTAINER_KEYS:
        if isinstance(checkpoint.get(key), Mapping):
            return checkpoint[key]
    return checkpoint


def extract_state_dict(checkpoint: Any) -> dict[str, torch.Tensor]:
    """The weights (official names, no ``module.``) of a loaded official
    file, a timm training checkpoint or a bare state dict (ValueError if
    it holds none)."""
    if not isinstance(checkpoint, Mapping):
        raise ValueError(
            f'Expected a checkpoint dict, found a {type(checkpoint).__name__}'
            '; this is not a T2T-ViT checkpoint.'
        )
    checkpoint = unwrap_checkpoint(checkpoint)
    for key, value in checkpoint.items():
        if not isinstance(value, torch.Tensor):
            raise ValueError(
                f'Entry {key!r} of the checkpoint is a '
                f'{type(value).__name__}, not a tensor; expected a state dict '
                "or a dict with 'state_dict_ema' / 'state_dict'."
            )
    return strip_module_prefix(checkpoint)


def convert_official_checkpoint(
    checkpoint: Any,
    num_heads: Optional[int] = None,
    file_name: Optional[str] = None,
    arch_zoo: Optional[Mapping[str, Mapping[str, Any]]] = None,
) -> dict[str, Any]:
    """An official checkpoint as a slim mmengine checkpoint of this plugin:
    ``state_dict`` (``ImageClassifier`` keys) and ``meta`` (``arch``,
    ``converted_from``). The arguments are those of
    :func:`detect_official_arch`.
    """
    converted, arch_info = convert_official_state_dict(
        extract_state_dict(checkpoint), num_heads, file_name, arch_zoo
    )
    meta: dict[str, Any] = dict(arch=arch_info, converted_from=file_name)
    return dict(state_dict=converted, meta=meta)


def is_official(checkpoint: Any) -> bool:
    """Whether ``checkpoint`` holds official T2T-ViT names (also under
    ``module.`` or in ``CONTAINER_KEYS``)."""
    if not isinstance(checkpoint, Mapping):
        return False
    weights = unwrap_checkpoint(checkpoint)
    names = strip_module_prefix({k: 0 for k in weights if isinstance(k, str)})
    return all(key in names for key in _OFFICIAL_KEYS)


def official_to_plugin(
    checkpoint: Mapping[str, Any],
) -> Optional[dict[str, Any]]:
    """An official checkpoint (:func:`is_official`) as ``{'state_dict':
    ImageClassifier keys}``, None for any other: the step the checkpoint
    reader applies, once (ValueError for official names with keys the
    official model lacks)."""
    if not is_official(checkpoint):
        return None
    weights = strip_module_prefix(unwrap_checkpoint(checkpoint))
    return dict(state_dict=_rename_all(weights, _token_layer(weights)))


def _check_layout(state_dict: Mapping[str, torch.Tensor]) -> None:
    keys = list(state_dict)
    if any(k.startswith(('backbone.', 'encoder.')) for k in keys):
        raise ValueError(
            'The checkpoint is already in the mmpretrain / t2t-plugin layout '
            "('backbone.*' or 'encoder.*' keys); load it directly, without "
            'conversion.'
        )
    missing = [
        k for k in ('cls_token', *_OFFICIAL_KEYS) if k not in state_dict
    ]
    if missing:
        raise ValueError(
            f'This is not an official T2T-ViT checkpoint: it lacks '
            f'{missing} (it has {len(keys)} entries, e.g. {keys[:3]}).'
        )


def detect_official_arch(
    state_dict: Mapping[str, torch.Tensor],
    num_heads: Optional[int] = None,
    file_name: Optional[str] = None,
    arch_zoo: Optional[Mapping[str, Mapping[str, Any]]] = None,
) -> dict[str, Any]:
    """The architecture of official weights (ValueError for others).

    The shapes give all but the heads: ``num_heads``, else the ``arch_zoo``
    entry of the same shapes (``'14'`` unless ``num_heads=32`` or a
    ``file_name`` with ``resnext`` says ``'14-resnext'``), else
    ``embed_dims // 64``.

    Returns ``arch`` (zoo name or None), ``token_layer``, ``embed_dims``,
    ``num_layers``, ``num_heads``, ``heads_given``, ``heads_from_name``,
    ``same_shapes`` (``(name, heads)`` of zoo archs of these shapes and
    other heads), ``feedforward_channels``, ``token_dims``, ``img_size``
    and ``num_classes`` (0 without a head).
    """
    _check_layout(state_dict)
    token_layer = _token_layer(state_dict)
    qkv = 'kqv' if token_layer == 'performer' else 'attn.qkv'
    t2t_qkv = state_dict[f'tokens_to_token.attention1.{qkv}.weight']
    embed_dims = state_dict['cls_token'].shape[-1]
    num_layers = 1 + max(
        int(match.group(1)) for match in map(_BLOCK.match, state_dict) if match
    )
    feedforward_channels = state_dict['blocks.0.mlp.fc1.weight'].shape[0]
    info: dict[str, Any] = dict(
        arch=None,
        token_layer=token_layer,
        embed_dims=embed_dims,
        num_layers=num_layers,
        num_heads=num_heads or max(embed_dims // 64, 1),
        heads_given=num_heads is not None,
        feedforward_channels=feedforward_channels,
        token_dims=t2t_qkv.shape[0] // 3,
        img_size=224,
        num_classes=0,
    )
    if 'pos_embed' in state_dict:
        grid = state_dict['pos_embed'].shape[1] - 1
        info['img_size'] = int(round(grid**0.5)) * _TOTAL_STRIDE
    if 'head.weight' in state_dict:
        info['num_classes'] = state_dict['head.weight'].shape[0]
    shape = ('token_layer', 'embed_dims', 'num_layers', 'feedforward_channels')
    candidates = [
        (name, settings['num_heads'])
        for name, settings in (arch_zoo or {}).items()
        if not name.startswith('t2t-vit-')
        and all(settings[k] == info[k] for k in shape)
        and num_heads in (None, settings['num_heads'])
    ]
    named = [c for c in candidates if _named_in(c[0], file_name)]
    info['heads_from_name'] = bool(named) and num_heads is None
    if candidates:
        info['arch'], info['num_heads'] = (named or candidates)[0]
    info['same_shapes'] = [c for c in candidates if c[1] != info['num_heads']]
    if embed_dims % info['num_heads']:
        raise ValueError(
            f'num_heads={info["num_heads"]} does not divide '
            f'embed_dims={embed_dims}.'
        )
    return info


def _token_layer(state_dict: Mapping[str, Any]) -> str:
    if 'tokens_to_token.attention1.kqv.weight' in state_dict:
        return 'performer'
    if 'tokens_to_token.attention1.attn.qkv.weight' in state_dict:
        return 'transformer'
    raise ValueError(
        'The T2T module of this checkpoint has neither performer '
        "('tokens_to_token.attention1.kqv') nor transformer "
        "('tokens_to_token.attention1.attn.qkv') layers; convolution "
        'T2T-ViTs were never released and cannot be converted.'
    )


def _named_in(arch: str, file_name: Optional[str]) -> bool:
    # the word that sets a variant apart, e.g. 'resnext' of '14-resnext'
    base, _, word = arch.rpartition('-')
    return (
        bool(file_name and base)
        and word.isalpha()
        and len(word) > 1
        and (word in file_name.lower())
    )


def _rename(key: str, t2t_table: Mapping[str, str]) -> Optional[str]:
    if key in _BACKBONE_TOP_LEVEL:
        return 'backbone.' + key
    if key in ('head.weight', 'head.bias'):
        return 'head.layers.' + key
    match = _T2T_LAYER.match(key)
    table, ours = t2t_table, 'tokens_to_token.attention'
    if match is None:
        match, table, ours = _BLOCK.match(key), BLOCK_KEYS, 'encoder.'
    if match is None:
        return None
    layer, name = match.groups()
    for old, new in table.items():
        if name == old or name.startswith(old + '.'):
            return f'backbone.{ours}{layer}.{new}{name[len(old) :]}'
    return None


def _rename_all(
    state_dict: Mapping[str, torch.Tensor], token_layer: str
) -> 'OrderedDict[str, torch.Tensor]':
    t2t_table = (
        PERFORMER_T2T_KEYS if token_layer == 'performer' else BLOCK_KEYS
    )
    new_keys = {key: _rename(key, t2t_table) for key in state_dict}
    unknown = [key for key, new_key in new_keys.items() if new_key is None]
    if unknown:
        raise ValueError(
            f'{len(unknown)} key(s) of the checkpoint are not part of an '
            f'official T2T-ViT, e.g. {unknown[:3]}; was it saved from a '
            'modified model?'
        )
    return OrderedDict((new_keys[k], v) for k, v in state_dict.items())


def convert_official_state_dict(
    state_dict: Mapping[str, torch.Tensor],
    num_heads: Optional[int] = None,
    file_name: Optional[str] = None,
    arch_zoo: Optional[Mapping[str, Mapping[str, Any]]] = None,
) -> tuple['OrderedDict[str, torch.Tensor]', dict[str, Any]]:
    """Official weights renamed to an ``ImageClassifier`` state dict, and
    :func:`detect_official_arch` of them (same arguments). The performer's
    fixed random matrix ``w`` is kept: the trained weights need it."""
    arch_info = detect_official_arch(
        state_dict, num_heads, file_name, arch_zoo
    )
    return _rename_all(state_dict, arch_info['token_layer']), arch_info


def describe_arch(arch_info: Mapping[str, Any]) -> str:
    """One line naming the arch that :func:`detect_official_arch` found."""
    name = (
        f'T2T-ViT-{arch_info["arch"]}'
        if arch_info['arch']
        else 'a custom T2T-ViT'
    )
    heads = f'{arch_info["num_heads"]} heads'
    if not arch_info['arch'] and not arch_info['heads_given']:
        heads += ' (a guess: head width 64)'
    line = (
        f'{name} ({arch_info["token_layer"]} T2T layers, embed_dims '
        f'{arch_info["embed_dims"]}, {arch_info["num_layers"]} layers, '
        f'{heads}, {arch_info["img_size"]}px, '
        f'{arch_info["num_classes"]} classes)'
    )
    if arch_info.get('heads_from_name'):
        line += f' (heads of {arch_info["arch"]}, as the file name says)'
    # the weights cannot tell these apart; only the heads differ
    for other, other_heads in arch_info.get('same_shapes', []):
        line += (
            f' (same weight shapes as {other}; pass --num-heads '
            f'{other_heads} if this is that model)'
        )
    return line


def matching_config(arch_info: Mapping[str, Any]) -> Optional[str]:
    """The repository's config (a path from its root) that the converted
    weights fit, or None for archs and sizes without an ImageNet config."""
    arch = arch_info['arch']
    if (
        arch is None
        or arch_info['num_classes'] != 1000
        or arch in ('14-resnext', '14-wide')
    ):
        return None
    if arch_info['img_size'] == 224:
        return f'configs/t2t-vit-{arch}_8xb64_in1k.py'
    if arch == '14' and arch_info['img_size'] == 384:
        return 'configs/t2t-vit-14_8xb64_in1k-384px.py'
    return None
