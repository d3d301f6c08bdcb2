"""The token maps of Fig. 2 of the paper, read from a running backbone."""

from collections import OrderedDict
from collections.abc import Sequence
from typing import Callable

import torch
from torch import nn


def resolve_block_indices(
    backbone: nn.Module, layer_indices: Sequence[int]
) -> list[int]:
    """Encoder block indices counted from 0, negative ones from the end.

    Raises:
        ValueError: If a block does not exist.
    """
    num_layers = len(backbone.encoder)
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


@torch.no_grad()
def collect_token_maps(
    backbone: nn.Module,
    images: torch.Tensor,
    layer_indices: Sequence[int] = (),
) -> 'OrderedDict[str, torch.Tensor]':
    """Token maps of a T2T-ViT, reshaped to images, from one forward pass.

    Forward hooks read the T2T module's output (its two intermediate maps
    and the projected tokens) and the outputs of the chosen encoder blocks;
    the class token is left out.

    Args:
        backbone (nn.Module): A :class:`T2TViT`.
        images (torch.Tensor): Normalised images ``(B, C, H, W)``.
        layer_indices (Sequence[int]): Encoder blocks to read, negative
            from the end. Defaults to none.

    Returns:
        OrderedDict[str, torch.Tensor]: ``(B, channels, h, w)`` maps under
        ``'t2t_layer1'``, ``'t2t_layer2'`` (stride 4 and 8 by default),
        ``'t2t_tokens'`` (the projected tokens, stride 16) and
        ``'block{i}'``.
    """
    layers = resolve_block_indices(backbone, layer_indices)
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

    def read_block(index):

        def hook(module, args, output):
            patches = output[:, backbone.num_extra_tokens :]
            captured[f'block{index}'] = patches.transpose(1, 2).reshape(
                output.shape[0], output.shape[2], *grid['size']
            )

        return hook

    hooks = [(backbone.tokens_to_token, read_t2t)]
    hooks += [(backbone.encoder[index], read_block(index)) for index in layers]
    forward_with_hooks(backbone, images, hooks)
    return captured


def forward_with_hooks(
    backbone: nn.Module,
    images: torch.Tensor,
    hooks: Sequence[tuple[nn.Module, Callable]],
) -> None:
    """Run ``backbone`` once with forward hooks on some of its modules.

    The hooks are removed afterwards, also when the forward fails.
    """
    handles = [module.register_forward_hook(hook) for module, hook in hooks]
    try:
        backbone(images)
    finally:
        for handle in handles:
            handle.remove()
