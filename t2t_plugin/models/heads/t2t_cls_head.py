import logging
from collections.abc import Mapping, Sequence
from typing import Any, Optional

import torch
from mmengine.logging import MMLogger
from mmpretrain.models.heads import VisionTransformerClsHead
from mmpretrain.registry import MODELS
from torch import nn

from ..checkpoint_checks import check_fit, checkpoint_name, source_of
from ..option_checks import (
    Rule,
    check_choice,
    check_int,
    check_int_or_ints,
    check_options,
)

# what to do with a head that does not fit otherwise
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
    and a load hook that leaves out a checkpoint's classifier of another
    number of classes (a fine-tune: the head keeps its initialisation, and
    the log says so in one line); the doors that need the classifier (a
    test, an inference, a resume) refuse it
    (:func:`~t2t_plugin.runtime.checkpoint_fit.whole_model_error`).
    ``pool='attention'`` is CCT's sequence pooling (softmax over a linear
    score per token) of ``out_type='raw'`` or ``'featmap'`` outputs.

    The config states ``in_channels``, as mmpretrain's heads do; a width
    that does not match the features is refused at the first forward, in
    one line naming both and the key to set.

    A subclass may train auxiliary parts beside the classifier (an extra
    loss's MLP, as ``projects/small_data``'s localisation loss): named
    ``aux_*``, they are optional in a checkpoint, and a head without them
    drops them, so that a checkpoint trained with them serves inference.

    Args:
        num_classes (int): Number of classes.
        in_channels (int): Input width: the backbone's ``embed_dims``
            (384 for T2T-ViT-14).
        pool (str): ``'token'`` (the (B, C) vector of the backbone) or
            ``'attention'``. Defaults to ``'token'``.
        init_cfg (dict, optional): Defaults to trunc-normal (std 0.02)
            weights and zero bias.
        **kwargs: Other :class:`VisionTransformerClsHead` arguments, e.g.
            ``loss`` and ``topk``.
    """

    POOLS = ('token', 'attention')
    option_rules: dict[str, Rule] = dict(
        num_classes=(check_int,),
        in_channels=(check_int,),
        pool=(check_choice, POOLS),
        topk=(check_int_or_ints,),
    )
    # the name prefix of a subclass's training-only parts
    AUX_PREFIX = 'aux_'

    def __init__(
        self,
        num_classes: int,
        in_channels: int,
        pool: str = 'token',
        init_cfg: Optional[dict] = dict(
            type='TruncNormal', layer='Linear', std=0.02, bias=0.0
        ),
        **kwargs,
    ) -> None:
        owner = type(self).__name__
        check_options(owner, self.option_rules, {**locals(), **kwargs})
        super().__init__(
            num_classes=num_classes,
            in_channels=in_channels,
            init_cfg=init_cfg,
            **kwargs,
        )
        self.pool = pool
        if pool == 'attention':
            # one score per token; trunc-normal as the classifier (init_cfg)
            self.attention_pool = nn.Linear(in_channels, 1)
        self._register_load_state_dict_pre_hook(self._prepare_checkpoint)

    def checkpoint_classes(
        self, state_dict: Mapping[str, Any], prefix: str = ''
    ) -> Optional[int]:
        """The number of classes of the classifier in ``state_dict`` (its
        keys under ``prefix``) when it is not this head's, else None."""
        weight = state_dict.get(f'{prefix}layers.head.weight')
        if (
            isinstance(weight, torch.Tensor)
            and weight.dim() == 2
            and weight.shape[0] != self.num_classes
        ):
            return weight.shape[0]
        return None

    def _prepare_checkpoint(
        self, state_dict: dict, prefix: str, local_metadata: dict, *args
    ) -> None:
        classes = self.checkpoint_classes(state_dict, prefix)
        if classes is not None:
            # a fine-tune to other classes: the classifier keeps its own
            # weights (loaded onto themselves, so no loader reports them
            # missing). One warning per file: weights that no file gave
            # (the deep copy mmengine's EMAHook loads first) say it in the
            # log's info
            source = source_of(state_dict, prefix)
            MMLogger.get_current_instance().log(
                logging.WARNING if source else logging.INFO,
                f'The {checkpoint_name(state_dict, prefix)} classifies '
                f"{classes} classes, this model's head {self.num_classes} "
                '(num_classes): its classifier is not loaded and the head '
                'keeps its initialisation (a fine-tune to new classes).',
            )
            for name, value in self.layers.head.named_parameters():
                state_dict[f'{prefix}layers.head.{name}'] = value.detach()
        # training-only parts: a checkpoint may lack them (a run that
        # starts them from other weights) or hold them (a head built for
        # inference without them, which drops them)
        own = self.state_dict(keep_vars=True)
        aux = prefix + self.AUX_PREFIX
        for key in [k for k in state_dict if str(k).startswith(aux)]:
            if key[len(prefix) :] not in own:
                del state_dict[key]
        check_fit(
            type(self).__name__,
            own,
            state_dict,
            prefix,
            optional=[k for k in own if k.startswith(self.AUX_PREFIX)],
            advice=FINE_TUNE_ADVICE,
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
            f'{type(self).__name__} has in_channels={self.in_channels}, '
            f'but the backbone gives features of width {width}; set '
            f'{key}={width}.'
        )

    def backbone_problem(self, backbone: nn.Module) -> Optional[str]:
        """One line when this head cannot read the outputs of ``backbone``
        (a ``T2TViT``), checked before a run: its width. A subclass that
        reads more (a token grid) adds its own check."""
        return self.width_problem(backbone.embed_dims)

    def _check_width(self, width: int) -> None:
        problem = self.width_problem(width)
        if problem:
            raise ValueError(problem)

    def attention_pool_weights(self, tokens: torch.Tensor) -> torch.Tensor:
        """The weights ``(B, N, 1)`` that ``pool='attention'`` gives the
        tokens ``(B, N, C)``: a softmax over the tokens."""
        return self.attention_pool(tokens).softmax(dim=1)

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
