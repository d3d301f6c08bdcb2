"""What a running backbone sees, read by forward hooks: the token maps of
Fig. 2 of the paper and the class token's attention over the image."""

from collections import OrderedDict
from collections.abc import Sequence
from typing import Callable

import torch
from torch import nn


def check_block_indices(
    num_layers: int, layer_indices: Sequence[int]
) -> list[int]:
    """Block indices of an encoder of ``num_layers`` blocks counted from 0,
    negative ones from the end (a ValueError for a block that does not
    exist); ``num_layers`` may be read from a config before the model is
    built."""
    resolved = []
    for index in layer_indices:
        position = index + num_layers if index < 0 else index
        if not 0 <= position < num_layers:
            raise ValueError(
                f'Block {index} does not exist: the backbone has '
                f'{num_layers} encoder blocks (0..{num_layers - 1}, or '
                'negative from the end).'
            )
        resolved.append(position)
    return resolved


def default_block_indices(num_layers: int) -> list[int]:
    """The first, the middle and the last encoder block."""
    return sorted({0, num_layers // 2, num_layers - 1})


def _forward_with_hooks(
    backbone: nn.Module,
    images: torch.Tensor,
    hooks: Sequence[tuple[nn.Module, Callable]],
) -> None:
    handles = [module.register_forward_hook(hook) for module, hook in hooks]
    try:
        backbone(images)
    finally:
        for handle in handles:
            handle.remove()


@torch.no_grad()
def collect_token_maps(
    backbone: nn.Module,
    images: torch.Tensor,
    layer_indices: Sequence[int] = (),
) -> 'OrderedDict[str, torch.Tensor]':
    """Token maps ``(B, channels, h, w)`` of a T2T-ViT from one forward
    pass: ``'t2t_layer1'``, ``'t2t_layer2'`` (stride 4 and 8 by default),
    ``'t2t_tokens'`` (the projected tokens, stride 16) and ``'block{i}'``
    for the ``layer_indices`` (negative from the end; class token left out).
    """
    layers = check_block_indices(len(backbone.encoder), layer_indices)
    captured: dict[str, torch.Tensor] = OrderedDict()
    grid = {}

    def read_t2t(module, args, output):
        tokens, token_grid, maps = output
        grid['size'] = token_grid
        for step, feature_map in enumerate(maps, 1):
            captured[f't2t_layer{step}'] = feature_map
        captured['t2t_tokens'] = tokens.transpose(1, 2).reshape(
            tokens.shape[0], tokens.shape[2], *token_grid
        )

    blocks = {backbone.encoder[index]: index for index in layers}

    def read_block(module, args, output):
        patches = output[:, backbone.num_extra_tokens :]
        captured[f'block{blocks[module]}'] = patches.transpose(1, 2).reshape(
            output.shape[0], output.shape[2], *grid['size']
        )

    hooks = [(backbone.tokens_to_token, read_t2t)]
    hooks += [(block, read_block) for block in blocks]
    _forward_with_hooks(backbone, images, hooks)
    return captured


@torch.no_grad()
def cls_attention_maps(
    backbone: nn.Module, images: torch.Tensor, layer_indices: Sequence[int]
) -> dict[int, torch.Tensor]:
    """Attention of the class token over the image tokens, per head: for
    each of ``layer_indices`` (resolved, from 0), ``(B, heads, h, w)``, the
    weight it gives each image token (on itself left out: rows sum to <= 1).

    A hook on each chosen block's attention asks it for its own weights
    (``attention_weights``: the ones its forward applies, a learned scale
    or a mask of a subclass included) of the tokens it was given.
    """
    if not backbone.with_cls_token:
        raise ValueError(
            'The class-token attention needs a backbone with '
            'with_cls_token=True.'
        )
    layers = check_block_indices(len(backbone.encoder), layer_indices)
    grid = backbone.tokens_to_token.output_sizes(tuple(images.shape[-2:]))[-1]
    extra = backbone.num_extra_tokens
    captured: dict[int, torch.Tensor] = {}

    blocks = {backbone.encoder[index].attn: index for index in layers}

    def read(module, args, output):
        rows = module.attention_weights(args[0])[:, :, 0, extra:]
        captured[blocks[module]] = rows.reshape(*rows.shape[:2], *grid).float()

    _forward_with_hooks(backbone, images, [(attn, read) for attn in blocks])
    return captured


@torch.no_grad()
def attention_pool_maps(
    classifier: nn.Module, images: torch.Tensor
) -> torch.Tensor:
    """The weight a ``T2TClsHead(pool='attention')`` gives each image
    token when it pools them, ``(B, h, w)``: where a model without a class
    token looks. The weights are the head's own
    (``attention_pool_weights``) and sum to 1 over all its tokens."""
    head = classifier.head
    if getattr(head, 'pool', None) != 'attention':
        raise ValueError(
            "The pooling weights need a head with pool='attention' "
            '(T2TClsHead).'
        )
    tokens = classifier.extract_feat(images)[-1]
    if tokens.dim() == 4:  # (B, C, h, w) -> (B, h*w, C), as the head reads
        tokens = tokens.flatten(2).transpose(1, 2)
    backbone = classifier.backbone
    height, width = backbone.tokens_to_token.output_sizes(
        tuple(images.shape[-2:])
    )[-1]
    weights = head.attention_pool_weights(tokens)[..., 0]
    # a class token, if any, comes first
    return weights[:, -height * width :].reshape(-1, height, width).float()
