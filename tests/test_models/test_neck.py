"""T2TFeaturePyramid: strides, shapes, numbers and errors (no mmdet/mmseg)."""

import math

import pytest
import torch
import torch.nn.functional as F
from mmpretrain.registry import MODELS

from t2t_plugin.models import T2TFeaturePyramid, T2TViT
from t2t_plugin.runtime.hooks.run_checks import width_problem

TOKEN_DIMS = 16
EMBED_DIMS = 32
TINY = dict(
    token_layer='transformer',
    embed_dims=EMBED_DIMS,
    num_layers=2,
    num_heads=2,
    feedforward_channels=64,
)


def tiny_backbone(
    token_layer: str = 'transformer', out_indices=(-1,)
) -> T2TViT:
    backbone = T2TViT(
        arch=dict(
            token_layer=token_layer,
            embed_dims=EMBED_DIMS,
            num_layers=2,
            num_heads=2,
            feedforward_channels=64,
        ),
        out_type='featmap',
        out_t2t_maps=True,
        out_indices=out_indices,
        t2t_cfg=dict(token_dims=TOKEN_DIMS),
    )
    backbone.init_weights()
    return backbone


def randomise_norms(module: torch.nn.Module) -> None:
    """Give the norms non-trivial affine parameters."""
    generator = torch.Generator().manual_seed(0)
    for param in module.parameters():
        if param.dim() == 1:
            param.data = torch.randn(param.shape, generator=generator)


def reference_block(
    x: torch.Tensor, block: torch.nn.Sequential, eps: float
) -> torch.Tensor:
    """1x1 conv, channel LayerNorm, 3x3 conv, channel LayerNorm."""

    def channel_norm(y, norm):
        mean = y.mean(dim=1, keepdim=True)
        var = ((y - mean) ** 2).mean(dim=1, keepdim=True)
        y = (y - mean) / torch.sqrt(var + eps)
        return y * norm.weight[:, None, None] + norm.bias[:, None, None]

    y = channel_norm(F.conv2d(x, block[0].weight), block[1])
    y = F.conv2d(y, block[2].weight, padding=1)
    return channel_norm(y, block[3])


@pytest.mark.parametrize('token_layer', ['transformer', 'performer'])
@pytest.mark.parametrize('size', [(64, 64), (96, 64), (48, 80)])
def test_strides_and_shapes(token_layer, size):
    torch.manual_seed(0)
    backbone = tiny_backbone(token_layer)
    neck = T2TFeaturePyramid(
        in_channels=(TOKEN_DIMS, TOKEN_DIMS, EMBED_DIMS),
        out_channels=(8, 16, 24, 32),
    )
    neck.init_weights()
    outs = neck(backbone(torch.randn(2, 3, *size)))
    height, width = size
    # 48x80 is a multiple of 16 but not of 32: the stride-32 level rounds up
    # like a padded stride-2 convolution would.
    expected = [
        (2, channels, math.ceil(height / stride), math.ceil(width / stride))
        for channels, stride in zip((8, 16, 24, 32), (4, 8, 16, 32))
    ]
    assert [tuple(out.shape) for out in outs] == expected
    assert neck.out_strides == (4, 8, 16, 32)
    assert all(torch.isfinite(out).all() for out in outs)


def test_matches_reference_with_several_encoder_maps():
    torch.manual_seed(0)
    backbone = tiny_backbone(out_indices=(0, 1)).eval()
    neck = T2TFeaturePyramid(
        in_channels=(TOKEN_DIMS, TOKEN_DIMS, EMBED_DIMS, EMBED_DIMS),
        out_channels=12,
    )
    neck.init_weights()
    randomise_norms(neck)
    feats = backbone(torch.randn(2, 3, 64, 96))
    outs = neck(feats)

    encoder = torch.cat(feats[2:], dim=1)
    inputs = (
        feats[0],
        feats[1],
        encoder,
        F.max_pool2d(encoder, 2, ceil_mode=True),
    )
    assert len(outs) == 4
    for out, x, block in zip(outs, inputs, neck.levels):
        torch.testing.assert_close(
            out, reference_block(x, block, eps=1e-6), rtol=1e-5, atol=1e-5
        )


def test_out_indices_builds_only_the_levels_asked_for():
    torch.manual_seed(0)
    neck = T2TFeaturePyramid(
        in_channels=(TOKEN_DIMS, TOKEN_DIMS, EMBED_DIMS),
        out_channels=(16, 24, 32),
        out_indices=(1, 2, 3),
    )
    full = T2TFeaturePyramid(
        in_channels=(TOKEN_DIMS, TOKEN_DIMS, EMBED_DIMS),
        out_channels=(8, 16, 24, 32),
    )
    assert len(neck.levels) == 3
    assert neck.out_strides == (8, 16, 32)
    level0 = sum(p.numel() for p in full.levels[0].parameters())
    assert sum(p.numel() for p in full.parameters()) - level0 == sum(
        p.numel() for p in neck.parameters()
    )
    outs = neck(tiny_backbone()(torch.randn(1, 3, 64, 64)))
    assert [tuple(out.shape) for out in outs] == [
        (1, 16, 8, 8),
        (1, 24, 4, 4),
        (1, 32, 2, 2),
    ]


def test_real_arch_widths_and_registry():
    """T2T-ViT-t-14 and -14 give (64, 64, 384) maps at strides 4, 8, 16."""
    for arch in ('t-14', '14'):
        backbone = MODELS.build(
            dict(
                type='T2TViT',
                arch=arch,
                out_type='featmap',
                out_t2t_maps=True,
                out_indices=(-1,),
            )
        )
        neck = MODELS.build(
            dict(
                type='T2TFeaturePyramid',
                in_channels=(64, 64, 384),
                out_channels=(96, 192, 384, 768),
            )
        )
        with torch.no_grad():
            outs = neck(backbone(torch.randn(1, 3, 64, 96)))
        assert [tuple(out.shape) for out in outs] == [
            (1, 96, 16, 24),
            (1, 192, 8, 12),
            (1, 384, 4, 6),
            (1, 768, 2, 3),
        ]


@pytest.mark.parametrize(
    'norm_cfg',
    [
        dict(type='GN', num_groups=4),
        dict(type='BN'),
    ],
)
def test_other_norms(norm_cfg):
    neck = T2TFeaturePyramid(
        in_channels=(TOKEN_DIMS, TOKEN_DIMS, EMBED_DIMS),
        out_channels=16,
        norm_cfg=norm_cfg,
    )
    outs = neck(tiny_backbone()(torch.randn(2, 3, 32, 32)))
    assert [out.shape[1] for out in outs] == [16] * 4


def test_gradients_reach_the_t2t_module():
    torch.manual_seed(0)
    backbone = tiny_backbone()
    neck = T2TFeaturePyramid(
        in_channels=(TOKEN_DIMS, TOKEN_DIMS, EMBED_DIMS), out_channels=8
    )
    neck.init_weights()
    outs = neck(backbone(torch.randn(2, 3, 32, 32)))
    sum(out.square().mean() for out in outs).backward()
    t2t_grads = {
        name: param.grad
        for name, param in backbone.named_parameters()
        if name.startswith('tokens_to_token.attention1.')
    }
    assert t2t_grads
    assert all(
        grad is not None and grad.abs().sum() > 0
        for grad in t2t_grads.values()
    )


@pytest.mark.parametrize(
    'kwargs, message',
    [
        (dict(in_channels=(384,), out_channels=256), 'two T2T maps'),
        (
            dict(in_channels=(64, 64, 384), out_channels=(1, 2)),
            'one width per',
        ),
        (
            dict(
                in_channels=(64, 64, 384), out_channels=8, out_indices=(2, 1)
            ),
            'increasing order',
        ),
        (
            dict(in_channels=(64, 64, 384), out_channels=8, out_indices=(4,)),
            'increasing order',
        ),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        T2TFeaturePyramid(**kwargs)


def test_backbone_without_t2t_maps_is_explained():
    backbone = T2TViT(
        arch=dict(embed_dims=EMBED_DIMS, num_layers=1, num_heads=2),
        out_type='featmap',
        t2t_cfg=dict(token_dims=TOKEN_DIMS),
    )
    neck = T2TFeaturePyramid(
        in_channels=(TOKEN_DIMS, TOKEN_DIMS, EMBED_DIMS), out_channels=8
    )
    with pytest.raises(ValueError, match='out_t2t_maps=True'):
        neck(backbone(torch.randn(1, 3, 32, 32)))


def test_maps_at_wrong_strides_are_explained():
    neck = T2TFeaturePyramid(in_channels=(4, 4, 8), out_channels=8)
    feats = (
        torch.randn(1, 4, 16, 16),
        torch.randn(1, 4, 8, 8),
        torch.randn(1, 8, 8, 8),
    )
    with pytest.raises(ValueError, match='strides 4, 8 and 16'):
        neck(feats)


class BackboneThenNeck(torch.nn.Module):
    """Builds its parts as mmdet's detectors and mmseg's segmentors do: the
    backbone, then the neck, each from its own config dict."""

    def __init__(self, backbone: dict, neck: dict) -> None:
        super().__init__()
        self.backbone = MODELS.build(backbone)
        self.neck = MODELS.build(neck)


def pyramid_model(widths, **backbone) -> BackboneThenNeck:
    return BackboneThenNeck(
        dict(
            dict(type='T2TViT', out_type='featmap', out_t2t_maps=True),
            **backbone,
        ),
        dict(type='T2TFeaturePyramid', in_channels=widths, out_channels=8),
    )


@pytest.mark.parametrize(
    'backbone, widths',
    [
        (dict(arch='7'), (64, 64, 256)),
        (dict(arch='t-19', out_indices=(2, 5)), (64, 64, 448, 448)),
        (
            dict(arch=dict(TINY, embed_dims=48), t2t_cfg=dict(token_dims=8)),
            (8, 8, 48),
        ),
    ],
)
def test_stated_widths_are_those_of_the_backbone_outputs(backbone, widths):
    model = pyramid_model(widths, **backbone)
    assert T2TFeaturePyramid.backbone_widths(model.backbone) == widths
    assert width_problem(model) is None
    with torch.no_grad():
        feats = model.backbone(torch.zeros(1, 3, 32, 32))
    assert tuple(x.shape[1] for x in feats) == widths
    assert model.neck.levels[2][0].weight.shape == (8, sum(widths[2:]), 1, 1)
    with torch.no_grad():
        outs = model.neck(feats)
    assert [tuple(x.shape) for x in outs] == [
        (1, 8, 8, 8),
        (1, 8, 4, 4),
        (1, 8, 2, 2),
        (1, 8, 1, 1),
    ]


def test_a_checkpoint_of_the_pyramid_loads_strictly():
    """Nothing lazy: the parameters exist from construction, so a state
    dict saved from one build loads strictly into the next."""
    widths = (64, 64, EMBED_DIMS)
    torch.manual_seed(0)
    saved = pyramid_model(widths, arch=TINY).state_dict()
    torch.manual_seed(1)
    model = pyramid_model(widths, arch=TINY)
    assert not any(
        isinstance(p, torch.nn.parameter.UninitializedParameter)
        for p in model.parameters()
    )
    assert model.load_state_dict(saved, strict=True).missing_keys == []
    for name, value in model.state_dict().items():
        assert torch.equal(value, saved[name]), name


@pytest.mark.parametrize('spoil', ['int64', 'nan', 'unused'])
def test_a_checkpoint_of_the_pyramid_must_fit_it(spoil):
    """The neck's load hook runs the fit check every part shares; a
    checkpoint without the neck leaves it new."""
    from t2t_plugin.runtime import CheckpointError

    widths = (64, 64, EMBED_DIMS)
    model = pyramid_model(widths, arch=TINY)
    saved = model.state_dict()
    key = 'neck.levels.0.0.weight'
    if spoil == 'int64':
        saved[key] = saved[key].long()
        expected = (
            'The checkpoint holds 1 weight(s) of T2TFeaturePyramid of another '
            f'kind than the model, e.g. {key} (torch.int64)'
        )
    elif spoil == 'nan':
        saved[key] = torch.full_like(saved[key], float('nan'))
        expected = (
            'The checkpoint holds NaN or infinite values in 1 weight(s) of '
            f"T2TFeaturePyramid, e.g. '{key}'"
        )
    else:
        saved['neck.levels.4.0.weight'] = saved[key]
        expected = (
            "The checkpoint holds 1 entries under 'neck.' that "
            "T2TFeaturePyramid does not have (e.g. 'neck.levels.4.0.weight')"
        )
    with pytest.raises(CheckpointError) as error:
        model.load_state_dict(saved)
    assert str(error.value).startswith(expected)
    without_neck = {
        k: v for k, v in model.state_dict().items() if 'neck' not in k
    }
    result = model.load_state_dict(without_neck, strict=False)
    assert result.missing_keys == [
        k for k in saved if k.startswith('neck.levels') and 'levels.4' not in k
    ]


def test_widths_of_another_arch_are_one_line_naming_the_key():
    """A config written for T2T-ViT-14 with the arch changed to 7 on the
    command line: the first forward names both widths and the key; the
    run's check names the key of this model (a list of necks in mmdet)."""
    model = pyramid_model((64, 64, 384), arch='7')
    with pytest.raises(ValueError) as error:
        model.neck(model.backbone(torch.zeros(1, 3, 32, 32)))
    assert str(error.value) == (
        'T2TFeaturePyramid has in_channels=(64, 64, 384), but the backbone '
        'outputs have widths (64, 64, 256); set '
        'model.neck.in_channels=[64,64,256] (model.neck.0.in_channels where '
        'the config lists several necks).'
    )
    assert width_problem(model) == (
        'T2TFeaturePyramid has in_channels=(64, 64, 384), but the backbone '
        'outputs have widths (64, 64, 256); set '
        'model.neck.in_channels=[64,64,256].'
    )
    model.neck = torch.nn.Sequential(model.neck, torch.nn.Identity())
    assert width_problem(model).endswith(
        'set model.neck.0.in_channels=[64,64,256].'
    )


def test_backbone_returning_the_cls_token_is_explained():
    model = BackboneThenNeck(
        dict(type='T2TViT', arch='7'),
        dict(type='T2TFeaturePyramid', in_channels=(64, 64, 256)),
    )
    # no maps to compare: the first forward explains
    assert width_problem(model) is None
    with pytest.raises(ValueError) as error:
        model.neck(model.backbone(torch.zeros(1, 3, 32, 32)))
    assert str(error.value) == (
        'T2TFeaturePyramid expects inputs of widths (64, 64, 256), got '
        '(256,). Make the backbone return the T2T maps and the encoder maps '
        "(out_t2t_maps=True, out_type='featmap') and match in_channels to "
        'them.'
    )


def test_pyramid_without_widths_says_what_to_give():
    with pytest.raises(TypeError, match="argument: 'in_channels'"):
        MODELS.build(dict(type='T2TFeaturePyramid', out_channels=8))
