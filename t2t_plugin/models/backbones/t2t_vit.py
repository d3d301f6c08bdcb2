import math
import re
from collections.abc import Sequence
from typing import Any, Optional, Union

import torch
import torch.utils.checkpoint as cp
from mmengine.logging import MMLogger
from mmengine.model import BaseModule, ModuleList, weight_init
from mmpretrain.models.utils import resize_pos_embed
from mmpretrain.registry import MODELS
from torch import nn

from t2t_preflight.archs import ARCH_ZOO, arch_names, resolve_arch
from t2t_preflight.errors import CheckpointError

from ..checkpoint_checks import (
    checkpoint_name,
    fit_backbone,
    missing_prefix_error,
    report_load,
)
from ..layers import SelfAttention, TransformerLayer, sinusoid_position_table
from ..option_checks import (
    ARCH_RULES,
    Rule,
    check_attn_init,
    check_bool,
    check_choice,
    check_fraction,
    check_int,
    check_keys,
    check_layer_cfg,
    check_options,
    check_out_indices,
    check_size,
)
from ..t2t import T2TModule


@MODELS.register_module()
class T2TViT(BaseModule):
    """Tokens-to-Token Vision Transformer.

    `Tokens-to-Token ViT <https://arxiv.org/abs/2101.11986>`_ with the
    exact math of the official release: the T2T module tokenises the image
    at stride 16, the fixed sinusoidal table is added to ``[cls_token;
    tokens]``, then a deep-narrow stack of pre-norm layers. The keys are
    those of mmpretrain's ``T2T_ViT``, whose checkpoints load unchanged.

    Args:
        arch (str | int | dict): An ``arch_zoo`` name (any case, optional
            ``'t2t-vit-'`` prefix, an int for numeric names, ``'@384'``
            suffix) or a dict with ``embed_dims``, ``num_layers``,
            ``num_heads`` (and optionally ``token_layer``,
            ``feedforward_channels`` or ``mlp_ratio``). Defaults to ``'14'``.
        img_size (int | tuple, optional): Input size of the position table;
            None: 224, or 384 for ``'@384'``. Defaults to None.
        in_channels (int): Image channels. Defaults to 3.
        out_indices (int | Sequence[int]): Encoder layers to output,
            negative from the end. Defaults to -1.
        out_type (str): ``'cls_token'``, ``'featmap'``, ``'avg_featmap'`` or
            ``'raw'``. Defaults to ``'cls_token'``.
        out_t2t_maps (bool): Also output the T2T module's stride-4 and
            stride-8 maps first, for dense prediction. Defaults to False.
        drop_rate (float): Dropout after the position table and in the
            encoder layers. Defaults to 0.
        attn_drop_rate (float): Encoder attention dropout. Defaults to 0.
        drop_path_rate (float): Stochastic depth, rising linearly over the
            encoder. Defaults to 0.
        qkv_bias (bool): Bias in the encoder qkv. Defaults to False.
        final_norm (bool): LayerNorm after the last layer. Defaults to True.
        with_cls_token (bool): Prepend a class token. Defaults to True.
        interpolate_mode (str): Position table resizing mode.
            Defaults to ``'bicubic'``.
        frozen_stages (int): 0 freezes the T2T module and class token, ``n``
            also the first ``n`` layers (and the final norm at full depth);
            -1 nothing. Defaults to -1.
        with_cp (bool): Activation checkpointing of every T2T and encoder
            layer. Defaults to False.
        t2t_cfg (dict): Extra :class:`T2TModule` arguments. Defaults to {}.
        layer_cfgs (dict | Sequence[dict]): Extra encoder layer arguments,
            for all or one per layer, e.g. ``dict(qk_scale=0.1)``; a
            ``type`` builds another registered layer (a subclass of
            :class:`TransformerLayer`). Defaults to {}.
        attn_scale (str): The factor on ``q.k`` in every attention layer:
            ``'official'``, ``(input_dims // heads) ** -0.5`` as the
            official release (the T2T layers' quirk included), or
            ``'mmpretrain'``, ``sqrt(head_dims)`` as mmpretrain 1.2.0's
            ``T2T_ViT`` computes it, whose checkpoints record it.
            Defaults to ``'official'``.
        attn_init (dict, optional): How the attention layers (encoder and
            transformer T2T layers) start, after the official
            initialisation: ``dict(type='mimetic')`` with optional
            ``alpha_qk``, ``beta_qk``, ``alpha_vo``, ``beta_vo`` (see
            :meth:`SelfAttention.mimetic_init_`). Defaults to None (the
            official trunc-normal weights).
        init_cfg (dict, optional): Initialisation config. Defaults to None
            (the official initialisation).
    """

    arch_zoo: dict[str, dict] = ARCH_ZOO
    OUT_TYPES = ('cls_token', 'featmap', 'avg_featmap', 'raw')
    ATTN_SCALES = ('official', 'mmpretrain')
    # the modes of F.interpolate for a 2-D table
    INTERPOLATE_MODES = (
        'bicubic',
        'bilinear',
        'nearest',
        'nearest-exact',
        'area',
    )
    num_extra_tokens = 1
    option_rules: dict[str, Rule] = dict(
        img_size=(check_size,),
        out_type=(check_choice, OUT_TYPES),
        attn_scale=(check_choice, ATTN_SCALES),
        **dict.fromkeys(
            ('out_t2t_maps', 'qkv_bias', 'final_norm', 'with_cls_token'),
            (check_bool,),
        ),
        with_cp=(check_bool,),
        **dict.fromkeys(
            ('drop_rate', 'attn_drop_rate', 'drop_path_rate'),
            (check_fraction,),
        ),
        in_channels=(check_int,),
        frozen_stages=(check_int, -1),
        interpolate_mode=(check_choice, INTERPOLATE_MODES),
    )

    def __init__(
        self,
        arch: Union[str, int, dict] = '14',
        img_size: Union[int, Sequence[int], None] = None,
        in_channels: int = 3,
        out_indices: Union[int, Sequence[int]] = -1,
        out_type: str = 'cls_token',
        out_t2t_maps: bool = False,
        drop_rate: float = 0.0,
        attn_drop_rate: float = 0.0,
        drop_path_rate: float = 0.0,
        qkv_bias: bool = False,
        final_norm: bool = True,
        with_cls_token: bool = True,
        interpolate_mode: str = 'bicubic',
        frozen_stages: int = -1,
        with_cp: bool = False,
        t2t_cfg: Optional[dict] = None,
        layer_cfgs: Union[dict, Sequence[dict], None] = None,
        attn_scale: str = 'official',
        attn_init: Optional[dict] = None,
        init_cfg: Optional[dict] = None,
    ) -> None:
        super().__init__(init_cfg=init_cfg)
        owner = type(self).__name__
        self.attn_init = check_attn_init(owner, attn_init)
        self.arch_settings = self.resolve_arch(arch)
        arch_img_size = self.arch_settings.pop('img_size', 224)
        img_size = arch_img_size if img_size is None else img_size
        check_options(owner, self.option_rules, locals())
        self.embed_dims = self.arch_settings['embed_dims']
        self.num_layers = self.arch_settings['num_layers']
        if out_type == 'cls_token' and not with_cls_token:
            raise ValueError(
                'out_type="cls_token" needs with_cls_token=True;'
                ' set one of them differently.'
            )
        self.out_type = out_type
        self.out_t2t_maps = out_t2t_maps
        self.with_cls_token = with_cls_token
        self.num_extra_tokens = int(with_cls_token)
        self.interpolate_mode = interpolate_mode
        self.final_norm = final_norm
        self.frozen_stages = frozen_stages
        self.with_cp = with_cp

        t2t_cfg = check_keys(
            owner, 't2t_cfg', t2t_cfg or {}, T2TModule.option_names()
        )
        clashes = {'img_size', 'in_channels', 'embed_dims'} & set(t2t_cfg)
        if clashes:
            raise ValueError(
                f'Set {sorted(clashes)} on the T2TViT backbone, not in '
                't2t_cfg: the backbone passes them to the T2T module.'
            )
        t2t_cfg.setdefault('token_layer', self.arch_settings['token_layer'])
        t2t_cfg.setdefault('with_cp', with_cp)
        self.tokens_to_token = T2TModule(
            img_size=img_size,
            in_channels=in_channels,
            embed_dims=self.embed_dims,
            **t2t_cfg,
        )
        self.patch_resolution = self.tokens_to_token.init_out_size

        if with_cls_token:
            self.cls_token = nn.Parameter(torch.zeros(1, 1, self.embed_dims))
        table = sinusoid_position_table(
            math.prod(self.patch_resolution) + self.num_extra_tokens,
            self.embed_dims,
        )
        self.register_buffer('pos_embed', table)
        self._register_load_state_dict_pre_hook(self._prepare_checkpoint)
        self.register_load_state_dict_post_hook(report_load)
        self.load_report: Optional[tuple[int, list[str], int]] = None
        self.drop_after_pos = nn.Dropout(p=drop_rate)

        self.out_indices = check_out_indices(
            owner, out_indices, self.num_layers
        )
        if frozen_stages > self.num_layers:
            raise ValueError(
                f'frozen_stages={frozen_stages} exceeds the '
                f'{self.num_layers} encoder layers of this arch.'
            )

        if isinstance(layer_cfgs, Sequence):
            if len(layer_cfgs) != self.num_layers:
                raise ValueError(
                    f'layer_cfgs has {len(layer_cfgs)} entries for '
                    f'{self.num_layers} encoder layers; give one per layer '
                    'or a single dict.'
                )
        else:
            layer_cfgs = [layer_cfgs or {}] * self.num_layers
        layer_cfgs = [
            check_layer_cfg(owner, cfg, TransformerLayer) for cfg in layer_cfgs
        ]
        common = dict(
            embed_dims=self.embed_dims,
            num_heads=self.arch_settings['num_heads'],
            feedforward_channels=self.arch_settings['feedforward_channels'],
            qkv_bias=qkv_bias,
            drop_rate=drop_rate,
            attn_drop_rate=attn_drop_rate,
        )
        rates = torch.linspace(0, drop_path_rate, self.num_layers).tolist()
        self.encoder = ModuleList(
            MODELS.build({**common, 'drop_path_rate': rate, **extra})
            for rate, extra in zip(rates, layer_cfgs)
        )
        self.norm = (
            nn.LayerNorm(self.embed_dims) if final_norm else nn.Identity()
        )
        self.attn_scale = attn_scale
        if attn_scale == 'mmpretrain':
            # mmpretrain's helper divides q.k by its scale, head_dims**-0.5
            for module in self.modules():
                if isinstance(module, SelfAttention):
                    module.scale = 1 / module.head_dims**-0.5
        self._freeze_stages()

    arch_names = staticmethod(arch_names)

    @classmethod
    def resolve_arch(cls, arch: Union[str, int, dict]) -> dict:
        """The settings of an arch name (``7``, ``'T2T-ViT-14'``,
        ``'14@384'``, which adds ``img_size``) or custom arch dict
        (:func:`t2t_preflight.archs.resolve_arch`), a custom arch's numbers
        checked as the backbone's options."""
        custom = isinstance(arch, dict)
        if custom:
            check_options(cls.__name__, ARCH_RULES, arch, 'arch.')
        settings = resolve_arch(arch)
        if custom:
            check_options(cls.__name__, ARCH_RULES, settings, 'arch.')
        return settings

    def init_weights(self) -> None:
        """The official initialisation (trunc-normal linears and class
        token, std 0.02), ``attn_init``, then ``init_cfg`` on top. A
        ``Pretrained`` prefix that finds nothing is one line
        (:func:`missing_prefix_error`), not mmengine's bare assertion."""
        for module in self.modules():
            if isinstance(module, nn.Linear):
                weight_init.trunc_normal_init(module, std=0.02, bias=0)
            elif isinstance(module, nn.LayerNorm):
                weight_init.constant_init(module, 1, bias=0)
        if self.with_cls_token:
            weight_init.trunc_normal_(self.cls_token, std=0.02)
        if self.attn_init is not None:
            for module in self.modules():
                if isinstance(module, SelfAttention):
                    module.mimetic_init_(**self.attn_init)
        if self.init_cfg is None:
            self._is_init = True
            return
        try:
            super().init_weights()
        except AssertionError:
            error = missing_prefix_error(
                type(self).__name__,
                self.init_cfg,
                'tokens_to_token.project.weight',
            )
            if error is None:
                raise
            raise error from None

    def arch_record(self) -> dict[str, Any]:
        """The arch as config keys and values, which a run records in its
        checkpoints' ``meta['t2t_arch']`` and a load compares: archs of
        the same weight shapes (other heads, strides) are told apart."""
        t2t = self.tokens_to_token
        return {
            'model.backbone.attn_scale': self.attn_scale,
            **{
                f'model.backbone.arch.{key}': value
                for key, value in self.arch_settings.items()
            },
            'model.backbone.arch.token_layer': t2t.token_layer,
            **{
                f'model.backbone.t2t_cfg.{key}': list(getattr(t2t, key))
                for key in ('kernel_sizes', 'strides', 'paddings')
            },
        }

    def _prepare_checkpoint(
        self, state_dict: dict, prefix: str, local_metadata: dict, *args
    ) -> None:
        self.load_report = fit_backbone(
            self, state_dict, prefix, self._resize_checkpoint_pos_embed
        )

    def _resize_checkpoint_pos_embed(
        self, state_dict: dict, prefix: str
    ) -> None:
        cls_key, pos_key = prefix + 'cls_token', prefix + 'pos_embed'
        if pos_key not in state_dict:
            return
        ckpt_pos = state_dict[pos_key]
        # a table of another rank or kind is refused by the fit check
        if (
            not isinstance(ckpt_pos, torch.Tensor)
            or not ckpt_pos.is_floating_point()
            or ckpt_pos.dim() != 3
            or ckpt_pos.shape == self.pos_embed.shape
        ):
            return
        # a table without a cls position comes from a with_cls_token=False
        # model; its grid part is what gets resized
        length = ckpt_pos.shape[1]
        candidates = (
            [1]
            if cls_key in state_dict
            else [self.num_extra_tokens, 1 - self.num_extra_tokens]
        )
        for extra in candidates:
            side = math.isqrt(max(length - extra, 0))
            if side > 0 and side * side == length - extra:
                break
        else:
            raise CheckpointError(
                'The position table of the '
                f'{checkpoint_name(state_dict, prefix)} has {length} '
                'positions, which is no square token grid (with or without '
                'a cls position), so its grid is unknown. Build the model '
                "with the checkpoint's img_size, or drop `pos_embed` from "
                "the checkpoint to keep this model's own sinusoidal table."
            )
        MMLogger.get_current_instance().info(
            f'Resize the position table from {tuple(ckpt_pos.shape)} to '
            f'{tuple(self.pos_embed.shape)}.'
        )
        grid = resize_pos_embed(
            ckpt_pos,
            (side, side),
            self.patch_resolution,
            self.interpolate_mode,
            extra,
        )[:, extra:]
        if extra == self.num_extra_tokens:
            head = ckpt_pos[:, :extra]
        else:
            head = self.pos_embed[:, : self.num_extra_tokens].to(ckpt_pos)
        state_dict[pos_key] = torch.cat((head, grid), dim=1)

    def _freeze_stages(self) -> None:
        if self.frozen_stages < 0:
            return
        frozen = [self.tokens_to_token, *self.encoder[: self.frozen_stages]]
        if self.frozen_stages == self.num_layers:
            frozen.append(self.norm)
        for module in frozen:
            module.eval()
            for param in module.parameters():
                param.requires_grad = False
        if self.with_cls_token:
            self.cls_token.requires_grad = False

    def train(self, mode: bool = True) -> 'T2TViT':
        super().train(mode)
        self._freeze_stages()
        return self

    def get_layer_depth(
        self, param_name: str, prefix: str = ''
    ) -> tuple[int, int]:
        """Depth of a parameter for layer-wise lr decay (0: T2T module,
        class token, table; ``i + 1``: encoder layer ``i``; then
        ``num_layers + 1``) and the number of depths."""
        num_depths = self.num_layers + 2
        name = (
            param_name[len(prefix) :] if param_name.startswith(prefix) else ''
        )
        if name.startswith(('cls_token', 'pos_embed', 'tokens_to_token')):
            return 0, num_depths
        match = re.match(r'encoder\.(\d+)\.', name)
        depth = int(match.group(1)) + 1 if match else num_depths - 1
        return depth, num_depths

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        tokens, grid, t2t_maps = self.tokens_to_token(x)
        if self.with_cls_token:
            cls_token = self.cls_token.expand(tokens.shape[0], -1, -1)
            tokens = torch.cat((cls_token, tokens), dim=1)
        pos_embed = resize_pos_embed(
            self.pos_embed,
            self.patch_resolution,
            grid,
            self.interpolate_mode,
            self.num_extra_tokens,
        )
        x = self.drop_after_pos(tokens + pos_embed.to(tokens.dtype))

        outs = list(t2t_maps) if self.out_t2t_maps else []
        for index, layer in enumerate(self.encoder):
            if self.with_cp and self.training and torch.is_grad_enabled():
                x = cp.checkpoint(layer, x, use_reentrant=False)
            else:
                x = layer(x)
            if index == self.num_layers - 1:
                x = self.norm(x)
            if index in self.out_indices:
                outs.append(self._format_output(x, grid))
        return tuple(outs)

    def _format_output(
        self, x: torch.Tensor, grid: tuple[int, int]
    ) -> torch.Tensor:
        if self.out_type == 'raw':
            return x
        if self.out_type == 'cls_token':
            return x[:, 0]
        patch_tokens = x[:, self.num_extra_tokens :]
        if self.out_type == 'avg_featmap':
            return patch_tokens.mean(dim=1)
        return patch_tokens.transpose(1, 2).reshape(x.shape[0], -1, *grid)
