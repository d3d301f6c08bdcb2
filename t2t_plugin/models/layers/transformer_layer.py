from typing import Optional

import torch
from mmcv.cnn.bricks import DropPath
from mmpretrain.registry import MODELS
from torch import nn

from ..option_checks import (
    Rule,
    check_bool,
    check_fraction,
    check_int,
    check_options,
    check_positive,
)
from .ffn import FFN
from .self_attention import SelfAttention


@MODELS.register_module()
class TransformerLayer(nn.Module):
    """Pre-norm transformer layer: ``x + attn(LN(x))``, ``x + FFN(LN(x))``.

    With ``v_shortcut=True`` it is the official T2T layer: the width may
    change (``input_dims -> embed_dims``) and ``y = v + attn(LN(x))``.

    Args:
        embed_dims (int): Output (and attention) width.
        feedforward_channels (int): Hidden width of the FFN.
        input_dims (int, optional): Input width. Defaults to ``embed_dims``.
        qk_scale (float, optional): Attention scale. Defaults to
            ``head_dims ** -0.5``.
        drop_rate (float): Dropout after the attention projection and in the
            FFN. Defaults to 0.

    Registered in ``MODELS``: the backbone builds its encoder layers from
    ``layer_cfgs``, whose ``type`` may name a subclass (another attention:
    set ``attention_cls``), as ``projects/small_data`` does.
    """

    attention_cls = SelfAttention
    option_rules: dict[str, Rule] = dict(
        feedforward_channels=(check_int,),
        qkv_bias=(check_bool,),
        v_shortcut=(check_bool,),
        drop_rate=(check_fraction,),
        drop_path_rate=(check_fraction,),
        norm_eps=(check_positive,),
    )

    def __init__(
        self,
        embed_dims: int,
        num_heads: int,
        feedforward_channels: int,
        input_dims: Optional[int] = None,
        v_shortcut: bool = False,
        qk_scale: Optional[float] = None,
        qkv_bias: bool = False,
        drop_rate: float = 0.0,
        attn_drop_rate: float = 0.0,
        drop_path_rate: float = 0.0,
        norm_eps: float = 1e-5,
    ) -> None:
        super().__init__()
        owner = type(self).__name__
        check_options(owner, self.option_rules, locals())
        input_dims = input_dims or embed_dims
        if input_dims != embed_dims and not v_shortcut:
            raise ValueError(
                f'A TransformerLayer from {input_dims} to {embed_dims} dims '
                'cannot add its input to the attention output; set '
                'v_shortcut=True (the T2T layer) or input_dims=embed_dims.'
            )
        self.v_shortcut = v_shortcut
        self.ln1 = nn.LayerNorm(input_dims, eps=norm_eps)
        self.attn = self.attention_cls(
            input_dims,
            embed_dims,
            num_heads=num_heads,
            scale=qk_scale,
            qkv_bias=qkv_bias,
            attn_drop=attn_drop_rate,
            proj_drop=drop_rate,
            v_shortcut=self.v_shortcut,
        )
        self.ln2 = nn.LayerNorm(embed_dims, eps=norm_eps)
        self.ffn = FFN(
            embed_dims,
            feedforward_channels,
            hidden_drop=drop_rate,
            out_drop=drop_rate,
        )
        self.drop_path = (
            DropPath(drop_path_rate) if drop_path_rate > 0 else nn.Identity()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.v_shortcut:
            x = self.attn(self.ln1(x))
        else:
            x = x + self.drop_path(self.attn(self.ln1(x)))
        return x + self.drop_path(self.ffn(self.ln2(x)))
