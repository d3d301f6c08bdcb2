"""Where the class token looks: attention rows from the model's own kernel."""

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .token_maps import forward_with_hooks, resolve_block_indices


@torch.no_grad()
def cls_attention_maps(
    backbone: nn.Module, images: torch.Tensor, layer_indices: Sequence[int]
) -> dict[int, torch.Tensor]:
    """Attention of the class token over the image tokens, per head.

    A forward hook on each chosen block's :class:`SelfAttention` takes the
    q and k that the block computes (``split_heads``, the block's own
    ``scale``) and runs the same fused ``F.scaled_dot_product_attention``
    with the identity as values: its output rows are then the softmax
    attention rows themselves. No second model, no re-implemented softmax.

    Args:
        backbone (nn.Module): A :class:`T2TViT` with a class token.
        images (torch.Tensor): Normalised images ``(B, C, H, W)``.
        layer_indices (Sequence[int]): Encoder blocks, negative from the end.

    Returns:
        Dict[int, torch.Tensor]: For each block index (as resolved, from 0),
        ``(B, heads, h, w)``: the weight the class token gives each image
        token (its weight on itself left out, so rows sum to at most 1).
    """
    if not backbone.with_cls_token:
        raise ValueError(
            'The class-token attention needs a backbone with '
            'with_cls_token=True.'
        )
    layers = resolve_block_indices(backbone, layer_indices)
    grid = backbone.tokens_to_token.output_sizes(tuple(images.shape[-2:]))[-1]
    extra = backbone.num_extra_tokens
    captured: dict[int, torch.Tensor] = {}

    def read(index):

        def hook(module, args, output):
            q, k, _ = module.split_heads(args[0])
            batch, heads, length, _ = k.shape
            identity = torch.eye(
                length, dtype=q.dtype, device=q.device
            ).expand(batch, heads, length, length)
            rows = F.scaled_dot_product_attention(
                q[:, :, :1], k, identity, scale=module.scale
            )
            captured[index] = (
                rows[:, :, 0, extra:].reshape(batch, heads, *grid).float()
            )

        return hook

    forward_with_hooks(
        backbone,
        images,
        [(backbone.encoder[index].attn, read(index)) for index in layers],
    )
    return captured
