import math
import re
from collections.abc import Mapping, Sequence
from typing import Optional, Union

import torch
import torch.utils.checkpoint as cp
from mmengine.logging import MMLogger
from mmengine.model import BaseModule, ModuleList
from mmengine.model.weight_init import trunc_normal_
from mmengine.runner import CheckpointLoader
from mmpretrain.registry import MODELS
from torch import nn

from ...converters.official import (
    CONTAINER_KEYS,
    official_to_plugin,
    strip_module_prefix,
)
from ..checkpoint_checks import (
    CheckpointMismatchError,
    check_supplied_weights,
    checkpoint_name,
    prefix_not_found_message,
)
from ..layers import (
    TransformerLayer,
    resize_pos_embed,
    sinusoid_position_table,
)
from ..t2t import T2TModule


def _arch(
    token_layer: str,
    embed_dims: int,
    num_layers: int,
    num_heads: int,
    mlp_ratio: float,
) -> dict:
    return dict(
        token_layer=token_layer,
        embed_dims=embed_dims,
        num_layers=num_layers,
        num_heads=num_heads,
        feedforward_channels=int(embed_dims * mlp_ratio),
    )


@MODELS.register_module()
class T2TViT(BaseModule):
    """Tokens-to-Token Vision Transformer.

    A PyTorch implementation of `Tokens-to-Token ViT: Training Vision
    Transformers from Scratch on ImageNet <https://arxiv.org/abs/2101.11986>`_
    with the exact math of the official release: the T2T module
    (:class:`T2TModule`) tokenises the image at stride 16, the fixed sinusoidal
    position table is added to ``[cls_token; tokens]``, and a deep-narrow
    stack of pre-norm transformer layers follows.

    The state dict uses the key layout of mmpretrain's ``T2T_ViT``
    (``tokens_to_token.*``, ``encoder.N.*``, ``norm``), so its checkpoints
    load unchanged; performer variants add ``attn.kqv`` and the fixed
    ``attn.random_matrix`` to the T2T layers.

    Args:
        arch (str | int | dict): A name from ``arch_zoo`` (``'7'``,
            ``'10'``, ``'12'``, ``'14'``, ``'19'``, ``'24'``, ``'t-14'``,
            ``'t-19'``, ``'t-24'``, ``'14-resnext'``, ``'14-wide'``), spelt
            in any case, with or without a ``'t2t-vit-'`` prefix, as an int
            for the numeric ones (``7``, as ``--cfg-options`` delivers it),
            and with an ``'@384'`` suffix for the paper's 384-pixel models;
            or a dict with ``token_layer``, ``embed_dims``, ``num_layers``,
            ``num_heads`` and ``feedforward_channels``. Defaults to ``'14'``.
        img_size (int | tuple, optional): Input size the position table is
            built for; other sizes resize it on the fly. None takes 224, or
            384 for an ``'@384'`` arch name. Defaults to None.
        in_channels (int): Image channels. Defaults to 3.
        out_indices (int | Sequence[int]): Encoder layers to output, negative
            counts from the end. Defaults to -1.
        out_type (str): ``'cls_token'`` (B, C), ``'featmap'`` (B, C, h, w),
            ``'avg_featmap'`` (B, C) or ``'raw'`` (B, 1 + h*w, C).
            Defaults to ``'cls_token'``.
        out_t2t_maps (bool): Put the T2T module's stride-4 and stride-8 maps
            ``(B, token_dims, H/4, W/4)``, ``(B, token_dims, H/8, W/8)`` in
            front of the encoder outputs, for dense prediction.
            Defaults to False.
        drop_rate (float): Dropout after the position table and inside the
            encoder layers. Defaults to 0.
        attn_drop_rate (float): Dropout on encoder attention weights.
            Defaults to 0.
        drop_path_rate (float): Stochastic depth, increasing linearly over
            the encoder layers. Defaults to 0.
        qkv_bias (bool): Bias in the encoder qkv projections.
            Defaults to False.
        final_norm (bool): LayerNorm after the last encoder layer.
            Defaults to True.
        with_cls_token (bool): Prepend a class token. Defaults to True.
        interpolate_mode (str): Mode for resizing the position table.
            Defaults to ``'bicubic'``.
        frozen_stages (int): Stages to freeze: 0 freezes the T2T module and
            the class token, ``n`` also the first ``n`` encoder layers (and the
            final norm when ``n`` is the depth). -1 freezes nothing.
            Defaults to -1.
        with_cp (bool): Activation checkpointing of every T2T and encoder
            layer (less training memory, one more forward). Defaults to False.
        t2t_cfg (dict): Extra arguments of :class:`T2TModule`, e.g.
            ``token_layer``, ``token_dims``, ``kernel_sizes``, ``strides``,
            ``paddings``. Defaults to ``{}``.
        layer_cfgs (dict | Sequence[dict]): Extra arguments of the encoder
            layers, one dict for all or one per layer. Defaults to ``{}``.
        init_cfg (dict, optional): Initialisation config, e.g.
            ``dict(type='Pretrained', checkpoint=..., prefix='backbone.')``.
            Defaults to None (the official initialisation).
    """

    arch_zoo: dict[str, dict] = {
        **dict.fromkeys(['7', 't2t-vit-7'], _arch('performer', 256, 7, 4, 2)),
        **dict.fromkeys(
            ['10', 't2t-vit-10'], _arch('performer', 256, 10, 4, 2)
        ),
        **dict.fromkeys(
            ['12', 't2t-vit-12'], _arch('performer', 256, 12, 4, 2)
        ),
        **dict.fromkeys(
            ['14', 't2t-vit-14'], _arch('performer', 384, 14, 6, 3)
        ),
        **dict.fromkeys(
            ['19', 't2t-vit-19'], _arch('performer', 448, 19, 7, 3)
        ),
        **dict.fromkeys(
            ['24', 't2t-vit-24'], _arch('performer', 512, 24, 8, 3)
        ),
        **dict.fromkeys(
            ['t-14', 't2t-vit-t-14'], _arch('transformer', 384, 14, 6, 3)
        ),
        **dict.fromkeys(
            ['t-19', 't2t-vit-t-19'], _arch('transformer', 448, 19, 7, 3)
        ),
        **dict.fromkeys(
            ['t-24', 't2t-vit-t-24'], _arch('transformer', 512, 24, 8, 3)
        ),
        **dict.fromkeys(
            ['14-resnext', 't2t-vit-14-resnext'],
            _arch('performer', 384, 14, 32, 3),
        ),
        **dict.fromkeys(
            ['14-wide', 't2t-vit-14-wide'], _arch('performer', 768, 4, 12, 3)
        ),
    }
    OUT_TYPES = ('cls_token', 'featmap', 'avg_featmap', 'raw')
    num_extra_tokens = 1

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
        init_cfg: Optional[dict] = None,
    ) -> None:
        super().__init__(init_cfg=init_cfg)
        self.arch_settings = self.resolve_arch(arch)
        if img_size is None:
            img_size = self.arch_settings.pop('img_size', 224)
        else:
            self.arch_settings.pop('img_size', None)
        self.embed_dims = self.arch_settings['embed_dims']
        self.num_layers = self.arch_settings['num_layers']
        if out_type not in self.OUT_TYPES:
            raise ValueError(
                f'Unknown out_type {out_type!r}; choose one of '
                f'{self.OUT_TYPES}.'
            )
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

        t2t_cfg = dict(t2t_cfg or {})
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
        num_positions = (
            self.patch_resolution[0] * self.patch_resolution[1]
            + self.num_extra_tokens
        )
        self.register_buffer(
            'pos_embed',
            sinusoid_position_table(num_positions, self.embed_dims),
        )
        self._register_load_state_dict_pre_hook(self._prepare_checkpoint)
        self.register_load_state_dict_post_hook(self._report_load)
        self._load_report: Optional[tuple[int, list[str], int]] = None
        self.drop_after_pos = nn.Dropout(p=drop_rate)

        self.out_indices = self._parse_out_indices(out_indices)
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
            layer_cfgs = [dict(layer_cfgs or {})] * self.num_layers
        drop_path_rates = torch.linspace(
            0, drop_path_rate, self.num_layers
        ).tolist()
        self.encoder = ModuleList()
        for rate, extra in zip(drop_path_rates, layer_cfgs):
            layer_cfg = dict(
                embed_dims=self.embed_dims,
                num_heads=self.arch_settings['num_heads'],
                feedforward_channels=self.arch_settings[
                    'feedforward_channels'
                ],
                qkv_bias=qkv_bias,
                drop_rate=drop_rate,
                attn_drop_rate=attn_drop_rate,
                drop_path_rate=rate,
            )
            layer_cfg.update(extra)
            self.encoder.append(TransformerLayer(**layer_cfg))
        self.norm = (
            nn.LayerNorm(self.embed_dims) if final_norm else nn.Identity()
        )
        self._freeze_stages()

    @classmethod
    def arch_names(cls) -> list[str]:
        """The arch names, without their ``'t2t-vit-'`` aliases."""
        return sorted(
            {k for k in cls.arch_zoo if '-vit-' not in k},
            key=lambda name: (name.startswith('t-'), len(name), name),
        )

    @classmethod
    def resolve_arch(cls, arch: Union[str, int, dict]) -> dict:
        """The settings of an arch, however its name is spelt.

        mmengine's ``--cfg-options model.backbone.arch=7`` delivers the int
        7 and a config may say ``'T2T-ViT-14'`` or ``'t2t-vit-14@384'``;
        they all name an ``arch_zoo`` entry. A name that names none raises
        a one-line ValueError listing the valid names.

        Args:
            arch (str | int | dict): An arch name or a custom arch dict.

        Returns:
            dict: ``token_layer``, ``embed_dims``, ``num_layers``,
            ``num_heads``, ``feedforward_channels``, and ``img_size`` for
            names with a resolution suffix.
        """
        if isinstance(arch, int) and not isinstance(arch, bool):
            arch = str(arch)
        if isinstance(arch, str):
            key = arch.strip().lower().replace('_', '-')
            key = re.sub(r'^t2t-?vit-?', '', key)
            match = re.fullmatch(r'(.+?)(?:@|-)(224|384)(?:px)?', key)
            settings = None
            if match and match.group(1) in cls.arch_zoo:
                settings = dict(cls.arch_zoo[match.group(1)])
                settings['img_size'] = int(match.group(2))
            elif key in cls.arch_zoo:
                settings = dict(cls.arch_zoo[key])
            if settings is None:
                raise ValueError(
                    f'Unknown T2T-ViT arch {arch!r}; choose one of '
                    f'{", ".join(cls.arch_names())} (also as t2t-vit-NAME, '
                    'any case, NAME@384 at 384 px) or pass a dict.'
                )
            return settings
        if not isinstance(arch, dict):
            raise ValueError(
                f'arch must be an arch name or a dict, got {arch!r} '
                f'({type(arch).__name__}); choose one of '
                f'{", ".join(cls.arch_names())}.'
            )
        required = {'embed_dims', 'num_layers', 'num_heads'}
        optional = {'token_layer', 'feedforward_channels', 'mlp_ratio'}
        missing = required - set(arch)
        unknown = set(arch) - required - optional
        if missing or unknown:
            raise ValueError(
                f'A custom T2T-ViT arch needs the keys {sorted(required)} '
                f'and may set {sorted(optional)}; missing {sorted(missing)}'
                f', unknown {sorted(unknown)}.'
            )
        settings = dict(token_layer='performer')
        settings.update(arch)
        mlp_ratio = settings.pop('mlp_ratio', 3.0)
        settings.setdefault(
            'feedforward_channels', int(arch['embed_dims'] * mlp_ratio)
        )
        return settings

    def _parse_out_indices(self, out_indices) -> list[int]:
        if isinstance(out_indices, int):
            out_indices = [out_indices]
        parsed = []
        for index in out_indices:
            resolved = index + self.num_layers if index < 0 else index
            if not 0 <= resolved < self.num_layers:
                raise ValueError(
                    f'out_indices entry {index} is outside the '
                    f'{self.num_layers} encoder layers (0..'
                    f'{self.num_layers - 1}, or negative from the end).'
                )
            parsed.append(resolved)
        return parsed

    def init_weights(self) -> None:
        """Official initialisation, then ``init_cfg`` on top of it.

        Linear weights trunc-normal (std 0.02) with zero bias, LayerNorms
        1 and 0, the class token trunc-normal; an ``init_cfg`` (pretrained
        weights, other initialisers, a list of them) is applied afterwards,
        so it wins wherever it acts. A ``Pretrained`` ``prefix`` that no
        key of the file starts with is one line saying what the file holds
        and which prefix (or none) fits it, in place of mmengine's bare
        assertion.
        """
        for module in self.modules():
            if isinstance(module, nn.Linear):
                trunc_normal_(module.weight, std=0.02)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
        if self.with_cls_token:
            trunc_normal_(self.cls_token, std=0.02)
        if self.init_cfg is None:
            self._is_init = True
            return
        try:
            super().init_weights()
        except AssertionError as error:
            message = self._missing_prefix_message(str(error))
            if message is None:
                raise
            raise CheckpointMismatchError(message) from None

    def _missing_prefix_message(self, error: str) -> Optional[str]:
        """One line for mmengine's assertion of a ``Pretrained`` prefix
        that no key of the file starts with, or None for another error."""
        configs = (
            self.init_cfg
            if isinstance(self.init_cfg, list)
            else [self.init_cfg]
        )
        for cfg in configs:
            prefix = cfg.get('prefix') if isinstance(cfg, Mapping) else None
            if not prefix or cfg.get('type') != 'Pretrained':
                continue
            full = prefix if prefix.endswith('.') else prefix + '.'
            if error != f'{full} is not in the pretrained model':
                continue
            checkpoint = CheckpointLoader.load_checkpoint(
                cfg['checkpoint'], map_location='cpu'
            )
            weights = checkpoint.get('state_dict', checkpoint)
            return prefix_not_found_message(
                type(self).__name__,
                cfg['checkpoint'],
                full,
                weights if isinstance(weights, Mapping) else {},
                'tokens_to_token.project.weight',
            )
        return None

    def _prepare_checkpoint(
        self,
        state_dict: dict,
        prefix: str,
        local_metadata: dict,
        strict: bool,
        missing_keys: list,
        unexpected_keys: list,
        error_msgs: list,
    ) -> None:
        """Bring a checkpoint into this backbone's layout, then check it.

        Runs inside every loader (``load_state_dict``, mmengine's
        ``load_checkpoint``, ``Pretrained`` initialisation), before any
        tensor is copied. Loaded as the whole model (``prefix`` empty, as
        ``Pretrained`` without a prefix does), the backbone takes an
        official release (``{'state_dict_ema': ...}``, ``module.``
        prefixes) or a classifier's checkpoint (``backbone.*``) as it is.
        The position table is resized to this model's grid. Wrong shapes,
        NaN weights, missing weights or none at all raise
        :class:`CheckpointMismatchError` (one line).
        """
        dropped = self._adopt_layout(state_dict) if not prefix else 0
        self._check_arch(state_dict, prefix, local_metadata)
        # the fixed sinusoidal table: the model's own serves as well; and a
        # model without a class token (its table has no cls position)
        # leaves this one's class token new
        optional = ['pos_embed']
        pos = state_dict.get(prefix + 'pos_embed')
        if (
            prefix + 'cls_token' not in state_dict
            and isinstance(pos, torch.Tensor)
            and pos.dim() == 3
            and math.isqrt(pos.shape[1]) ** 2 == pos.shape[1]
        ):
            optional.append('cls_token')
        self._resize_checkpoint_pos_embed(state_dict, prefix, local_metadata)
        loaded, left = check_supplied_weights(
            type(self).__name__,
            self.state_dict(keep_vars=True),
            state_dict,
            prefix,
            optional=optional,
            advice=(
                'use the config the checkpoint was trained or converted '
                'for; to start only the backbone from a classifier or '
                'detector checkpoint, set backbone.init_cfg=dict(type='
                "'Pretrained', checkpoint=FILE, prefix='backbone.')"
            ),
            local_metadata=local_metadata,
        )
        self._load_report = (loaded, left, dropped)

    def _report_load(self, module: nn.Module, incompatible_keys) -> None:
        """One log line per load: tensors loaded, tensors left as built."""
        if self._load_report is None:
            return
        loaded, left, dropped = self._load_report
        self._load_report = None
        line = (
            f'{type(self).__name__}: {loaded} tensors loaded from the '
            f'checkpoint, {len(left)} left new'
        )
        if left:
            line += f' ({", ".join(left)}: built by the model)'
        if dropped:
            line += f'; {dropped} entries for other modules ignored'
        MMLogger.get_current_instance().info(line + '.')

    @staticmethod
    def _adopt_layout(state_dict: dict) -> int:
        """Official or classifier weights given to the bare backbone.

        mmengine hands a checkpoint without a ``'state_dict'`` entry over as
        it is (``{'state_dict_ema': {...}}`` for an official release);
        ``module.`` prefixes, official key names and the ``backbone.``
        prefix of a classifier's checkpoint are undone here. Returns the
        number of entries dropped as belonging to other modules (a head).
        """
        weights: Mapping = state_dict
        for key in CONTAINER_KEYS:
            if isinstance(state_dict.get(key), Mapping):
                weights = state_dict[key]
                break
        weights = strip_module_prefix(weights)
        official = official_to_plugin(weights)
        if official is not None:
            weights = official['state_dict']
        if not any(k.startswith('backbone.') for k in weights):
            if weights is not state_dict:
                state_dict.clear()
                state_dict.update(weights)
            return 0
        ours = {
            k[len('backbone.') :]: v
            for k, v in weights.items()
            if k.startswith('backbone.')
        }
        dropped = len(weights) - len(ours)
        state_dict.clear()
        state_dict.update(ours)
        return dropped

    def _check_arch(
        self, state_dict: dict, prefix: str, local_metadata: dict
    ) -> None:
        cls_key, pos_key = prefix + 'cls_token', prefix + 'pos_embed'
        width = None
        if cls_key in state_dict:
            width = state_dict[cls_key].shape[-1]
        elif pos_key in state_dict:
            width = state_dict[pos_key].shape[-1]
        if width is not None and width != self.embed_dims:
            name = checkpoint_name(state_dict, local_metadata)
            raise CheckpointMismatchError(
                f'The {name} has embed_dims={width}, this T2T-ViT has '
                f'{self.embed_dims} (arch {self.arch_settings}). Use the arch '
                'the checkpoint was trained with.'
            )
        token_layer = self.tokens_to_token.token_layer
        has_performer = any(
            k.startswith(prefix + 'tokens_to_token.') and '.attn.kqv.' in k
            for k in state_dict
        )
        has_transformer = any(
            k.startswith(prefix + 'tokens_to_token.') and '.attn.qkv.' in k
            for k in state_dict
        )
        if (has_performer and token_layer != 'performer') or (
            has_transformer and token_layer != 'transformer'
        ):
            found = 'performer' if has_performer else 'transformer'
            name = checkpoint_name(state_dict, local_metadata)
            raise CheckpointMismatchError(
                f'The {name} has {found} T2T layers, this T2T-ViT has '
                f'{token_layer} ones. Pick the matching arch: performer '
                "archs are '7'...'24', transformer ones 't-14', 't-19', "
                "'t-24'."
            )

    def _resize_checkpoint_pos_embed(
        self, state_dict: dict, prefix: str, local_metadata: dict
    ) -> None:
        cls_key, pos_key = prefix + 'cls_token', prefix + 'pos_embed'
        if pos_key not in state_dict:
            return
        ckpt_pos = state_dict[pos_key]
        if ckpt_pos.shape == self.pos_embed.shape:
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
            name = checkpoint_name(state_dict, local_metadata)
            raise CheckpointMismatchError(
                f'The position table of the {name} has {length} positions, '
                'which is no square token grid (with or without a cls '
                'position), so its grid is unknown. Build the model with the '
                "checkpoint's img_size, or drop `pos_embed` from the "
                "checkpoint to keep this model's own sinusoidal table."
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
        frozen: list[nn.Module] = [self.tokens_to_token]
        frozen += list(self.encoder[: self.frozen_stages])
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
        """Layer depth of a parameter for layer-wise learning-rate decay.

        The T2T module, class token and position table are depth 0, encoder
        layer ``i`` is ``i + 1`` and everything after (final norm, head) is
        ``num_layers + 1``.

        Returns:
            Tuple[int, int]: The depth and the number of depths.
        """
        num_depths = self.num_layers + 2
        if not param_name.startswith(prefix):
            return num_depths - 1, num_depths
        name = param_name[len(prefix) :]
        if name in ('cls_token', 'pos_embed') or name.startswith(
            'tokens_to_token'
        ):
            return 0, num_depths
        match = re.match(r'encoder\.(\d+)\.', name)
        if match:
            return int(match.group(1)) + 1, num_depths
        return num_depths - 1, num_depths

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
