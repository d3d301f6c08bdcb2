from collections.abc import Sequence
from typing import Optional

import torch
from mmpretrain.models.heads import VisionTransformerClsHead
from mmpretrain.registry import MODELS
from torch import nn

from ..backbones import T2TViT
from ..checkpoint_checks import (
    CheckpointMismatchError,
    check_supplied_weights,
    checkpoint_name,
)
from ..model_under_construction import built_before

# what to do instead of loading a checkpoint with another classifier
FINE_TUNE_ADVICE = (
    'to fine-tune with a new head, start the backbone only: '
    "model.backbone.init_cfg=dict(type='Pretrained', checkpoint=FILE, "
    "prefix='backbone.') and no load_from"
)


@MODELS.register_module()
class T2TClsHead(VisionTransformerClsHead):
    """The T2T-ViT classifier: one linear layer on the class token, or on
    the tokens pooled.

    mmpretrain's :class:`VisionTransformerClsHead` (same keys) with the
    official trunc-normal init (upstream starts from zeros), an input check,
    and a load hook that takes the official ``head.*`` keys and refuses
    another number of classes. ``pool='attention'`` is CCT's sequence
    pooling (softmax over a linear score per token) of ``out_type='raw'``
    or ``'featmap'`` outputs.

    Args:
        num_classes (int): Number of classes.
        in_channels (int, optional): Input width. Defaults to None: the
            ``embed_dims`` of the T2TViT backbone built before this head.
        pool (str): ``'token'`` (the (B, C) vector of the backbone) or
            ``'attention'``. Defaults to ``'token'``.
        init_cfg (dict, optional): Defaults to trunc-normal (std 0.02)
            weights and zero bias.
        **kwargs: Other :class:`VisionTransformerClsHead` arguments, e.g.
            ``loss`` and ``topk``.
    """

    POOLS = ('token', 'attention')

    def __init__(
        self,
        num_classes: int,
        in_channels: Optional[int] = None,
        pool: str = 'token',
        init_cfg: Optional[dict] = dict(
            type='TruncNormal', layer='Linear', std=0.02, bias=0.0
        ),
        **kwargs,
    ) -> None:
        in_channels = self._follow_backbone(in_channels)
        super().__init__(
            num_classes=num_classes,
            in_channels=in_channels,
            init_cfg=init_cfg,
            **kwargs,
        )
        if pool not in self.POOLS:
            raise ValueError(
                f'Unknown pool {pool!r} of T2TClsHead; choose one of '
                f'{self.POOLS}.'
            )
        self.pool = pool
        if pool == 'attention':
            # one score per token; trunc-normal as the classifier (init_cfg)
            self.attention_pool = nn.Linear(in_channels, 1)
        self._register_load_state_dict_pre_hook(self._prepare_checkpoint)

    def _follow_backbone(self, in_channels: Optional[int]) -> int:
        """The width of the T2TViT backbone built before this head, checked
        against ``in_channels`` where given: an arch change is one edit."""
        backbone = built_before(self, 'backbone')
        width = (
            backbone.embed_dims
            if isinstance(backbone, T2TViT)
            and built_before(self, 'neck') is None
            else None
        )
        if in_channels is None:
            if width is None:
                raise ValueError(
                    'T2TClsHead needs in_channels, the width of the features '
                    "it classifies (the backbone's embed_dims, e.g. 384 for "
                    'T2T-ViT-14); it takes it from the backbone only when a '
                    'model builds it right after a T2TViT backbone, with no '
                    "neck between them (as mmpretrain's ImageClassifier does)."
                )
            return width
        if width is not None and in_channels != width:
            raise ValueError(
                f'T2TClsHead in_channels={in_channels} does not match the '
                f'T2TViT backbone, whose embed_dims is {width}; set '
                f'model.head.in_channels={width}, or leave in_channels out of '
                'the head config: it follows the backbone.'
            )
        return in_channels

    def _prepare_checkpoint(
        self, state_dict: dict, prefix: str, *args, **kwargs
    ) -> None:
        for name in ('weight', 'bias'):
            official, ours = prefix + name, f'{prefix}layers.head.{name}'
            if official in state_dict and ours not in state_dict:
                state_dict[ours] = state_dict.pop(official)
        weight = state_dict.get(f'{prefix}layers.head.weight')
        if (
            isinstance(weight, torch.Tensor)
            and weight.dim() == 2
            and weight.shape[0] != self.num_classes
        ):
            raise CheckpointMismatchError(
                f'The {checkpoint_name(state_dict)} classifies '
                f"{weight.shape[0]} classes, this model's head "
                f'{self.num_classes} (num_classes); '
                f'{FINE_TUNE_ADVICE}.'
            )
        check_supplied_weights(
            type(self).__name__,
            self.state_dict(keep_vars=True),
            state_dict,
            prefix,
            advice=FINE_TUNE_ADVICE,
        )

    def attention_pool_weights(self, tokens: torch.Tensor) -> torch.Tensor:
        """The weights ``(B, N, 1)`` that ``pool='attention'`` gives the
        tokens ``(B, N, C)``: a softmax over the tokens."""
        return self.attention_pool(tokens).softmax(dim=1)

    def pre_logits(self, feats: Sequence[torch.Tensor]) -> torch.Tensor:
        feat = feats[-1]
        if self.pool == 'attention':
            if feat.dim() == 4:  # (B, C, h, w) -> (B, h*w, C)
                feat = feat.flatten(2).transpose(1, 2)
            if feat.dim() != 3 or feat.shape[2] != self.in_channels:
                raise ValueError(
                    "T2TClsHead with pool='attention' reads tokens (B, N, "
                    f'{self.in_channels}), got {tuple(feat.shape)}. Set '
                    "out_type='raw' (or 'featmap') in the backbone and "
                    'in_channels to its embed_dims.'
                )
            weights = self.attention_pool_weights(feat)
            return (weights.transpose(1, 2) @ feat).squeeze(1)
        if feat.dim() != 2 or feat.shape[1] != self.in_channels:
            raise ValueError(
                'T2TClsHead reads the class token (B, '
                f'{self.in_channels}), got {tuple(feat.shape)}. Set '
                "out_type='cls_token' (or 'avg_featmap') in the backbone and "
                "in_channels to its embed_dims, or pool='attention' here."
            )
        return super().pre_logits(feats)
