from typing import Optional

import torch
from mmpretrain.registry import MODELS
from torch import nn

from t2t_plugin.models.layers import SelfAttention, TransformerLayer


class LocalitySelfAttention(SelfAttention):
    """Locality self-attention (Lee et al. 2021, "Vision Transformer for
    Small-Size Datasets"): the scale of the attention logits is a learned
    parameter, ``logit_scale`` (starting at ``head_dims ** -0.5``), and no
    token attends to itself, which sharpens attention on the others.

    Both through :meth:`scaled_query`, so that the forward and
    :meth:`attention_weights` (what the visualisation tools draw) agree.
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # shape (1,), so that optimisers treat it as a norm or bias
        # (``flat_decay_mult``), not as a weight to decay
        self.logit_scale = nn.Parameter(torch.tensor([self.scale]))

    def scaled_query(
        self, q: torch.Tensor
    ) -> tuple[torch.Tensor, float, Optional[torch.Tensor]]:
        length = q.shape[-2]
        # the learned scale goes into q: the fused kernel takes a float only
        mask = ~torch.eye(length, dtype=torch.bool, device=q.device)
        return q * self.logit_scale.to(q.dtype), 1.0, mask


@MODELS.register_module()
class LocalityTransformerLayer(TransformerLayer):
    """An encoder layer with :class:`LocalitySelfAttention`:
    ``model.backbone.layer_cfgs=dict(type='LocalityTransformerLayer')``
    (every encoder layer; the T2T layers keep the official attention)."""

    attention_cls = LocalitySelfAttention
