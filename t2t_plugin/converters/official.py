"""Official T2T-ViT release weights -> this plugin's checkpoint layout.

The official code (github.com/yitu-opensource/T2T-ViT) names its modules
after timm's ``VisionTransformer``; this plugin uses the layout of
mmpretrain's ``T2T_ViT`` inside an ``ImageClassifier``. The conversion is a
pure renaming: no tensor is changed, so the converted model reproduces the
official logits exactly.

This module is a leaf, in the manner of timm's ``checkpoint_filter_fn``:
dicts in, dicts out, nothing but torch imported. The models' load hooks,
the checkpoint readers and the converter tool all call it; the arch table
it matches weights against is handed in (``arch_zoo``), not imported.
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
_TOP_LEVEL = {
    'cls_token': 'backbone.cls_token',
    'pos_embed': 'backbone.pos_embed',
    'tokens_to_token.project.weight': 'backbone.tokens_to_token.project.'
    'weight',
    'tokens_to_token.project.bias': 'backbone.tokens_to_token.project.bias',
    'norm.weight': 'backbone.norm.weight',
    'norm.bias': 'backbone.norm.bias',
    'head.weight': 'head.layers.head.weight',
    'head.bias': 'head.layers.head.bias',
}
# the official total stride, which turns the position table into a size
_TOTAL_STRIDE = 16
# where official files keep their weights; the EMA weights first, the ones
# the official results were measured with
CONTAINER_KEYS = ('state_dict_ema', 'state_dict', 'model')


def strip_module_prefix(
    state_dict: Mapping[str, Any],
) -> 'OrderedDict[str, Any]':
    """Remove the ``module.`` prefix that (Distributed)DataParallel adds.

    Args:
        state_dict (Mapping): Weights by name.

    Returns:
        OrderedDict: The same weights; keys without the prefix.
    """
    return OrderedDict(
        (key[len('module.') :] if key.startswith('module.') else key, value)
        for key, value in state_dict.items()
    )


def _unwrap(checkpoint: Mapping[str, Any]) -> Mapping[str, Any]:
    for key in CONTAINER_KEYS:
        if isinstance(checkpoint.get(key), Mapping):
            return checkpoint[key]
    return checkpoint


def is_official_state_dict(state_dict: Mapping[str, Any]) -> bool:
    """Whether weights (``module.`` prefixes removed) use official names."""
    return (
        'tokens_to_token.project.weight' in state_dict
        and 'blocks.0.attn.qkv.weight' in state_dict
    )


def extract_state_dict(checkpoint: Any) -> dict[str, torch.Tensor]:
    """The model weights inside a loaded official checkpoint file.

    The releases are ``.pth.tar`` files holding ``{'state_dict_ema': ...}``;
    timm training checkpoints hold ``state_dict`` (and ``state_dict_ema``),
    and a bare state dict also works. The ``module.`` prefix that
    ``DataParallel`` training leaves is removed.

    Args:
        checkpoint (Any): What ``torch.load`` returned for the file.

    Returns:
        Dict[str, torch.Tensor]: The weights, with official key names.

    Raises:
        ValueError: If ``checkpoint`` holds no state dict.
    """
    if not isinstance(checkpoint, Mapping):
        raise ValueError(
            f'Expected a checkpoint dict, found a {type(checkpoint).__name__}'
            '; this is not a T2T-ViT checkpoint.'
        )
    checkpoint = _unwrap(checkpoint)
    for key, value in checkpoint.items():
        if not isinstance(value, torch.Tensor):
            raise ValueError(
                f'Entry {key!r} of the checkpoint is a '
                f'{type(value).__name__}, not a tensor; expected a state dict '
                "or a dict with 'state_dict_ema' / 'state_dict'."
            )
    return strip_module_prefix(checkpoint)


def is_official_checkpoint(checkpoint: Any) -> bool:
    """Whether a loaded checkpoint holds official T2T-ViT weights.

    Told by the keys alone (``tokens_to_token.*`` and ``blocks.*`` at the
    top level, possibly under ``module.`` and inside ``state_dict_ema`` /
    ``state_dict`` / ``model``), before anything is converted.

    Args:
        checkpoint (Any): What ``torch.load`` returned.
    """
    if not isinstance(checkpoint, Mapping):
        return False
    return is_official_state_dict(
        strip_module_prefix(
            {k: None for k in _unwrap(checkpoint) if isinstance(k, str)}
        )
    )


def convert_official_checkpoint(
    checkpoint: Any,
    num_heads: Optional[int] = None,
    file_name: Optional[str] = None,
    arch_zoo: Optional[Mapping[str, Mapping[str, Any]]] = None,
) -> dict[str, Any]:
    """An official checkpoint as a slim mmengine checkpoint of this plugin.

    Args:
        checkpoint (Any): What ``torch.load`` returned for an official
            release (see :func:`extract_state_dict`).
        num_heads (int, optional): See :func:`detect_official_arch`.
        file_name (str, optional): See :func:`detect_official_arch`.
        arch_zoo (Mapping, optional): See :func:`detect_official_arch`.

    Returns:
        dict: ``state_dict`` (``ImageClassifier`` keys) and ``meta``
        (``arch`` and ``converted_from``).

    Raises:
        ValueError: If the weights are not those of an official T2T-ViT.
    """
    converted, arch_info = convert_official_state_dict(
        extract_state_dict(checkpoint), num_heads, file_name, arch_zoo
    )
    meta: dict[str, Any] = dict(arch=arch_info, converted_from=file_name)
    return dict(state_dict=converted, meta=meta)


def official_to_plugin(
    checkpoint: Mapping[str, Any],
) -> Optional[dict[str, Any]]:
    """An official checkpoint in this plugin's layout; None for others.

    The dict -> dict step every loader applies: ``{'state_dict': weights}``
    with ``ImageClassifier`` keys (``backbone.*``, ``head.layers.head.*``)
    for an official release (in ``state_dict_ema`` / ``state_dict`` /
    ``model``, or bare; ``module.`` prefixes removed); None for anything
    else, which loaders then pass on unchanged.

    Args:
        checkpoint (Mapping): What a checkpoint file holds.

    Raises:
        ValueError: If the weights have official names but hold keys the
            official model does not have.
    """
    if not is_official_checkpoint(checkpoint):
        return None
    weights = strip_module_prefix(_unwrap(checkpoint))
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
        k
        for k in (
            'cls_token',
            'tokens_to_token.project.weight',
            'blocks.0.attn.qkv.weight',
        )
        if k not in state_dict
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
    """Read the architecture of an official T2T-ViT from its weights.

    The token layer, widths, depth, resolution and classes follow from the
    tensor shapes. The number of heads does not (it only splits the same
    ``qkv`` matrix); it is taken from the ``arch_zoo`` entry with the same
    shapes, or ``embed_dims // 64`` as in every official arch, unless
    given. ``'14'`` and ``'14-resnext'`` differ only in heads: the first is
    taken unless ``num_heads=32`` is given or ``file_name`` names the other
    (contains ``resnext``); ``same_shapes`` lists the zoo archs passed over.

    Args:
        state_dict (Mapping[str, torch.Tensor]): Official weights, as
            returned by :func:`extract_state_dict`.
        num_heads (int, optional): The encoder's heads, for archs that are
            not in the zoo. Defaults to None (guessed).
        file_name (str, optional): The name of the source file, whose words
            (``resnext``) choose between zoo archs of the same shapes.
            Defaults to None.
        arch_zoo (Mapping, optional): Arch name -> settings
            (``token_layer``, ``embed_dims``, ``num_layers``, ``num_heads``,
            ``feedforward_channels``), e.g. ``T2TViT.arch_zoo``. Defaults
            to None: no zoo, every arch is a custom one.

    Returns:
        dict: ``arch`` (the ``arch_zoo`` name, or None for a custom one),
        ``token_layer``, ``embed_dims``, ``num_layers``, ``num_heads`` (and
        ``heads_given``, whether they were given, ``heads_from_name``,
        whether the file name chose them), ``same_shapes`` (other zoo archs
        with these shapes but other heads: a list of ``(name, heads)``),
        ``feedforward_channels``, ``token_dims``, ``img_size`` and
        ``num_classes`` (0 without a classifier).

    Raises:
        ValueError: If the weights are not those of an official T2T-ViT.
    """
    _check_layout(state_dict)
    token_layer = _token_layer(state_dict)
    t2t_qkv = state_dict[
        'tokens_to_token.attention1.'
        + ('kqv' if token_layer == 'performer' else 'attn.qkv')
        + '.weight'
    ]
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
        side = int(round(grid**0.5))
        info['img_size'] = side * _TOTAL_STRIDE
    if 'head.weight' in state_dict:
        info['num_classes'] = state_dict['head.weight'].shape[0]
    shape = {
        k: info[k]
        for k in (
            'token_layer',
            'embed_dims',
            'num_layers',
            'feedforward_channels',
        )
    }
    candidates = [
        (name, settings['num_heads'])
        for name, settings in (arch_zoo or {}).items()
        if not name.startswith('t2t-vit-')
        and all(settings[k] == v for k, v in shape.items())
    ]
    if num_heads is not None:
        candidates = [c for c in candidates if c[1] == num_heads]
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


def _rename_in_layer(name: str, table: Mapping[str, str]) -> Optional[str]:
    for old, new in table.items():
        if name == old or name.startswith(old + '.'):
            return new + name[len(old) :]
    return None


def _rename(key: str, t2t_table: Mapping[str, str]) -> Optional[str]:
    if key in _TOP_LEVEL:
        return _TOP_LEVEL[key]
    match = _T2T_LAYER.match(key)
    if match:
        new = _rename_in_layer(match.group(2), t2t_table)
        layer = match.group(1)
        return new and f'backbone.tokens_to_token.attention{layer}.{new}'
    match = _BLOCK.match(key)
    if match:
        new = _rename_in_layer(match.group(2), BLOCK_KEYS)
        return new and f'backbone.encoder.{match.group(1)}.{new}'
    return None


def _rename_all(
    state_dict: Mapping[str, torch.Tensor], token_layer: str
) -> 'OrderedDict[str, torch.Tensor]':
    t2t_table = (
        PERFORMER_T2T_KEYS if token_layer == 'performer' else BLOCK_KEYS
    )
    converted = OrderedDict()
    unknown = []
    for key, value in state_dict.items():
        new_key = _rename(key, t2t_table)
        if new_key is None:
            unknown.append(key)
        else:
            converted[new_key] = value
    if unknown:
        raise ValueError(
            f'{len(unknown)} key(s) of the checkpoint are not part of an '
            f'official T2T-ViT, e.g. {unknown[:3]}; was it saved from a '
            'modified model?'
        )
    return converted


def convert_official_state_dict(
    state_dict: Mapping[str, torch.Tensor],
    num_heads: Optional[int] = None,
    file_name: Optional[str] = None,
    arch_zoo: Optional[Mapping[str, Mapping[str, Any]]] = None,
) -> tuple['OrderedDict[str, torch.Tensor]', dict[str, Any]]:
    """Rename official T2T-ViT weights to an ``ImageClassifier`` state dict.

    The backbone keys get the ``backbone.`` prefix and the classifier becomes
    ``head.layers.head`` (:class:`T2TClsHead`). The performer's fixed random
    matrix ``w`` is kept: the trained weights are only valid with it.

    Args:
        state_dict (Mapping[str, torch.Tensor]): Official weights (see
            :func:`extract_state_dict` for whole checkpoint files).
        num_heads (int, optional): The encoder's heads, which the weights do
            not tell; needed for archs outside the zoo. Defaults to None.
        file_name (str, optional): The source file's name; see
            :func:`detect_official_arch`. Defaults to None.
        arch_zoo (Mapping, optional): See :func:`detect_official_arch`.

    Returns:
        tuple: The converted state dict and the detected arch (see
        :func:`detect_official_arch`).

    Raises:
        ValueError: If the weights are not those of an official T2T-ViT or
            hold keys the official model does not have.
    """
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
    """The config of this repository that the converted weights fit.

    Returns:
        str, optional: A path relative to the repository root, or None for
        archs and resolutions without an ImageNet config.
    """
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
