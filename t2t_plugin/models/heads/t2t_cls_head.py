import math
from collections.abc import Sequence
from typing import Optional

import torch
from mmpretrain.models.heads import VisionTransformerClsHead
from mmpretrain.registry import MODELS
from torch import nn

from ..checkpoint_checks import (
    CHECKPOINT,
    ClassCountError,
    check_supplied_weights,
    mismatch,
)

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

    The config states ``in_channels``, as mmpretrain's heads do; a width
    that does not match the features is refused at the first forward, in
    one line naming both and the key to set.

    Args:
        num_classes (int): Number of classes.
        in_channels (int): Input width: the backbone's ``embed_dims``
            (384 for T2T-ViT-14).
        pool (str): ``'token'`` (the (B, C) vector of the backbone) or
            ``'attention'``. Defaults to ``'token'``.
        drloc (dict, optional): The relative localisation loss,
            ``dict(weight=0.1, pairs=64, hidden=512)`` (any key may be left
            out); needs the token grid: ``out_type='raw'`` without a class
            token, or ``'featmap'``. Defaults to None (no such loss).
        init_cfg (dict, optional): Defaults to trunc-normal (std 0.02)
            weights and zero bias.
        **kwargs: Other :class:`VisionTransformerClsHead` arguments, e.g.
            ``loss`` and ``topk``.
    """

    POOLS = ('token', 'attention')
    DRLOC_DEFAULTS = dict(weight=0.1, pairs=64, hidden=512)
    GRID_ADVICE = (
        'T2TClsHead with drloc reads a square grid of tokens, got {}; set '
        "out_type='raw' and with_cls_token=False (or out_type='featmap') in "
        'the backbone.'
    )

    def __init__(
        self,
        num_classes: int,
        in_channels: int,
        pool: str = 'token',
        drloc: Optional[dict] = None,
        init_cfg: Optional[dict] = dict(
            type='TruncNormal', layer='Linear', std=0.02, bias=0.0
        ),
        **kwargs,
    ) -> None:
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
        self.drloc_cfg = None
        if drloc is not None:
            unknown = sorted(set(drloc) - set(self.DRLOC_DEFAULTS))
            if unknown:
                raise ValueError(
                    f'Unknown drloc keys {unknown} of T2TClsHead; it takes '
                    f'{sorted(self.DRLOC_DEFAULTS)}.'
                )
            self.drloc_cfg = {**self.DRLOC_DEFAULTS, **drloc}
            hidden = self.drloc_cfg['hidden']
            self.drloc = nn.Sequential(
                nn.Linear(2 * in_channels, hidden),
                nn.ReLU(),
                nn.Linear(hidden, hidden),
                nn.ReLU(),
                nn.Linear(hidden, 2),
            )
        self._register_load_state_dict_pre_hook(self._prepare_checkpoint)

    def _prepare_checkpoint(
        self, state_dict: dict, prefix: str, local_metadata: dict, *args
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
            raise mismatch(
                f'The {CHECKPOINT} classifies {weight.shape[0]} classes, '
                f"this model's head {self.num_classes} (num_classes); "
                f'{FINE_TUNE_ADVICE}.',
                local_metadata,
                ClassCountError,
                classes=weight.shape[0],
                advice=FINE_TUNE_ADVICE,
            )
        # the localisation MLP only trains: a checkpoint may lack it (a run
        # that starts drloc from other weights) or hold it (a model built
        # for inference without it, which drops it)
        if self.drloc_cfg is None:
            mlp = prefix + 'drloc.'
            for key in [k for k in state_dict if str(k).startswith(mlp)]:
                del state_dict[key]
        own = self.state_dict(keep_vars=True)
        check_supplied_weights(
            type(self).__name__,
            own,
            state_dict,
            prefix,
            optional=[key for key in own if key.startswith('drloc.')],
            advice=FINE_TUNE_ADVICE,
            local_metadata=local_metadata,
        )

    def width_problem(
        self, width: int, key: str = 'model.head.in_channels'
    ) -> Optional[str]:
        """One line when the features' ``width`` is not the stated
        ``in_channels`` (a backbone of another arch than it was stated
        for), naming the config ``key`` to set; None when they agree."""
        if width == self.in_channels:
            return None
        return (
            f'T2TClsHead has in_channels={self.in_channels}, but the '
            f'backbone gives features of width {width}; set {key}={width}.'
        )

    def _check_width(self, width: int) -> None:
        problem = self.width_problem(width)
        if problem:
            raise ValueError(problem)

    def attention_pool_weights(self, tokens: torch.Tensor) -> torch.Tensor:
        """The weights ``(B, N, 1)`` that ``pool='attention'`` gives the
        tokens ``(B, N, C)``: a softmax over the tokens."""
        return self.attention_pool(tokens).softmax(dim=1)

    def token_grid(
        self, feats: Sequence[torch.Tensor]
    ) -> tuple[torch.Tensor, tuple[int, int]]:
        """The output tokens ``(B, N, C)`` and their grid ``(h, w)``: of a
        feature map, or of square raw tokens without a class token."""
        feat = feats[-1]
        if feat.dim() == 4:
            return feat.flatten(2).transpose(1, 2), tuple(feat.shape[2:])
        side = math.isqrt(feat.shape[1]) if feat.dim() == 3 else 0
        if side < 2 or side * side != feat.shape[1]:
            raise ValueError(
                self.GRID_ADVICE.format(
                    f'features of shape {tuple(feat.shape)}'
                )
            )
        return feat, (side, side)

    def grid_problem(
        self, out_type: str, with_cls_token: bool
    ) -> Optional[str]:
        """One line when ``drloc`` cannot read the token grid of a backbone
        of this ``out_type`` (with or without a class token), or None: the
        run checks it before training."""
        if self.drloc_cfg is None or out_type == 'featmap':
            return None
        if out_type == 'raw' and not with_cls_token:
            return None
        given = f"out_type='{out_type}'" + (
            ' with a class token' if out_type == 'raw' else ''
        )
        return self.GRID_ADVICE.format(given)

    def drloc_loss(self, feats: Sequence[torch.Tensor]) -> torch.Tensor:
        """The relative localisation loss (before ``weight``) of random
        token pairs, ``pairs`` per image."""
        tokens, (height, width) = self.token_grid(feats)
        batch, count = tokens.shape[:2]
        pairs = self.drloc_cfg['pairs']
        first, second = (
            torch.randint(count, (batch, pairs), device=tokens.device)
            for _ in range(2)
        )
        pick = torch.arange(batch, device=tokens.device)[:, None]
        both = torch.cat([tokens[pick, first], tokens[pick, second]], dim=-1)
        scale = torch.tensor([height, width], device=tokens.device)
        offset = (
            torch.stack(
                [
                    first // width - second // width,
                    first % width - second % width,
                ],
                dim=-1,
            )
            / scale
        ).to(tokens.dtype)
        return (self.drloc(both) - offset).abs().mean()

    def loss(
        self, feats: Sequence[torch.Tensor], data_samples: list, **kwargs
    ) -> dict:
        losses = super().loss(feats, data_samples, **kwargs)
        if self.drloc_cfg is not None:
            losses['loss_drloc'] = self.drloc_cfg['weight'] * self.drloc_loss(
                feats
            )
        return losses

    def pre_logits(self, feats: Sequence[torch.Tensor]) -> torch.Tensor:
        feat = feats[-1]
        if self.pool == 'attention':
            if feat.dim() == 4:  # (B, C, h, w) -> (B, h*w, C)
                feat = feat.flatten(2).transpose(1, 2)
            if feat.dim() != 3:
                raise ValueError(
                    "T2TClsHead with pool='attention' reads tokens (B, N, "
                    f'{self.in_channels}), got {tuple(feat.shape)}. Set '
                    "out_type='raw' (or 'featmap') in the backbone and "
                    'in_channels to its embed_dims.'
                )
            self._check_width(feat.shape[2])
            weights = self.attention_pool_weights(feat)
            return (weights.transpose(1, 2) @ feat).squeeze(1)
        if feat.dim() != 2:
            raise ValueError(
                'T2TClsHead reads the class token (B, '
                f'{self.in_channels}), got {tuple(feat.shape)}. Set '
                "out_type='cls_token' (or 'avg_featmap') in the backbone and "
                "in_channels to its embed_dims, or pool='attention' here."
            )
        self._check_width(feat.shape[1])
        return super().pre_logits(feats)
