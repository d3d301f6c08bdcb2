from collections.abc import Sequence
from typing import Optional, Union

import torch
from mmengine.model import BaseModule
from mmpretrain.models.utils import build_norm_layer
from mmpretrain.registry import MODELS
from torch import nn

from ..checkpoint_checks import check_fit
from ..option_checks import Rule, check_int_or_ints, check_options


@MODELS.register_module()
class T2TFeaturePyramid(BaseModule):
    """Four-level feature pyramid (strides 4, 8, 16, 32) from a T2T-ViT.

    A plain ViT has only a stride-16 map, so its dense necks invent finer
    levels. The T2T module really computes maps at strides 4 and 8; this
    neck uses them::

        T2T map, stride 4 (token_dims)  -> block -> level 0 (stride 4)
        T2T map, stride 8 (token_dims)  -> block -> level 1 (stride 8)
        encoder map(s), stride 16       -> block -> level 2 (stride 16)
        encoder map(s), 2x2 max pool    -> block -> level 3 (stride 32)

    Each block is ViTDet's (1x1 conv + norm, 3x3 conv + norm); several
    encoder maps are concatenated first. Feed it from ``T2TViT(out_type=
    'featmap', out_t2t_maps=True)``; its output suits mmdet's ``FPN`` or
    mmseg's ``UPerHead``. Leave out levels a head does not read with
    ``out_indices``, so that no parameter goes unused under DDP.

    A checkpoint that holds the neck's weights must fit them (the fit
    check of every part); one without them leaves the neck new.

    The config states ``in_channels``, as mmdet's and mmseg's necks do;
    widths that do not match the backbone's outputs are refused at the
    first forward, in one line naming both and the key to set.

    Args:
        in_channels (Sequence[int]): Widths of the backbone outputs: the
            two T2T maps (the backbone's ``t2t_cfg.token_dims``, 64 for
            every named arch), then the encoder maps (its ``embed_dims``),
            e.g. ``(64, 64, 384)`` for T2T-ViT-14.
        out_channels (int | Sequence[int]): Width of each output level, or
            one for all. Defaults to 256.
        out_indices (Sequence[int]): Levels to build and output (0-3 for
            strides 4-32). Defaults to all four.
        norm_cfg (dict): Norm after each conv (mmpretrain's
            ``build_norm_layer``). Defaults to ``dict(type='LN2d',
            eps=1e-6)``.
        init_cfg (dict | list[dict], optional): Initialisation config.
            Defaults to Xavier-uniform convs, as mmdet's ``FPN``.
    """

    option_rules: dict[str, Rule] = dict(
        in_channels=(check_int_or_ints,), out_channels=(check_int_or_ints,)
    )

    def __init__(
        self,
        in_channels: Sequence[int],
        out_channels: Union[int, Sequence[int]] = 256,
        out_indices: Sequence[int] = (0, 1, 2, 3),
        norm_cfg: dict = dict(type='LN2d', eps=1e-6),
        init_cfg: Optional[Union[dict, list[dict]]] = dict(
            type='Xavier', layer='Conv2d', distribution='uniform'
        ),
    ) -> None:
        super().__init__(init_cfg=init_cfg)
        owner = type(self).__name__
        if isinstance(in_channels, (str, bytes)) or not isinstance(
            in_channels, Sequence
        ):
            raise ValueError(
                f'{owner} got in_channels={in_channels!r}; give the widths '
                'of the backbone outputs, e.g. (64, 64, 384).'
            )
        in_channels = tuple(in_channels)
        if len(in_channels) < 3:
            raise ValueError(
                'T2TFeaturePyramid needs the two T2T maps and at least one '
                f'encoder map, got in_channels={in_channels}. Build the '
                "backbone with out_t2t_maps=True and out_type='featmap', and "
                'list the widths of all its outputs, e.g. (64, 64, 384).'
            )
        out_indices = tuple(out_indices)
        if (
            not out_indices
            or sorted(set(out_indices)) != list(out_indices)
            or not set(out_indices) <= {0, 1, 2, 3}
        ):
            raise ValueError(
                'out_indices must list pyramid levels in increasing order, '
                'each 0, 1, 2 or 3 (strides 4, 8, 16, 32), got '
                f'{out_indices}.'
            )
        if isinstance(out_channels, int) and not isinstance(
            out_channels, bool
        ):
            out_channels = (out_channels,) * len(out_indices)
        out_channels = tuple(out_channels)
        check_options(owner, self.option_rules, locals())
        if len(out_channels) != len(out_indices):
            raise ValueError(
                f'out_channels needs one width per output level '
                f'(out_indices={out_indices}) or one int for all, got '
                f'{out_channels}.'
            )
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.out_indices = out_indices
        self.out_strides = tuple(4 * 2**index for index in out_indices)

        encoder_channels = sum(in_channels[2:])
        level_inputs = (*in_channels[:2], encoder_channels, encoder_channels)
        self.downsample = nn.MaxPool2d(2, ceil_mode=True)
        self.levels = nn.ModuleList(
            self._block(level_inputs[index], out_dims, norm_cfg)
            for index, out_dims in zip(out_indices, out_channels)
        )
        self._register_load_state_dict_pre_hook(self._check_checkpoint)

    def _check_checkpoint(self, state_dict: dict, prefix: str, *args) -> None:
        # a checkpoint without this neck (a classifier's, for a detector)
        # leaves it new; one that holds it must fit it whole
        if any(str(key).startswith(prefix) for key in state_dict):
            own = self.state_dict(keep_vars=True)
            batches = [k for k in own if k.endswith('.num_batches_tracked')]
            check_fit(
                type(self).__name__, own, state_dict, prefix, optional=batches
            )

    @staticmethod
    def backbone_widths(backbone: nn.Module) -> Optional[tuple[int, ...]]:
        """The widths of a ``T2TViT``'s outputs (ValueError if they are no
        maps), None for another backbone."""
        t2t = getattr(backbone, 'tokens_to_token', None)
        if t2t is None or not hasattr(backbone, 'out_indices'):
            return None
        if backbone.out_type != 'featmap':
            raise ValueError(
                "T2TFeaturePyramid needs the backbone's maps, got a T2TViT "
                f'with out_type={backbone.out_type!r}. Build it with '
                "out_type='featmap' and out_t2t_maps=True."
            )
        widths = (backbone.embed_dims,) * len(backbone.out_indices)
        if backbone.out_t2t_maps:
            widths = (t2t.token_dims,) * 2 + widths
        return widths

    def width_problem(
        self, widths: Sequence[int], key: Optional[str] = None
    ) -> Optional[str]:
        """One line when the backbone's output ``widths`` are not the
        stated ``in_channels`` (a backbone of another arch than they were
        stated for), naming the config ``key`` to set; None when they
        agree or differ in number (the backbone returns other outputs)."""
        widths = tuple(widths)
        if len(widths) != len(self.in_channels) or widths == self.in_channels:
            return None
        stated = '[' + ','.join(str(width) for width in widths) + ']'
        where = (
            f'{key}={stated}'
            if key
            else f'model.neck.in_channels={stated} (model.neck.0.in_channels '
            'where the config lists several necks)'
        )
        return (
            f'T2TFeaturePyramid has in_channels={self.in_channels}, but the '
            f'backbone outputs have widths {widths}; set {where}.'
        )

    @staticmethod
    def _block(in_dims: int, out_dims: int, norm_cfg: dict) -> nn.Sequential:
        # No conv bias: each conv is followed by a norm with its own shift.
        return nn.Sequential(
            nn.Conv2d(in_dims, out_dims, 1, bias=False),
            build_norm_layer(norm_cfg, out_dims),
            nn.Conv2d(out_dims, out_dims, 3, padding=1, bias=False),
            build_norm_layer(norm_cfg, out_dims),
        )

    def forward(
        self, inputs: Sequence[torch.Tensor]
    ) -> tuple[torch.Tensor, ...]:
        """The T2T maps and encoder maps -> one map per ``out_indices``
        entry, at ``out_strides``."""
        self._check_inputs(inputs)
        encoder_map = torch.cat(list(inputs[2:]), dim=1)
        level_inputs = (*inputs[:2], encoder_map, encoder_map)
        outs = []
        for index, level in zip(self.out_indices, self.levels):
            x = level_inputs[index]
            if index == 3:
                x = self.downsample(x)
            outs.append(level(x))
        return tuple(outs)

    def _check_inputs(self, inputs: Sequence[torch.Tensor]) -> None:
        widths = tuple(x.shape[1] for x in inputs)
        maps = all(x.dim() == 4 for x in inputs)
        problem = maps and self.width_problem(widths)
        if problem:
            raise ValueError(problem)
        if not maps or widths != self.in_channels:
            raise ValueError(
                f'T2TFeaturePyramid expects inputs of widths '
                f'{self.in_channels}, got {widths}. Make the backbone return '
                'the T2T maps and the encoder maps (out_t2t_maps=True, '
                "out_type='featmap') and match in_channels to them."
            )
        # The T2T module tiles its input exactly, so each map is exactly
        # half the previous one.
        sizes = [tuple(x.shape[-2:]) for x in inputs]
        height, width = sizes[0]
        expected = [(height, width), (height // 2, width // 2)]
        expected += [(height // 4, width // 4)] * (len(sizes) - 2)
        if height % 4 or width % 4 or sizes != expected:
            raise ValueError(
                'T2TFeaturePyramid expects maps at strides 4, 8 and 16 '
                f'(each half the size of the previous one), got sizes '
                f'{sizes}. Use the default T2T soft-split strides (4, 2, 2).'
            )
