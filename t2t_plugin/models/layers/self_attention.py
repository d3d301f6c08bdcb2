import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from ..option_checks import (
    Rule,
    check_bool,
    check_fraction,
    check_int,
    check_options,
    check_positive,
    optional,
)


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

    A variant of the attention (another scale, a mask) overrides
    :meth:`scaled_query`: the forward and :meth:`attention_weights`, which
    the visualisation tools draw, both go through it.
    """

    option_rules: dict[str, Rule] = dict(
        input_dims=(check_int,),
        embed_dims=(check_int,),
        num_heads=(check_int,),
        scale=(optional(check_positive),),
        qkv_bias=(check_bool,),
        attn_drop=(check_fraction,),
        proj_drop=(check_fraction,),
        v_shortcut=(check_bool,),
    )

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
        owner = type(self).__name__
        check_options(owner, self.option_rules, locals())
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

    @torch.no_grad()
    def mimetic_init_(
        self,
        alpha_qk: float = 0.7,
        beta_qk: float = 0.7,
        alpha_vo: float = 0.4,
        beta_vo: float = 0.4,
    ) -> None:
        """Mimetic initialisation (Trockman and Kolter, ICML 2023): the
        weights of a trained attention layer, mimicked at the start.

        For each head, ``W_q^T W_k`` (``input_dims x input_dims``, the
        bilinear form of the attention logits ``x W_q^T W_k x'^T``) is the
        best rank-``head_dims`` approximation of ``alpha_qk * Z + beta_qk *
        I``, so that a token attends to itself and to similar tokens; and
        ``W_v^T W_proj^T``, the path of a token through the layer, that of
        ``alpha_vo * Z - beta_vo * I``. ``Z`` is Gaussian with variance
        ``1 / input_dims``, new for each head and for the value path.
        Both come from the singular value decomposition ``U S V^T`` of the
        target: ``U sqrt(S)`` and ``V sqrt(S)`` give the two factors. Biases
        start at zero. Where a head is wider than the input (a T2T layer on
        3x3 patches of 3 channels), its rows beyond ``input_dims`` keep
        their weights; the value path needs ``input_dims == embed_dims``,
        other layers (the T2T layers) keep their value weights.
        """
        dims, heads = self.input_dims, self.num_heads

        def factors(sign: float, alpha: float, beta: float, rank: int):
            target = alpha * torch.randn(dims, dims) / math.sqrt(dims)
            target += sign * beta * torch.eye(dims)
            u, s, vh = torch.linalg.svd(target)
            root = s[:rank].sqrt()
            return (u[:, :rank] * root).t(), (vh[:rank].t() * root).t()

        weight = self.qkv.weight
        q, k, v = weight.view(3, heads, self.head_dims, dims).unbind(0)
        rank = min(self.head_dims, dims)
        for head in range(heads):
            head_q, head_k = factors(1.0, alpha_qk, beta_qk, rank)
            q[head, :rank].copy_(head_q)
            k[head, :rank].copy_(head_k)
        if self.qkv.bias is not None:
            self.qkv.bias.zero_()
        if dims == self.embed_dims:
            value, proj = factors(-1.0, alpha_vo, beta_vo, dims)
            v.view(self.embed_dims, dims).copy_(value)
            self.proj.weight.copy_(proj.t())
            self.proj.bias.zero_()

    def split_heads(self, x: torch.Tensor):
        """Project ``x`` and return q, k, v as ``(B, heads, N, head_dims)``."""
        batch, length, _ = x.shape
        qkv = self.qkv(x).view(
            batch, length, 3, self.num_heads, self.head_dims
        )
        # unbind's backward stacks the gradients straight into the qkv
        # projection's layout, without another copy
        return tuple(t.transpose(1, 2) for t in qkv.unbind(2))

    def scaled_query(
        self, q: torch.Tensor
    ) -> tuple[torch.Tensor, float, Optional[torch.Tensor]]:
        """What the softmax of ``q @ k^T`` is taken of: the query, the
        factor on the products and a boolean mask (True: may attend) of
        ``(N, N)``, or None. Here ``q``, ``scale`` and no mask."""
        return q, self.scale, None

    def attention_weights(self, x: torch.Tensor) -> torch.Tensor:
        """The attention ``(B, heads, N, N)`` of the tokens ``x``, each row
        a softmax over the tokens: the weights the forward applies to the
        values (written out, where the forward's fused kernel keeps them
        to itself)."""
        q, k, _ = self.split_heads(x)
        q, scale, mask = self.scaled_query(q)
        logits = (q @ k.transpose(-2, -1)) * scale
        if mask is not None:
            logits = logits.masked_fill(~mask, float('-inf'))
        return logits.softmax(dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, _ = x.shape
        q, k, v = self.split_heads(x)
        q, scale, mask = self.scaled_query(q)
        out = F.scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask=mask,
            dropout_p=self.attn_drop if self.training else 0.0,
            scale=scale,
        )
        out = out.transpose(1, 2).reshape(batch, length, self.embed_dims)
        out = self.proj_drop(self.proj(out))
        if self.v_shortcut:
            out = (
                v.transpose(1, 2).reshape(batch, length, self.embed_dims) + out
            )
        return out
