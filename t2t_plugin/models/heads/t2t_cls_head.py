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

    mmpretrain's :class:`VisionTransformerClsHead` with ``hidden_dim=None``
    (the linear layer is ``layers.head``, so checkpoints of either head load
    into the other) and two differences: the official initialisation,
    trunc-normal (std 0.02) weights and zero bias where the upstream head
    starts from zeros, and a check that the backbone hands over a class token,
    which turns a wrong ``out_type`` into an error that says what to set
    instead of a shape mismatch inside the linear layer.

    Its load hook takes the official classifier (``head.weight``,
    ``head.bias``) as it is, and refuses a checkpoint whose classifier
    has another number of classes, is missing or holds NaN, with one line
    that says how to fine-tune with a new head instead.

    With ``pool='attention'`` the head pools the backbone's tokens itself,
    with learned weights, as the sequence pooling of compact transformers
    (CCT): one linear layer scores each token, a softmax over the tokens
    turns the scores into weights, and the classifier reads the weighted
    sum. It takes the backbone's ``out_type='raw'`` (B, N, C) or
    ``'featmap'`` (B, C, h, w) output and pools every token it is given,
    so a backbone without a class token (``with_cls_token=False``) suits
    it. For a plain mean over the patch tokens no head option is needed:
    the backbone's ``out_type='avg_featmap'`` hands over (B, C).

    Losses, soft labels from mixup / cutmix (``gt_score``), label smoothing
    and top-k accuracy come from mmpretrain's ``ClsHead``.

    Args:
        num_classes (int): Number of classes.
        in_channels (int, optional): Width of the class token (the arch's
            embed_dims). Defaults to None: the ``embed_dims`` of the T2TViT
            backbone the model builds before this head (a value given must
            match it).
        pool (str): ``'token'``, the (B, C) vector the backbone hands over
            (the class token or the mean of the tokens), or
            ``'attention'``, sequence pooling of its tokens. Defaults to
            ``'token'``.
        init_cfg (dict, optional): Defaults to trunc-normal (std 0.02)
            weights and zero bias, as the official code.
        **kwargs: Other arguments of :class:`VisionTransformerClsHead`, e.g.
            ``loss`` (defaults to cross entropy) and ``topk`` (defaults to
            ``(1, )``).
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
        """The width of the T2TViT backbone this head is built after,
        checked against ``in_channels`` where the config gives it.

        A config that changes the backbone's arch then needs no second edit,
        through every tool that builds the model (``MODELS.build``,
        ``get_model``, mmpretrain's and our ``train.py``).
        """
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
        """Official classifier names -> ours; refuse a classifier that
        does not fit."""
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

    def pre_logits(self, feats: Sequence[torch.Tensor]) -> torch.Tensor:
        """The class token (or the pooled tokens) of the last backbone
        output, ``(B, C)``."""
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
            weights = self.attention_pool(feat).softmax(dim=1)  # (B, N, 1)
            return (weights.transpose(1, 2) @ feat).squeeze(1)
        if feat.dim() != 2 or feat.shape[1] != self.in_channels:
            raise ValueError(
                'T2TClsHead reads the class token (B, '
                f'{self.in_channels}), got {tuple(feat.shape)}. Set '
                "out_type='cls_token' (or 'avg_featmap') in the backbone and "
                "in_channels to its embed_dims, or pool='attention' here."
            )
        return super().pre_logits(feats)
