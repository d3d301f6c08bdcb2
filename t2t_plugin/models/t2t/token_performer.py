import math

import torch
from mmpretrain.registry import MODELS
from torch import nn

from ..layers import FFN
from ..option_checks import (
    Rule,
    check_fraction,
    check_int,
    check_options,
    check_positive,
)


class PerformerAttention(nn.Module):
    """Single-head Performer attention of the official T2T layer.

    Positive random features ``phi(x) = exp(x @ w^T - |x|^2 / 2) / sqrt(m)``
    (FAVOR+) make it linear in the tokens: ``y = phi(q) (phi(k)^T v) /
    (phi(q) . sum_t phi(k_t) + 1e-8)``, then ``y = v + proj(y)``. ``w``
    (``random_matrix``) is fixed, orthogonal, scaled by ``sqrt(m)`` and
    saved with the weights. Float32 even under autocast: in half precision
    the 1e-8 vanishes and the division gives NaNs.

    Args:
        token_dims (int): Width of k, q, v and of the output. Defaults to 64.
        kernel_ratio (float): ``m / token_dims``. Defaults to 0.5.
    """

    eps = 1e-8
    option_rules: dict[str, Rule] = dict(
        in_dims=(check_int,),
        token_dims=(check_int,),
        kernel_ratio=(check_positive,),
        proj_drop=(check_fraction,),
    )

    def __init__(
        self,
        in_dims: int,
        token_dims: int = 64,
        kernel_ratio: float = 0.5,
        proj_drop: float = 0.1,
    ) -> None:
        super().__init__()
        owner = type(self).__name__
        check_options(owner, self.option_rules, locals())
        self.token_dims = token_dims
        self.num_features = int(token_dims * kernel_ratio)
        if self.num_features < 1:
            raise ValueError(
                f'{owner} got kernel_ratio={kernel_ratio!r}, which gives '
                f'token_dims={token_dims} no random feature; give at least '
                f'{1 / token_dims:g}.'
            )
        # the official layout orders the projection as k, q, v
        self.kqv = nn.Linear(in_dims, 3 * token_dims)
        self.proj = nn.Linear(token_dims, token_dims)
        self.proj_drop = nn.Dropout(proj_drop)
        random_matrix = torch.empty(self.num_features, token_dims)
        nn.init.orthogonal_(random_matrix)
        self.register_buffer(
            'random_matrix', random_matrix * math.sqrt(self.num_features)
        )

    def random_features(self, x: torch.Tensor) -> torch.Tensor:
        """``phi(x)`` of shape ``(B, N, m)``, in float32 (also the matrix,
        after ``model.half()``)."""
        # dividing by sqrt(m) is folded into the exponent
        offset = 0.5 * (x * x).sum(-1, keepdim=True) + 0.5 * math.log(
            self.num_features
        )
        return torch.exp(x @ self.random_matrix.float().t() - offset)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k, q, v = self.kqv(x).split(self.token_dims, dim=-1)
        with torch.autocast(device_type=x.device.type, enabled=False):
            k_features = self.random_features(k.float())
            q_features = self.random_features(q.float())
            kv = k_features.transpose(1, 2) @ v.float()
            normaliser = q_features @ k_features.sum(1).unsqueeze(-1)
            y = (q_features @ kv) / (normaliser + self.eps)
        return v + self.proj_drop(self.proj(y.to(v.dtype)))


@MODELS.register_module()
class TokenPerformer(nn.Module):
    """The T2T performer layer: ``y = attn(LN(x))``, then ``y + FFN(LN(y))``.

    ``drop_rate`` applies after the attention projection and the FFN, as
    in the official code.
    """

    # reads the tokens of a soft split (see T2TModule)
    reads_map = False

    def __init__(
        self,
        in_dims: int,
        token_dims: int = 64,
        kernel_ratio: float = 0.5,
        drop_rate: float = 0.1,
    ) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(in_dims)
        self.attn = PerformerAttention(
            in_dims, token_dims, kernel_ratio, proj_drop=drop_rate
        )
        self.ln2 = nn.LayerNorm(token_dims)
        self.ffn = FFN(token_dims, token_dims, out_drop=drop_rate)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.attn(self.ln1(x))
        return x + self.ffn(self.ln2(x))
