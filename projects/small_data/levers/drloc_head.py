import math
from collections.abc import Sequence
from typing import Optional

import torch
from mmpretrain.registry import MODELS
from torch import nn

from t2t_plugin.models.heads import T2TClsHead
from t2t_plugin.models.option_checks import (
    check_int,
    check_keys,
    check_positive,
)


@MODELS.register_module()
class DRLocClsHead(T2TClsHead):
    """:class:`T2TClsHead` trained with the dense relative localisation
    loss (Liu et al., NeurIPS 2021, "Efficient training of visual
    transformers with small datasets").

    While training, an MLP reads random pairs of output tokens, ``pairs``
    per image, and regresses their offset on the token grid; its L1 error
    times ``weight`` is added to the loss as ``loss_drloc``. The MLP
    (``aux_drloc``) trains only: inference, export and MACs are those of
    the head without it, and a :class:`T2TClsHead` loads a checkpoint of
    this head, dropping the MLP. It reads the grid of output tokens: raw
    tokens without a class token (``out_type='raw'``,
    ``with_cls_token=False``), or a feature map; a backbone with a class
    token in its raw tokens is refused in one line before training.

    Args:
        drloc (dict): ``weight`` (a finite number in (0, 10], default 0.1),
            ``pairs`` (token pairs per image, 1 to 4096, default 64) and
            ``hidden`` (the MLP's width, 1 to 4096, default 512); any key
            may be left out. Defaults to ``{}``.
        **kwargs: The :class:`T2TClsHead` arguments.
    """

    DEFAULTS = dict(weight=0.1, pairs=64, hidden=512)
    # the loss weight, and the sizes whose memory grows with them
    MAX_WEIGHT = 10.0
    MAX_PAIRS = 4096
    MAX_HIDDEN = 4096
    GRID_ADVICE = (
        'DRLocClsHead reads a square grid of tokens, got {}; set '
        "out_type='raw' and with_cls_token=False (or out_type='featmap') in "
        'the backbone.'
    )

    def __init__(self, *args, drloc: Optional[dict] = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        owner = type(self).__name__
        cfg = {
            **self.DEFAULTS,
            **check_keys(owner, 'drloc', drloc or {}, self.DEFAULTS),
        }
        check_positive(owner, 'drloc.weight', cfg['weight'], self.MAX_WEIGHT)
        check_int(owner, 'drloc.pairs', cfg['pairs'], 1, self.MAX_PAIRS)
        check_int(owner, 'drloc.hidden', cfg['hidden'], 1, self.MAX_HIDDEN)
        self.drloc_cfg = cfg
        hidden = cfg['hidden']
        self.aux_drloc = nn.Sequential(
            nn.Linear(2 * self.in_channels, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, 2),
        )

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

    def backbone_problem(self, backbone: nn.Module) -> Optional[str]:
        """The width, then whether the backbone's ``out_type`` (with or
        without a class token) gives a token grid."""
        problem = super().backbone_problem(backbone)
        out_type = backbone.out_type
        if problem or out_type == 'featmap':
            return problem
        if out_type == 'raw' and not backbone.with_cls_token:
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
        return (self.aux_drloc(both) - offset).abs().mean()

    def loss(
        self, feats: Sequence[torch.Tensor], data_samples: list, **kwargs
    ) -> dict:
        losses = super().loss(feats, data_samples, **kwargs)
        losses['loss_drloc'] = self.drloc_cfg['weight'] * self.drloc_loss(
            feats
        )
        return losses
