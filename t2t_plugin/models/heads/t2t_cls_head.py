from collections.abc import Sequence
from typing import Optional

import torch
from mmpretrain.models.heads import VisionTransformerClsHead
from mmpretrain.registry import MODELS

from ..checkpoint_checks import (
    CheckpointMismatchError,
    check_supplied_weights,
    checkpoint_name,
)

# what to do instead of loading a checkpoint with another classifier
FINE_TUNE_ADVICE = (
    'to fine-tune with a new head, start the backbone only: '
    "model.backbone.init_cfg=dict(type='Pretrained', checkpoint=FILE, "
    "prefix='backbone.') and no load_from"
)


@MODELS.register_module()
class T2TClsHead(VisionTransformerClsHead):
    """The T2T-ViT classifier: one linear layer on the class token.

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

    Losses, soft labels from mixup / cutmix (``gt_score``), label smoothing
    and top-k accuracy come from mmpretrain's ``ClsHead``.

    Args:
        num_classes (int): Number of classes.
        in_channels (int): Width of the class token (the arch's embed_dims).
        init_cfg (dict, optional): Defaults to trunc-normal (std 0.02)
            weights and zero bias, as the official code.
        **kwargs: Other arguments of :class:`VisionTransformerClsHead`, e.g.
            ``loss`` (defaults to cross entropy) and ``topk`` (defaults to
            ``(1, )``).
    """

    def __init__(
        self,
        num_classes: int,
        in_channels: int,
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
        self._register_load_state_dict_pre_hook(self._prepare_checkpoint)

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
        """The class token of the last backbone output, ``(B, C)``."""
        cls_token = feats[-1]
        if cls_token.dim() != 2 or cls_token.shape[1] != self.in_channels:
            raise ValueError(
                'T2TClsHead reads the class token (B, '
                f'{self.in_channels}), got {tuple(cls_token.shape)}. Set '
                "out_type='cls_token' in the backbone and in_channels to its "
                'embed_dims.'
            )
        return super().pre_logits(feats)
