"""LocalitySelfAttention against its plain formula (a learned scale, no
attention of a token to itself), through the fused kernel, in the
backbone's encoder layers only where layer_cfgs ask for it."""

import math

import pytest
import torch
from mmengine.config import Config
from mmpretrain import get_model
from mmpretrain.registry import MODELS

from projects.small_data.levers import (
    LocalitySelfAttention,
    LocalityTransformerLayer,
)
from t2t_plugin.analysis import cls_attention_maps
from t2t_plugin.apis import load_model, preprocess_image
from t2t_plugin.models import T2TViT
from t2t_plugin.models.layers import SelfAttention, TransformerLayer
from tests.helpers import (
    MEAN,
    RESIZE_PIPELINE,
    STD,
    TINY_CONFIG,
    load_tool,
    write_image,
)

from . import CONFIGS


def _locality_reference(x, layer, scale):
    """Locality self-attention written out: per head, ``softmax`` of
    ``scale * q k^T`` with the diagonal left out of the sum, then
    ``proj``."""
    sd = layer.state_dict()
    heads, dims = layer.num_heads, layer.embed_dims
    head = dims // heads
    qkv = x @ sd['qkv.weight'].t()
    out = torch.zeros(x.shape[0], x.shape[1], dims)
    for b in range(x.shape[0]):
        for h in range(heads):
            q, k, v = (
                qkv[b, :, i * dims + h * head : i * dims + (h + 1) * head]
                for i in range(3)
            )
            for i in range(x.shape[1]):
                logits = [
                    scale * float(q[i] @ k[j]) if j != i else -math.inf
                    for j in range(x.shape[1])
                ]
                weights = torch.softmax(torch.tensor(logits), dim=0)
                out[b, i, h * head : (h + 1) * head] = weights @ v
    return out @ sd['proj.weight'].t() + sd['proj.bias']


def test_locality_attention_masks_the_diagonal_and_learns_the_scale():
    torch.manual_seed(0)
    layer = LocalitySelfAttention(32, 32, num_heads=4).eval()
    assert layer.logit_scale.shape == (1,)
    assert layer.logit_scale.item() == pytest.approx(8**-0.5)
    x = torch.randn(2, 6, 32)
    torch.testing.assert_close(
        layer(x), _locality_reference(x, layer, 8**-0.5), atol=1e-5, rtol=1e-5
    )
    # the scale is a parameter: another value is another temperature
    with torch.no_grad():
        layer.logit_scale.fill_(1.3)
    torch.testing.assert_close(
        layer(x), _locality_reference(x, layer, 1.3), atol=1e-5, rtol=1e-5
    )
    layer(x).sum().backward()
    assert layer.logit_scale.grad.abs().item() > 0


def test_attention_weights_are_those_the_forward_applies():
    """The weights the visualisation draws: rows of 1, nothing on the
    diagonal, and the forward's output is them applied to the values."""
    torch.manual_seed(0)
    layer = LocalitySelfAttention(32, 32, num_heads=4).eval()
    with torch.no_grad():
        layer.logit_scale.fill_(0.9)
    x = torch.randn(2, 6, 32)
    weights = layer.attention_weights(x)
    assert weights.shape == (2, 4, 6, 6)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, 6))
    assert torch.all(weights.diagonal(dim1=-2, dim2=-1) == 0)
    _, _, v = layer.split_heads(x)
    out = (weights @ v).transpose(1, 2).reshape(2, 6, 32)
    torch.testing.assert_close(layer(x), layer.proj(out), atol=1e-5, rtol=1e-5)


def test_locality_attention_only_where_asked():
    plain = TransformerLayer(32, 4, 64)
    assert type(plain.attn) is SelfAttention
    assert 'attn.logit_scale' not in plain.state_dict()
    local = LocalityTransformerLayer(32, 4, 64)
    assert isinstance(local.attn, LocalitySelfAttention)
    # with two tokens each one can only attend to the other
    attn = local.attn.eval()
    x = torch.randn(1, 2, 32)
    v = (x @ attn.qkv.weight.t())[..., 64:]
    expected = v.flip(1) @ attn.proj.weight.t() + attn.proj.bias
    torch.testing.assert_close(attn(x), expected, atol=1e-5, rtol=1e-5)


def test_locality_attention_runs_through_fused_kernel(monkeypatch):
    calls = []
    original = torch.nn.functional.scaled_dot_product_attention

    def spy(*args, **kwargs):
        calls.append((kwargs['scale'], kwargs['attn_mask']))
        return original(*args, **kwargs)

    monkeypatch.setattr(
        torch.nn.functional, 'scaled_dot_product_attention', spy
    )
    LocalityTransformerLayer(64, 2, 64)(torch.randn(1, 3, 64))
    ((scale, mask),) = calls
    assert scale == 1.0
    assert torch.equal(mask, ~torch.eye(3, dtype=torch.bool))


def test_locality_attention_through_layer_cfgs(tiny_arch):
    backbone = T2TViT(
        arch=tiny_arch(token_layer='transformer'),
        img_size=32,
        layer_cfgs=dict(type='LocalityTransformerLayer'),
    )
    assert all(
        isinstance(layer.attn, LocalitySelfAttention)
        for layer in backbone.encoder
    )
    # the T2T layers keep the official attention
    assert type(backbone.tokens_to_token.attention1.attn) is SelfAttention
    assert backbone(torch.randn(2, 3, 32, 32))[0].shape == (2, 32)
    with pytest.raises(ValueError) as error:
        T2TViT(
            arch=tiny_arch(),
            img_size=32,
            layer_cfgs=dict(type='LocalityTransformerLayer', locality=True),
        )
    assert str(error.value).startswith(
        "T2TViT got an unknown key 'locality' in layer_cfgs; it takes "
    )


def test_the_config_builds_through_get_model():
    model = get_model(
        Config.fromfile(str(CONFIGS / 't2t-vit-lite_1xb64_custom-32px-lsa.py'))
    )
    assert all(
        isinstance(layer, LocalityTransformerLayer)
        for layer in model.backbone.encoder
    )
    assert model(torch.randn(1, 3, 32, 32), mode='tensor').shape == (1, 3)


def test_the_pictures_draw_the_attention_the_model_applies(tiny_arch):
    """What tools/visualization/vis_attention.py draws of a class token
    (cls_attention_maps): the rows of the model's own locality attention,
    its learned scale and mask included, each summing to 1 with the class
    token's own (masked) position."""
    torch.manual_seed(0)
    backbone = T2TViT(
        arch=tiny_arch(num_heads=2),
        img_size=64,
        layer_cfgs=dict(type='LocalityTransformerLayer'),
    ).eval()
    attn = backbone.encoder[-1].attn
    with torch.no_grad():
        attn.logit_scale.fill_(2.5)
    seen = {}
    attn.register_forward_hook(
        lambda module, args, out: seen.__setitem__('x', args[0])
    )
    images = torch.randn(1, 3, 64, 64)
    maps = cls_attention_maps(backbone, images, [-1])[1]
    assert maps.shape == (1, 2, 4, 4)
    x = seen['x']
    # the class token's row written out: softmax of 2.5 * q k^T over the
    # other tokens, then the image tokens' part
    q, k, _ = attn.split_heads(x)
    logits = 2.5 * (q[:, :, :1] @ k.transpose(-2, -1))
    logits[..., 0] = -math.inf
    row = logits.softmax(-1)[:, :, 0]
    torch.testing.assert_close(maps.flatten(2), row[:, :, 1:])
    torch.testing.assert_close(
        maps.flatten(2).sum(-1), torch.ones(1, 2), atol=1e-6, rtol=0
    )


def test_vis_attention_draws_the_models_own_attention(tmp_path, monkeypatch):
    """tools/visualization/vis_attention.py on a model of locality
    attention (reached with custom_imports): the map it lays over the
    image is the class token's row of the model's own attention (its
    learned scale and mask), the head mean."""
    config = tmp_path / 'tiny_lsa.py'
    config.write_text(
        TINY_CONFIG.format(
            token_layer='performer',
            num_classes=3,
            mean=list(MEAN),
            std=list(STD),
            pipeline=RESIZE_PIPELINE,
        )
        + "model['backbone']['layer_cfgs'] = dict("
        "type='LocalityTransformerLayer')\n"
        "custom_imports = dict(imports=['t2t_plugin', "
        "'projects.small_data.levers'], allow_failed_imports=False)\n"
    )
    model = MODELS.build(Config.fromfile(str(config)).model)
    with torch.no_grad():
        for name, param in model.named_parameters():
            param.normal_(0, 0.2)
        model.backbone.encoder[1].attn.logit_scale.fill_(3.0)
    checkpoint = tmp_path / 'tiny_lsa.pth'
    torch.save(dict(state_dict=model.state_dict(), meta={}), checkpoint)
    image = tmp_path / 'a.png'
    write_image(image)

    vis_attention = load_tool('tools/visualization/vis_attention.py')
    drawn = []

    def overlay(picture, attention, alpha):
        drawn.append(torch.as_tensor(attention))
        return picture

    # the tool takes it from the figures module as it draws
    monkeypatch.setattr('t2t_plugin.analysis.figures.overlay', overlay)
    arguments = [str(image), str(config), str(checkpoint), '--blocks', '1']
    out_dir = ['--out-dir', str(tmp_path / 'out')]
    assert vis_attention.main(arguments + out_dir) == 0
    assert (tmp_path / 'out' / 'a_attention.png').is_file()

    served = load_model(str(config), str(checkpoint))
    inputs, _ = preprocess_image(served, image)
    attn = served.backbone.encoder[1].attn
    seen = {}
    attn.register_forward_hook(
        lambda module, args, out: seen.__setitem__('x', args[0])
    )
    with torch.no_grad():
        served.backbone(inputs)
        rows = attn.attention_weights(seen['x'])[0, :, 0]
    assert attn.logit_scale.item() == 3.0
    torch.testing.assert_close(rows.sum(-1), torch.ones(2))
    assert torch.all(rows[:, 0] == 0)  # not on itself
    (picture,) = drawn
    torch.testing.assert_close(
        picture.float(), rows[:, 1:].mean(0).reshape(2, 2)
    )
