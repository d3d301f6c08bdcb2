"""The T2T-ViT backbone, module and head: shapes, math, options, errors."""

import math

import pytest
import torch
from mmpretrain.registry import MODELS

import t2t_plugin  # noqa: F401
from t2t_plugin.models import T2TModule, T2TViT
from t2t_plugin.models.layers import sinusoid_position_table

from ..reference import sinusoid_table, t2t_vit_logits

# trainable parameters with a 1000-class head, from the official code
PARAMS = {
    '7': 4_255_694,
    '10': 5_834_702,
    '12': 6_887_374,
    '14': 21_465_806,
    '19': 39_085_070,
    '24': 64_000_974,
    't-14': 21_465_422,
    't-19': 39_084_686,
    't-24': 64_000_590,
    '14-resnext': 21_465_806,
    '14-wide': 25_000_910,
}


def small_arch(token_layer='transformer', **overrides):
    """An arch a little wider than the suite's tiny one (conftest's
    ``tiny_arch``): 48 dims, 3 layers of 3 heads, for the formula tests."""
    arch = dict(
        token_layer=token_layer,
        embed_dims=48,
        num_layers=3,
        num_heads=3,
        feedforward_channels=96,
    )
    arch.update(overrides)
    return arch


def classifier(arch, num_classes=10, **backbone):
    embed = (
        T2TViT.arch_zoo[arch]['embed_dims']
        if isinstance(arch, str)
        else arch['embed_dims']
    )
    return MODELS.build(
        dict(
            type='ImageClassifier',
            backbone=dict(type='T2TViT', arch=arch, **backbone),
            head=dict(
                type='T2TClsHead', num_classes=num_classes, in_channels=embed
            ),
        )
    )


@pytest.mark.parametrize('arch', sorted(PARAMS))
def test_parameter_count_matches_official(arch):
    model = classifier(arch, num_classes=1000)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert trainable == PARAMS[arch]
    assert (
        MODELS.build(dict(type='T2TViT', arch=f't2t-vit-{arch}')).embed_dims
        == T2TViT.arch_zoo[arch]['embed_dims']
    )


@pytest.mark.parametrize('token_layer', ['transformer', 'performer'])
def test_classifier_matches_plain_formula(token_layer):
    model = classifier(small_arch(token_layer), img_size=64)
    model.init_weights()
    model.eval()
    img = torch.randn(2, 3, 64, 64)
    expected = t2t_vit_logits(img, model.state_dict(), token_layer, 3)
    torch.testing.assert_close(
        model(img, mode='tensor'), expected, atol=1e-5, rtol=1e-5
    )


def test_sinusoid_table_matches_formula():
    torch.testing.assert_close(
        sinusoid_position_table(197, 384), sinusoid_table(197, 384)
    )
    backbone = T2TViT(arch='t-14')
    assert not any(p is backbone.pos_embed for p in backbone.parameters())
    assert 'pos_embed' in backbone.state_dict()


def test_default_t2t_geometry():
    module = T2TModule(token_layer='transformer', embed_dims=32)
    tokens, grid, maps = module(torch.randn(1, 3, 224, 224))
    assert tokens.shape == (1, 196, 32) and grid == (14, 14)
    assert [m.shape for m in maps] == [(1, 64, 56, 56), (1, 64, 28, 28)]
    assert module.attention1.ln1.normalized_shape == (147,)
    assert module.attention2.ln1.normalized_shape == (576,)


@pytest.mark.parametrize(
    'token_layer', ['transformer', 'performer', 'convolution']
)
def test_non_square_input(token_layer):
    backbone = T2TViT(
        arch=small_arch(token_layer),
        img_size=64,
        out_type='featmap',
        out_indices=(0, -1),
        out_t2t_maps=True,
    )
    outs = backbone(torch.randn(2, 3, 96, 64))
    assert [o.shape for o in outs] == [
        (2, 64, 24, 16),
        (2, 64, 12, 8),
        (2, 48, 6, 4),
        (2, 48, 6, 4),
    ]


def test_out_types():
    img = torch.randn(2, 3, 64, 64)
    shapes = {
        'cls_token': (2, 48),
        'avg_featmap': (2, 48),
        'featmap': (2, 48, 4, 4),
        'raw': (2, 17, 48),
    }
    raw = None
    for out_type, shape in shapes.items():
        torch.manual_seed(0)
        backbone = T2TViT(arch=small_arch(), img_size=64, out_type=out_type)
        backbone.eval()
        (out,) = backbone(img)
        assert out.shape == shape
        if out_type == 'raw':
            raw = out
    torch.manual_seed(0)
    backbone = T2TViT(arch=small_arch(), img_size=64, out_type='avg_featmap')
    torch.testing.assert_close(backbone.eval()(img)[0], raw[:, 1:].mean(1))


def test_small_image_variant_is_a_config():
    # 8x8 digits: strides 1, 1, 2 give a 4x4 token grid
    backbone = T2TViT(
        arch=small_arch('performer'),
        img_size=8,
        in_channels=1,
        out_type='featmap',
        t2t_cfg=dict(
            kernel_sizes=(3, 3, 3), strides=(1, 1, 2), paddings=(1, 1, 1)
        ),
    )
    assert backbone(torch.randn(2, 1, 8, 8))[0].shape == (2, 48, 4, 4)


def test_position_table_resized_on_load_224_to_384():
    arch = small_arch()
    small = classifier(arch, img_size=224)
    large = classifier(arch, img_size=384)
    state = small.state_dict()
    large.load_state_dict(state, strict=True)
    table = large.backbone.pos_embed
    assert table.shape == (1, 1 + 24 * 24, 48)
    grid = state['backbone.pos_embed'][:, 1:].reshape(1, 14, 14, 48)
    expected = (
        torch.nn.functional.interpolate(
            grid.permute(0, 3, 1, 2),
            size=(24, 24),
            mode='bicubic',
            align_corners=False,
        )
        .flatten(2)
        .transpose(1, 2)
    )
    torch.testing.assert_close(table[:, 1:], expected)
    cls_position = state['backbone.pos_embed'][:, :1]
    torch.testing.assert_close(table[:, :1], cls_position)


def test_position_table_resized_in_forward():
    backbone = T2TViT(arch=small_arch(), img_size=64, out_type='raw')
    backbone.eval()
    img = torch.randn(1, 3, 96, 96)
    resized = T2TViT(arch=small_arch(), img_size=96, out_type='raw').eval()
    state = backbone.state_dict()
    resized.load_state_dict(state)
    torch.testing.assert_close(backbone(img)[0], resized(img)[0])


def test_with_cp_same_output_and_gradients():
    img = torch.randn(2, 3, 64, 64)
    outputs, grads = [], []
    for with_cp in (False, True):
        torch.manual_seed(0)
        backbone = T2TViT(
            arch=small_arch('performer'),
            img_size=64,
            with_cp=with_cp,
            t2t_cfg=dict(drop_rate=0.0),
        )
        backbone.train()
        out = backbone(img)[0]
        out.square().sum().backward()
        outputs.append(out)
        grads.append({n: p.grad for n, p in backbone.named_parameters()})
    torch.testing.assert_close(outputs[0], outputs[1])
    assert grads[0].keys() == grads[1].keys()
    for name in grads[0]:
        torch.testing.assert_close(grads[0][name], grads[1][name], msg=name)


def test_with_cp_recomputes_layers():
    backbone = T2TViT(arch=small_arch(), img_size=64, with_cp=True)
    calls = []
    t2t = backbone.tokens_to_token
    for layer in [*backbone.encoder, t2t.attention1, t2t.attention2]:
        forward = layer.ffn.forward
        layer.ffn.forward = lambda x, f=forward: calls.append(1) or f(x)
    backbone(torch.randn(1, 3, 64, 64))[0].sum().backward()
    # each checkpointed layer runs twice: forward and recomputation
    assert len(calls) == 2 * 5
    calls.clear()
    with torch.no_grad():
        backbone(torch.randn(1, 3, 64, 64))
    assert len(calls) == 5


def test_frozen_stages():
    backbone = T2TViT(arch=small_arch(), img_size=64, frozen_stages=2)
    assert backbone.train() is backbone
    assert not backbone.cls_token.requires_grad
    assert not any(
        p.requires_grad for p in backbone.tokens_to_token.parameters()
    )
    for index, layer in enumerate(backbone.encoder):
        assert all(p.requires_grad != (index < 2) for p in layer.parameters())
        assert layer.training == (index >= 2)
    assert not backbone.tokens_to_token.training
    assert all(p.requires_grad for p in backbone.norm.parameters())
    full = T2TViT(arch=small_arch(), img_size=64, frozen_stages=3)
    assert not any(p.requires_grad for p in full.parameters())


def test_layer_depth_for_lr_decay():
    backbone = T2TViT(arch=small_arch(), img_size=64)
    depth = backbone.get_layer_depth
    assert depth('backbone.cls_token', 'backbone.') == (0, 5)
    assert depth('backbone.tokens_to_token.project.weight', 'backbone.') == (
        0,
        5,
    )
    assert depth('backbone.encoder.0.ln1.weight', 'backbone.') == (1, 5)
    assert depth('backbone.encoder.2.attn.qkv.weight', 'backbone.') == (3, 5)
    assert depth('backbone.norm.weight', 'backbone.') == (4, 5)
    assert depth('head.layers.head.weight', 'backbone.') == (4, 5)


def test_official_initialisation():
    backbone = T2TViT(arch='t-14')
    backbone.init_weights()
    weight = backbone.encoder[0].ffn.layers[1].weight
    assert abs(weight.std().item() - 0.02) < 0.002
    assert torch.all(backbone.encoder[0].attn.proj.bias == 0)
    assert torch.all(backbone.norm.weight == 1)
    assert abs(backbone.cls_token.std().item() - 0.02) < 0.006


def test_out_indices_negative_and_invalid():
    backbone = T2TViT(arch=small_arch(), img_size=64, out_indices=(-1, 0))
    assert backbone.out_indices == [2, 0]
    with pytest.raises(ValueError, match='out_indices entry 3'):
        T2TViT(arch=small_arch(), out_indices=3)


def test_bad_input_errors():
    backbone = T2TViT(arch=small_arch(), img_size=64)
    with pytest.raises(ValueError, match=r'\(B, 3, H, W\).*in_channels'):
        backbone(torch.randn(1, 1, 64, 64))
    with pytest.raises(ValueError, match='multiples of 16.*64x80'):
        backbone(torch.randn(1, 3, 60, 72))
    with pytest.raises(ValueError, match="Unknown T2T-ViT arch 'fancy'"):
        T2TViT(arch='fancy')
    with pytest.raises(ValueError, match='missing'):
        T2TViT(arch=dict(embed_dims=64))
    with pytest.raises(ValueError, match='token_layer'):
        T2TModule(token_layer='lstm')


def test_checkpoint_that_does_not_fit():
    model = T2TViT(arch='t-14')
    with pytest.raises(ValueError, match='embed_dims=448.*arch'):
        model.load_state_dict(T2TViT(arch='t-19').state_dict())
    with pytest.raises(ValueError, match='performer T2T layers'):
        model.load_state_dict(T2TViT(arch='14').state_dict())


def test_dropout_only_in_training():
    backbone = T2TViT(
        arch=small_arch('performer'),
        img_size=64,
        drop_rate=0.3,
        drop_path_rate=0.2,
    )
    img = torch.randn(2, 3, 64, 64)
    backbone.eval()
    torch.testing.assert_close(backbone(img)[0], backbone(img)[0])
    backbone.train()
    assert not torch.allclose(backbone(img)[0], backbone(img)[0])
    rates = [layer.drop_path.drop_prob for layer in backbone.encoder[1:]]
    assert rates == pytest.approx([0.1, 0.2])
    assert math.isclose(
        backbone.tokens_to_token.attention1.attn.proj_drop.p, 0.1
    )


def test_init_cfg_applies_on_top_of_the_official_init(tmp_path):
    source = T2TViT(arch=small_arch('performer'), img_size=64)
    source.init_weights()
    path = tmp_path / 'backbone.pth'
    torch.save({'state_dict': source.state_dict()}, path)
    pretrained = dict(type='Pretrained', checkpoint=str(path))
    for init_cfg in (pretrained, [pretrained]):
        backbone = T2TViT(
            arch=small_arch('performer'), img_size=64, init_cfg=init_cfg
        )
        backbone.init_weights()
        for key, value in source.state_dict().items():
            torch.testing.assert_close(backbone.state_dict()[key], value)
    backbone = T2TViT(
        arch=small_arch(),
        img_size=64,
        init_cfg=dict(type='Constant', layer='LayerNorm', val=2.0),
    )
    backbone.init_weights()
    assert torch.all(backbone.encoder[0].ln1.weight == 2)
    assert abs(backbone.encoder[0].attn.qkv.weight.std().item() - 0.02) < 0.005


def _cpu_has_float16_layer_norm() -> bool:
    try:
        torch.nn.functional.layer_norm(torch.ones(1, 2).half(), (2,))
    except RuntimeError:  # torch 2.1: "not implemented for 'Half'"
        return False
    return True


@pytest.mark.parametrize(
    'dtype',
    [
        torch.bfloat16,
        pytest.param(
            torch.float16,
            marks=pytest.mark.skipif(
                not _cpu_has_float16_layer_norm(),
                reason='this torch has no float16 LayerNorm on CPU',
            ),
        ),
    ],
)
def test_performer_model_cast_to_half_precision(dtype):
    backbone = T2TViT(arch=small_arch('performer'), img_size=64).eval()
    backbone.init_weights()
    img = torch.randn(2, 3, 64, 64)
    reference = backbone(img)[0]
    out = backbone.to(dtype)(img.to(dtype))[0]
    assert out.dtype == dtype and torch.isfinite(out).all()
    assert (out.float() - reference).abs().max() < 0.05 * reference.abs().max()


def test_position_table_between_cls_and_no_cls_models():
    with_cls = T2TViT(arch=small_arch(), img_size=64, out_type='featmap')
    without = T2TViT(
        arch=small_arch(),
        img_size=96,
        out_type='featmap',
        with_cls_token=False,
    )
    state = with_cls.state_dict()
    result = without.load_state_dict(state, strict=False)
    assert result.unexpected_keys == ['cls_token']
    assert without.pos_embed.shape == (1, 36, 48)
    back = T2TViT(arch=small_arch(), img_size=64, out_type='featmap')
    result = back.load_state_dict(without.state_dict(), strict=False)
    assert result.missing_keys == ['cls_token']
    assert back.pos_embed.shape == (1, 17, 48)
    cls_position = with_cls.pos_embed[:, :1]
    torch.testing.assert_close(back.pos_embed[:, :1], cls_position)
    non_square = T2TViT(arch=small_arch(), img_size=(64, 96))
    with pytest.raises(ValueError, match='no square token grid.*img_size'):
        back.load_state_dict(non_square.state_dict())


def test_custom_arch_and_t2t_cfg_mistakes():
    backbone = T2TViT(arch=small_arch(mlp_ratio=2.0), img_size=64)
    assert backbone.encoder[0].ffn.layers[1].in_features == 96
    backbone = T2TViT(
        arch=dict(embed_dims=48, num_layers=1, num_heads=3, mlp_ratio=2.0),
        img_size=64,
    )
    assert backbone.encoder[0].ffn.layers[1].in_features == 96
    with pytest.raises(ValueError, match=r"unknown \['feedforward_channel"):
        T2TViT(arch=small_arch(feedforward_channel=64))
    with pytest.raises(ValueError, match="Set \\['embed_dims'\\] on the"):
        T2TViT(arch=small_arch(), t2t_cfg=dict(embed_dims=32))
    with pytest.raises(ValueError, match='non-empty image'):
        T2TViT(arch=small_arch(), img_size=64)(torch.randn(1, 3, 0, 64))


def test_with_cp_of_the_t2t_layers_only():
    backbone = T2TViT(
        arch=small_arch(), img_size=64, t2t_cfg=dict(with_cp=True)
    )
    calls = {'t2t': 0, 'encoder': 0}
    t2t = backbone.tokens_to_token
    for kind, layers in (
        ('t2t', [t2t.attention1, t2t.attention2]),
        ('encoder', list(backbone.encoder)),
    ):
        for layer in layers:
            forward = layer.ffn.forward

            def counted(x, f=forward, kind=kind):
                calls[kind] += 1
                return f(x)

            layer.ffn.forward = counted
    backbone(torch.randn(1, 3, 64, 64))[0].sum().backward()
    assert calls == {'t2t': 4, 'encoder': 3}


def test_mimetic_attn_init_of_the_backbone():
    torch.manual_seed(0)
    backbone = T2TViT(
        arch=small_arch(),
        img_size=32,
        attn_init=dict(type='mimetic', alpha_qk=0.0, alpha_vo=0.0),
    )
    backbone.init_weights()
    eye = torch.eye(48)
    for layer in backbone.encoder:
        attn = layer.attn
        q, k, v = attn.qkv.weight.detach().view(3, 3, 16, 48)
        products = q.transpose(1, 2) @ k
        # each head: 0.7 (the default beta_qk) times a rank-16 projection;
        # together the three heads' traces make 0.7 * 48
        for product in products:
            torch.testing.assert_close(
                product @ product, 0.7 * product, atol=1e-5, rtol=0
            )
        assert products.diagonal(dim1=1, dim2=2).sum().item() == (
            pytest.approx(0.7 * 48, abs=1e-3)
        )
        value_path = v.reshape(48, 48).t() @ attn.proj.weight.detach().t()
        torch.testing.assert_close(value_path, -0.4 * eye, atol=1e-5, rtol=0)
    # the transformer T2T layers' queries and keys too (576 -> 64 dims)
    t2t = backbone.tokens_to_token.attention2.attn
    q, k = t2t.qkv.weight.detach()[:64], t2t.qkv.weight.detach()[64:128]
    product = q.t() @ k
    torch.testing.assert_close(
        product @ product, 0.7 * product, atol=1e-5, rtol=0
    )


def test_attn_init_default_and_mistakes():
    torch.manual_seed(0)
    official = T2TViT(arch=small_arch(), img_size=32)
    torch.manual_seed(0)
    explicit = T2TViT(arch=small_arch(), img_size=32, attn_init=None)
    for model in (official, explicit):
        torch.manual_seed(1)
        model.init_weights()
    for (name, a), b in zip(
        official.state_dict().items(), explicit.state_dict().values()
    ):
        assert torch.equal(a, b), name
    message = (
        'Unknown attn_init {!r}; give None (the official initialisation) or '
        "dict(type='mimetic') with optional alpha_qk, alpha_vo, beta_qk, "
        'beta_vo.'
    )
    for bad in ('mimetic', dict(type='impulse'), dict(alpha_qk=0.5)):
        with pytest.raises(ValueError) as error:
            T2TViT(arch=small_arch(), img_size=32, attn_init=bad)
        assert str(error.value) == message.format(bad)
    # an unknown key: option_checks.check_keys' line, with the nearest key
    takes = 'it takes alpha_qk, alpha_vo, beta_qk, beta_vo, type.'
    for key, hint in (('alpha_kq', "did you mean 'alpha_qk'? "), ('a', '')):
        with pytest.raises(ValueError) as error:
            T2TViT(
                arch=small_arch(),
                img_size=32,
                attn_init={'type': 'mimetic', key: 1.0},
            )
        assert str(error.value) == (
            f"T2TViT got an unknown key '{key}' in attn_init; {hint}{takes}"
        )
