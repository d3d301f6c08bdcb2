"""Other T2T-ViT implementations, built with the weights of ours.

A speed comparison means something only at identical weights and shapes, so
each reference is built for the architecture of a :class:`T2TViT` and loads
its state dict:

- mmpretrain 1.2.0's ``T2T_ViT`` shares our key layout and loads it as is.
  It has transformer T2T layers only (no performer), and its attention
  routes through a Python fallback that materialises every attention matrix
  (and uses another scale: its outputs differ from ours, its cost does not).
- the official code (github.com/yitu-opensource/T2T-ViT) cannot be shipped
  or downloaded here: it is imported from a local checkout and gets our
  weights renamed to its layout.
"""

import contextlib
import importlib
import io
import re
import sys
import types
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Union

import torch
from torch import nn

from t2t_plugin.converters.official import BLOCK_KEYS, PERFORMER_T2T_KEYS
from t2t_plugin.models.backbones import T2TViT

# the T2T module both references hard-code
_REFERENCE_T2T = dict(
    kernel_sizes=(7, 3, 3), strides=(4, 2, 2), paddings=(2, 1, 1)
)
# our layer names -> the official ones: the converter's tables, inverted
_OFFICIAL_PERFORMER_NAMES = {
    ours: official for official, ours in PERFORMER_T2T_KEYS.items()
}
_OFFICIAL_BLOCK_NAMES = {
    ours: official for official, ours in BLOCK_KEYS.items()
}
_LAYER_KEY = re.compile(
    r'(?P<layer>tokens_to_token\.attention[12]|encoder\.\d+)\.(?P<rest>.+)$'
)
# a name unlikely to clash with anything the user imports
_OFFICIAL_PACKAGE = '_t2t_vit_official_models'


def _check_reference_t2t(model: T2TViT, name: str) -> None:
    t2t = model.tokens_to_token
    ours = dict(
        kernel_sizes=t2t.kernel_sizes,
        strides=t2t.strides,
        paddings=t2t.paddings,
    )
    if ours != _REFERENCE_T2T or t2t.in_channels != 3:
        raise ValueError(
            f'{name} hard-codes the T2T soft splits {_REFERENCE_T2T} on '
            f'3-channel images; this model has {ours} on '
            f'{t2t.in_channels} channels. Benchmark it without that '
            'reference, or with the default t2t_cfg.'
        )
    height, width = model.patch_resolution
    if height != width:
        raise ValueError(
            f'{name} takes square images only; this model is '
            f'built for a {height}x{width} token grid.'
        )


def build_mmpretrain_reference(model: T2TViT) -> nn.Module:
    """mmpretrain 1.2.0's ``T2T_ViT`` with the architecture and weights of
    ``model``.

    Args:
        model (T2TViT): A backbone with transformer T2T layers.

    Returns:
        nn.Module: The reference backbone, on the device of ``model``.

    Raises:
        ValueError: If ``model`` has performer or convolution T2T layers, or
            soft splits that mmpretrain's ``T2TModule`` cannot express.
    """
    from mmpretrain.models.backbones import T2T_ViT

    token_layer = model.tokens_to_token.token_layer
    if token_layer != 'transformer':
        raise ValueError(
            f"mmpretrain's T2T_ViT has only transformer T2T layers; this "
            f'model has {token_layer} ones. Compare performer archs with '
            'the official code (--official-repo) instead.'
        )
    _check_reference_t2t(model, "mmpretrain's T2T_ViT")
    encoder_layer = model.encoder[0]
    reference = T2T_ViT(
        img_size=model.patch_resolution[0]
        * model.tokens_to_token.total_stride,
        embed_dims=model.embed_dims,
        num_layers=model.num_layers,
        final_norm=model.final_norm,
        with_cls_token=model.with_cls_token,
        out_type=model.out_type,
        t2t_cfg=dict(token_dims=model.tokens_to_token.token_dims),
        layer_cfgs=dict(
            num_heads=encoder_layer.attn.num_heads,
            feedforward_channels=model.arch_settings['feedforward_channels'],
            qkv_bias=encoder_layer.attn.qkv.bias is not None,
        ),
    )
    reference.load_state_dict(model.state_dict(), strict=True)
    param = next(model.parameters())
    return reference.to(device=param.device, dtype=param.dtype)


def plugin_to_official_state_dict(
    state_dict: Mapping[str, torch.Tensor], token_layer: str
) -> dict[str, torch.Tensor]:
    """Rename a backbone state dict of ours to the official key layout.

    The inverse of the official-weights converter, without a classifier:
    ``encoder.N.*`` become ``blocks.N.*``, T2T layers get the official
    names of their kind (performer: ``norm1``, ``kqv``, ``proj``, ``w``,
    ``norm2``, ``mlp.0``, ``mlp.2``; transformer: timm block names).

    Args:
        state_dict (Mapping[str, torch.Tensor]): ``T2TViT.state_dict()``.
        token_layer (str): ``'performer'`` or ``'transformer'``.

    Returns:
        Dict[str, torch.Tensor]: The same tensors under official names.

    Raises:
        KeyError: If a key has no official counterpart.
    """
    t2t_names = (
        _OFFICIAL_PERFORMER_NAMES
        if token_layer == 'performer'
        else _OFFICIAL_BLOCK_NAMES
    )
    converted = {}
    for key, value in state_dict.items():
        match = _LAYER_KEY.match(key)
        if match is None:
            converted[key] = value
            continue
        layer, rest = match.group('layer'), match.group('rest')
        names = _OFFICIAL_BLOCK_NAMES
        if layer.startswith('encoder.'):
            layer = 'blocks.' + layer[len('encoder.') :]
        else:
            names = t2t_names
        module, _, leaf = rest.rpartition('.')
        if rest in names:
            converted[f'{layer}.{names[rest]}'] = value
        elif module in names:
            converted[f'{layer}.{names[module]}.{leaf}'] = value
        else:
            raise KeyError(
                f'{key!r} has no counterpart in the official T2T-ViT layout.'
            )
    return converted


def _import_official_models(repo: Path) -> types.ModuleType:
    models_dir = repo / 'models'
    if not (models_dir / 't2t_vit.py').is_file():
        raise ValueError(
            f'{repo} is not a checkout of yitu-opensource/T2T-ViT: '
            f'{models_dir / "t2t_vit.py"} does not exist.'
        )
    # a bare package over models/ skips its __init__, which imports every
    # variant of the repository (and their extra dependencies)
    package = sys.modules.get(_OFFICIAL_PACKAGE)
    if package is None or package.__path__ != [str(models_dir)]:
        for name in [
            n for n in sys.modules if n.startswith(_OFFICIAL_PACKAGE)
        ]:
            del sys.modules[name]
        package = types.ModuleType(_OFFICIAL_PACKAGE)
        package.__path__ = [str(models_dir)]
        sys.modules[_OFFICIAL_PACKAGE] = package
    try:
        with warnings.catch_warnings():
            # it imports timm helpers from their pre-1.0 places
            warnings.simplefilter('ignore', FutureWarning)
            return importlib.import_module(f'{_OFFICIAL_PACKAGE}.t2t_vit')
    except ImportError as error:
        raise ImportError(
            f'The official T2T-ViT code in {repo} failed to import '
            f'({error}); it needs timm: pip install timm'
        ) from error


def build_official_reference(
    model: T2TViT, repo: Union[str, Path]
) -> nn.Module:
    """The official ``T2T_ViT`` with the architecture and weights of
    ``model``, without a classifier (it returns the class token).

    Args:
        model (T2TViT): A backbone with performer or transformer T2T layers
            and the default soft splits.
        repo (str | Path): A local checkout of yitu-opensource/T2T-ViT.

    Returns:
        nn.Module: The reference model, on the device of ``model``.

    Raises:
        ValueError: If ``repo`` is not such a checkout or ``model`` has an
            architecture the official code cannot build.
    """
    t2t = model.tokens_to_token
    if t2t.token_layer == 'convolution':
        raise ValueError(
            'The official T2T_ViT forward has no convolution T2T path; '
            'benchmark the convolution ablation without references.'
        )
    _check_reference_t2t(model, 'The official T2T_ViT')
    if (
        t2t.token_layer == 'performer'
        and t2t.attention1.attn.num_features != t2t.token_dims // 2
    ):
        raise ValueError(
            'The official performer has kernel_ratio 0.5; '
            'this model has another.'
        )
    if not model.with_cls_token or not model.final_norm:
        raise ValueError(
            'The official T2T_ViT always has a class token and a final norm.'
        )
    encoder_layer = model.encoder[0]
    official = _import_official_models(Path(repo).expanduser())
    # the official constructors print which T2T layer they use
    with contextlib.redirect_stdout(io.StringIO()):
        reference = official.T2T_ViT(
            img_size=model.patch_resolution[0] * t2t.total_stride,
            tokens_type=t2t.token_layer,
            num_classes=0,
            embed_dim=model.embed_dims,
            depth=model.num_layers,
            num_heads=encoder_layer.attn.num_heads,
            mlp_ratio=model.arch_settings['feedforward_channels']
            / model.embed_dims,
            qkv_bias=encoder_layer.attn.qkv.bias is not None,
            token_dim=t2t.token_dims,
        )
    reference.load_state_dict(
        plugin_to_official_state_dict(model.state_dict(), t2t.token_layer),
        strict=True,
    )
    param = next(model.parameters())
    return reference.to(device=param.device, dtype=param.dtype)
