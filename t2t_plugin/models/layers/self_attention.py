from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn


class SelfAttention(nn.Module):
    """Multi-head self-attention on ``F.scaled_dot_product_attention``.

    For the encoder blocks and the T2T transformer layers: the fused kernel
    never builds the ``N x N`` matrix (3136 x 3136 in the first T2T layer).

    Args:
        embed_dims (int): Width of q, k, v and of the output.
        scale (float, optional): Factor on ``q @ k^T``. Defaults to
            ``head_dims ** -0.5``.
        v_shortcut (bool): Add ``v`` to the output (the T2T layers'
            residual). Defaults to False.
    """

    def __init__(
        self,
        input_dims: int,
        embed_dims: int,
        num_heads: int = 1,
        scale: Optional[float] = None,
        qkv_bias: bool = False,
        attn_drop: float = 0.0,
        proj_drop: float = 0.0,
        v_shortcut: bool = False,
    ) -> None:
        super().__init__()
        if embed_dims % num_heads:
            raise ValueError(
                f'embed_dims ({embed_dims}) must be divisible '
                f'by num_heads ({num_heads}).'
            )
        self.input_dims = input_dims
        self.embed_dims = embed_dims
        self.num_heads = num_heads
        self.head_dims = embed_dims // num_heads
        self.scale = self.head_dims**-0.5 if scale is None else scale
        self.attn_drop = attn_drop
        self.v_shortcut = v_shortcut
        self.qkv = nn.Linear(input_dims, embed_dims * 3, bias=qkv_bias)
        self.proj = nn.Linear(embed_dims, embed_dims)
        self.proj_drop = nn.Dropout(proj_drop)

    def split_heads(self, x: torch.Tensor):
        """Project ``x`` and return q, k, v as ``(B, heads, N, head_dims)``."""
        batch, length, _ = x.shape
        qkv = self.qkv(x).view(
            batch, length, 3, self.num_heads, self.head_dims
        )
        # unbind's backward stacks the gradients straight into the qkv
        # projection's layout, without another copy
        return tuple(t.transpose(1, 2) for t in qkv.unbind(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, _ = x.shape
        q, k, v = self.split_heads(x)
        out = F.scaled_dot_product_attention(
            q,
            k,
            v,
            dropout_p=self.attn_drop if self.training else 0.0,
            scale=self.scale,
        )
        out = out.transpose(1, 2).reshape(batch, length, self.embed_dims)
        out = self.proj_drop(self.proj(out))
        if self.v_shortcut:
            out = (
                v.transpose(1, 2).reshape(batch, length, self.embed_dims) + out
            )
        return out
