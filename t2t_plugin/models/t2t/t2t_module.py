import inspect
import math
from collections.abc import Sequence
from typing import Optional, Union

import torch
import torch.utils.checkpoint as cp
from mmengine.model import BaseModule
from mmpretrain.registry import MODELS
from torch import nn

from ..option_checks import (
    Rule,
    check_bool,
    check_fraction,
    check_int,
    check_ints,
    check_options,
    check_positive,
    check_size,
    nearest,
    optional,
)
from .soft_split import SoftSplit

# the product's token layers by name, each a class registered in MODELS
TOKEN_LAYERS = {
    'transformer': 'TokenTransformer',
    'performer': 'TokenPerformer',
    'convolution': 'TokenConvolution',
}


def soft_split_sizes(
    size: Sequence[int],
    kernel_sizes: Sequence[int],
    strides: Sequence[int],
    paddings: Sequence[int],
) -> list[tuple[int, int]]:
    """Token grids after each soft split of an ``(H, W)`` input (ValueError
    where a split does not tile its input); pure, so that runtimes of
    exported models refuse the same sizes."""
    if min(size) < 1:
        raise ValueError(
            f'T2T-ViT needs a non-empty image, got a '
            f'{size[0]}x{size[1]} input.'
        )
    kernel_sizes, strides, paddings = map(
        tuple, (kernel_sizes, strides, paddings)
    )
    sizes = []
    current = tuple(size)
    for kernel, stride, padding in zip(kernel_sizes, strides, paddings):
        out = tuple(
            (side + 2 * padding - kernel) // stride + 1 for side in current
        )
        if any(o * stride != side for o, side in zip(out, current)):
            total = math.prod(strides)
            fit = tuple(math.ceil(side / total) * total for side in size)
            raise ValueError(
                f'T2T-ViT cannot tile a {size[0]}x{size[1]} input: its '
                f'soft splits (kernels {kernel_sizes}, strides '
                f'{strides}, paddings {paddings}) need both '
                f'sides to be multiples of {total}. Resize or pad the '
                f'image, e.g. to {fit[0]}x{fit[1]}.'
            )
        sizes.append(out)
        current = out
    return sizes


@MODELS.register_module()
class T2TModule(BaseModule):
    """Tokens-to-Token module: progressive tokenisation of the image.

    Three soft splits alternate with two T2T layers whose tokens are
    re-structured into maps::

        image -> split0 -> layer1 -> map (stride 4) -> split1 -> layer2
              -> map (stride 8) -> split2 -> linear projection (stride 16)

    ``token_layer='convolution'`` (Table 7 of the paper) makes the splits
    and the projection convolutions of the same geometry: together one
    linear map of the pixels.

    The class of the two T2T layers comes from mmpretrain's ``MODELS``: a
    ``token_layer`` that is not one of :data:`TOKEN_LAYERS` names a
    registered class (a project's), built as the product's are. A class
    with ``reads_map = False`` reads the tokens of a soft split:
    ``cls(in_dims, token_dims, **options)``, ``options`` being those of
    ``mlp_ratio``, ``kernel_ratio`` and ``drop_rate`` that its constructor
    names (``drop_rate=None``: the layer's own default); one with
    ``reads_map = True`` replaces the split and reads the map ``(B, C, H,
    W)``, built as ``nn.Conv2d`` of the split's geometry, and the
    projection is then a convolution too.

    Args:
        img_size (int | tuple): Sets ``init_out_size``. Defaults to 224.
        in_channels (int): Image channels. Defaults to 3.
        embed_dims (int): Output token width. Defaults to 384.
        token_dims (int): Width between the T2T layers. Defaults to 64.
        token_layer (str): ``'transformer'``, ``'performer'``,
            ``'convolution'``, or the registered type of a token layer.
            Defaults to ``'performer'``.
        kernel_sizes (Sequence[int]): Soft split kernels.
            Defaults to ``(7, 3, 3)``.
        strides (Sequence[int]): Their strides. Defaults to ``(4, 2, 2)``.
        paddings (Sequence[int]): Their paddings. Defaults to ``(2, 1, 1)``.
        mlp_ratio (float): Transformer T2T FFN ratio. Defaults to 1.
        kernel_ratio (float): Performer random features per token dim.
            Defaults to 0.5.
        drop_rate (float, optional): T2T layer dropout. Defaults to the
            official 0.1 for the performer, 0 otherwise.
        with_cp (bool): Activation checkpointing of the two T2T layers.
            Defaults to False.
        init_cfg (dict, optional): Initialisation config. Defaults to None.
    """

    option_rules: dict[str, Rule] = dict(
        img_size=(check_size,),
        in_channels=(check_int,),
        embed_dims=(check_int,),
        token_dims=(check_int,),
        kernel_sizes=(check_ints, 3),
        strides=(check_ints, 3),
        paddings=(check_ints, 3, 0),
        mlp_ratio=(check_positive,),
        kernel_ratio=(check_positive,),
        drop_rate=(optional(check_fraction),),
        with_cp=(check_bool,),
    )

    def __init__(
        self,
        img_size: Union[int, Sequence[int]] = 224,
        in_channels: int = 3,
        embed_dims: int = 384,
        token_dims: int = 64,
        token_layer: str = 'performer',
        kernel_sizes: Sequence[int] = (7, 3, 3),
        strides: Sequence[int] = (4, 2, 2),
        paddings: Sequence[int] = (2, 1, 1),
        mlp_ratio: float = 1.0,
        kernel_ratio: float = 0.5,
        drop_rate: Optional[float] = None,
        with_cp: bool = False,
        init_cfg: Optional[dict] = None,
    ) -> None:
        super().__init__(init_cfg=init_cfg)
        owner = type(self).__name__
        layer_cls = self.token_layer_class(token_layer)
        checked = check_options(owner, self.option_rules, locals())
        img_size = checked['img_size']
        self.kernel_sizes = checked['kernel_sizes']
        self.strides = checked['strides']
        self.paddings = checked['paddings']
        self.with_cp = with_cp
        self.in_channels = in_channels
        self.embed_dims = embed_dims
        self.token_dims = token_dims
        self.token_layer = token_layer
        self.reads_map = layer_cls.reads_map

        split_args = list(zip(self.kernel_sizes, self.strides, self.paddings))
        if self.reads_map:
            widths = (in_channels, token_dims, token_dims, embed_dims)
            self.soft_split0, self.soft_split1 = (
                layer_cls(widths[i], widths[i + 1], *split_args[i])
                for i in range(2)
            )
            self.project = nn.Conv2d(widths[2], widths[3], *split_args[2])
        else:
            self.soft_split0, self.soft_split1, self.soft_split2 = (
                SoftSplit(*args) for args in split_args
            )
            accepted = inspect.signature(layer_cls).parameters
            given = dict(
                mlp_ratio=mlp_ratio,
                kernel_ratio=kernel_ratio,
                drop_rate=drop_rate,
            )
            options = {
                name: value
                for name, value in given.items()
                if name in accepted and value is not None
            }
            self.attention1, self.attention2 = (
                layer_cls(dims, token_dims, **options)
                for dims in (
                    in_channels * self.kernel_sizes[0] ** 2,
                    token_dims * self.kernel_sizes[1] ** 2,
                )
            )
            self.project = nn.Linear(
                token_dims * self.kernel_sizes[2] ** 2, embed_dims
            )
        self.init_out_size = self.output_sizes(img_size)[-1]

    @classmethod
    def option_names(cls) -> list[str]:
        """The arguments of the constructor."""
        return [
            name
            for name in inspect.signature(cls).parameters
            if name not in ('self', 'args', 'kwargs')
        ]

    @staticmethod
    def token_layer_class(token_layer: str) -> type:
        """The registered class of a ``token_layer`` name or type; one line
        naming the product's names (and the nearest) for another."""
        name = TOKEN_LAYERS.get(token_layer, token_layer)
        layer_cls = MODELS.get(name) if isinstance(name, str) else None
        if getattr(layer_cls, 'reads_map', None) is None:
            close = nearest(token_layer, TOKEN_LAYERS)
            hint = f" (did you mean '{close}'?)" if close else ''
            raise ValueError(
                f'T2TModule got token_layer={token_layer!r}; choose one of '
                f'{", ".join(repr(n) for n in TOKEN_LAYERS)}{hint}, or the '
                'registered type of a token layer (a class with reads_map).'
            )
        return layer_cls

    @property
    def total_stride(self) -> int:
        return math.prod(self.strides)

    def output_sizes(self, size: tuple[int, int]) -> list[tuple[int, int]]:
        """:func:`soft_split_sizes` of this module's splits."""
        return soft_split_sizes(
            size, self.kernel_sizes, self.strides, self.paddings
        )

    def _run_layer(self, layer: nn.Module, x: torch.Tensor) -> torch.Tensor:
        if self.with_cp and self.training and torch.is_grad_enabled():
            return cp.checkpoint(layer, x, use_reentrant=False)
        return layer(x)

    def forward(
        self, x: torch.Tensor
    ) -> tuple[torch.Tensor, tuple[int, int], list[torch.Tensor]]:
        """Images ``(B, C, H, W)`` -> tokens ``(B, h*w, embed_dims)``, their
        grid ``(h, w)`` and the two intermediate maps ``(B, token_dims, H/4,
        W/4)``, ``(B, token_dims, H/8, W/8)`` (views, not copies)."""
        if x.dim() != 4 or x.shape[1] != self.in_channels:
            raise ValueError(
                f'T2T-ViT expects images of shape (B, {self.in_channels}, H, '
                f'W), got {tuple(x.shape)}. Set `in_channels` in the backbone '
                'config to the number of image channels.'
            )
        sizes = self.output_sizes(x.shape[-2:])
        batch = x.shape[0]
        maps = []
        if self.reads_map:
            for step in range(2):
                x = getattr(self, f'soft_split{step}')(x)
                maps.append(x)
            tokens = self.project(x).flatten(2).transpose(1, 2)
            return tokens, sizes[2], maps
        # maps stay channels-last, (B, H, W, C), the layout of the tokens
        x = x.permute(0, 2, 3, 1)
        for step, layer in enumerate((self.attention1, self.attention2)):
            split = getattr(self, f'soft_split{step}')
            tokens = self._run_layer(layer, split(x))
            x = tokens.view(batch, *sizes[step], self.token_dims)
            maps.append(x.permute(0, 3, 1, 2))
        tokens = self.project(self.soft_split2(x))
        return tokens, sizes[2], maps
