from collections import OrderedDict
from typing import Optional, Sequence, Tuple, Union

import torch
from mmpretrain.models.heads import ClsHead
from mmpretrain.registry import MODELS
from torch import nn


@MODELS.register_module()
class T2TClsHead(ClsHead):
    """The T2T-ViT classifier: one linear layer on the class token.

    Losses, soft labels from mixup / cutmix (``gt_score``), label smoothing
    (``loss=dict(type='LabelSmoothLoss', ...)``) and top-k accuracy come from
    mmpretrain's :class:`ClsHead`. The linear layer is ``layers.head`` as in
    mmpretrain's ``VisionTransformerClsHead``, so its classifier checkpoints
    load unchanged.

    Args:
        num_classes (int): Number of classes.
        in_channels (int): Width of the class token (the arch's embed_dims).
        loss (dict): Loss config. Defaults to cross entropy.
        topk (int | Sequence[int]): Top-k accuracies to report.
            Defaults to ``(1, )``.
        init_cfg (dict, optional): Defaults to trunc-normal (std 0.02)
            weights and zero bias, as the official code.
    """

    def __init__(self,
                 num_classes: int,
                 in_channels: int,
                 loss: dict = dict(type='CrossEntropyLoss', loss_weight=1.0),
                 topk: Union[int, Tuple[int, ...]] = (1, ),
                 init_cfg: Optional[dict] = dict(
                     type='TruncNormal', layer='Linear', std=.02, bias=0.),
                 **kwargs) -> None:
        super().__init__(loss=loss, topk=topk, init_cfg=init_cfg, **kwargs)
        if num_classes <= 0:
            raise ValueError(
                f'num_classes must be a positive integer, got {num_classes}.')
        self.num_classes = num_classes
        self.in_channels = in_channels
        self.layers = nn.Sequential(
            OrderedDict(head=nn.Linear(in_channels, num_classes)))

    def pre_logits(self, feats: Sequence[torch.Tensor]) -> torch.Tensor:
        """The class token of the last backbone output, ``(B, C)``."""
        cls_token = feats[-1]
        if cls_token.dim() != 2 or cls_token.shape[1] != self.in_channels:
            raise ValueError(
                'T2TClsHead reads the class token (B, '
                f'{self.in_channels}), got {tuple(cls_token.shape)}. Set '
                "out_type='cls_token' in the backbone and in_channels to its "
                'embed_dims.')
        return cls_token

    def forward(self, feats: Sequence[torch.Tensor]) -> torch.Tensor:
        return self.layers.head(self.pre_logits(feats))
