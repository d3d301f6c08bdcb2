"""Each attention of the package against its plain formula."""

import pytest
import torch

from t2t_plugin.models.layers import SelfAttention, TransformerLayer
from t2t_plugin.models.t2t import T2TModule, TokenPerformer, TokenTransformer

from ..reference import (
    layer_norm,
    mlp,
    randomise_norms_and_biases,
    softmax_attention,
    token_performer,
    token_transformer,
    transformer_block,
)


def _randomise(module):
    return randomise_norms_and_biases(module).eval()


def _weights(module):
    """The module's state dict under the prefix ``m``."""
    return {f'm.{key}': value for key, value in module.state_dict().items()}


@pytest.mark.parametrize('in_dims', [147, 576])
def test_token_transformer_matches_formula(in_dims):
    layer = _randomise(TokenTransformer(in_dims, token_dims=64))
    assert layer.attn.scale == pytest.approx(in_dims**-0.5)
    x = torch.randn(2, 50, in_dims)
    expected = token_transformer(x, _weights(layer), 'm')
    torch.testing.assert_close(layer(x), expected, atol=1e-5, rtol=1e-5)


def test_token_transformer_keeps_v_residual_at_equal_widths():
    """The official layer adds ``v``, not ``x``, also when its input and
    output widths agree (a ``t2t_cfg`` with ``in_channels * k**2 ==
    token_dims``)."""
    layer = _randomise(TokenTransformer(64, token_dims=64))
    assert layer.v_shortcut and layer.attn.v_shortcut
    x = torch.randn(2, 50, 64)
    sd = _weights(layer)
    expected = token_transformer(x, sd, 'm')
    torch.testing.assert_close(layer(x), expected, atol=1e-5, rtol=1e-5)
    # the x residual of an encoder layer is a different function here
    y = x + softmax_attention(
        layer_norm(x, sd, 'm.ln1'), sd, 'm.attn', 1, 64**-0.5, False
    )
    x_residual = y + mlp(layer_norm(y, sd, 'm.ln2'), sd, 'm.ffn')
    assert (x_residual - expected).abs().max() > 0.1


def test_t2t_module_sets_v_residual_when_widths_agree():
    # 4 channels x 4 x 4 kernel = 64 = token_dims in the first T2T layer
    module = T2TModule(
        img_size=32,
        in_channels=4,
        embed_dims=32,
        token_dims=64,
        token_layer='transformer',
        kernel_sizes=(4, 3, 3),
        paddings=(0, 1, 1),
    )
    assert module.attention1.attn.input_dims == 64
    assert module.attention1.v_shortcut and module.attention2.v_shortcut


def test_encoder_layer_has_x_residual_and_rejects_width_change():
    assert not TransformerLayer(64, 2, 128).v_shortcut
    with pytest.raises(ValueError, match='v_shortcut=True'):
        TransformerLayer(64, 1, 64, input_dims=147)


@pytest.mark.parametrize('in_dims', [147, 576])
def test_token_performer_matches_formula(in_dims):
    layer = _randomise(TokenPerformer(in_dims, token_dims=64))
    x = torch.randn(2, 50, in_dims)
    expected = token_performer(x, _weights(layer), 'm')
    torch.testing.assert_close(layer(x), expected, atol=1e-5, rtol=1e-5)


def test_performer_random_matrix_is_fixed_orthogonal_and_saved():
    layer = TokenPerformer(147, token_dims=64)
    w = layer.attn.random_matrix
    assert w.shape == (32, 64)
    # rows orthogonal, each of norm sqrt(m)
    torch.testing.assert_close(
        w @ w.t(), 32 * torch.eye(32), atol=1e-4, rtol=0
    )
    assert 'attn.random_matrix' in layer.state_dict()
    assert all(p is not w for p in layer.parameters())


def test_performer_under_bf16_autocast_is_finite_and_close():
    layer = _randomise(TokenPerformer(147, token_dims=64))
    # large activations: the regime where half-precision features underflow
    x = 3 * torch.randn(2, 196, 147)
    reference = layer(x)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        out = layer(x)
    assert torch.isfinite(out).all()
    assert (out.float() - reference).abs().max() < 0.1 * reference.abs().max()


@pytest.mark.parametrize('num_heads', [1, 4, 6])
def test_encoder_layer_matches_formula(num_heads):
    layer = _randomise(TransformerLayer(96, num_heads, 192))
    assert layer.attn.scale == pytest.approx((96 // num_heads) ** -0.5)
    x = torch.randn(2, 17, 96)
    expected = transformer_block(x, _weights(layer), 'm', num_heads)
    torch.testing.assert_close(layer(x), expected, atol=1e-5, rtol=1e-5)


def test_attention_runs_through_fused_kernel(monkeypatch):
    calls = []
    original = torch.nn.functional.scaled_dot_product_attention

    def spy(*args, **kwargs):
        calls.append(kwargs.get('scale'))
        return original(*args, **kwargs)

    monkeypatch.setattr(
        torch.nn.functional, 'scaled_dot_product_attention', spy
    )
    TransformerLayer(64, 2, 64)(torch.randn(1, 5, 64))
    TokenTransformer(147)(torch.randn(1, 5, 147))
    assert calls == [pytest.approx(32**-0.5), pytest.approx(147**-0.5)]


def _qk_products(attn):
    """``W_q^T W_k`` of each head, ``(heads, input_dims, input_dims)``."""
    q, k, _ = attn.qkv.weight.view(
        3, attn.num_heads, attn.head_dims, attn.input_dims
    )
    return q.transpose(1, 2) @ k


def _value_path(attn):
    """``W_v^T W_proj^T``: a token's path through values and projection."""
    v = attn.qkv.weight[2 * attn.embed_dims :]
    return v.t() @ attn.proj.weight.t()


def test_mimetic_init_without_noise_is_the_identity():
    attn = SelfAttention(16, 16, num_heads=1, qkv_bias=True)
    torch.manual_seed(0)
    attn.mimetic_init_(alpha_qk=0.0, beta_qk=0.7, alpha_vo=0.0, beta_vo=0.4)
    eye = torch.eye(16)
    torch.testing.assert_close(
        _qk_products(attn)[0], 0.7 * eye, atol=1e-5, rtol=0
    )
    torch.testing.assert_close(
        _value_path(attn), -0.4 * eye, atol=1e-5, rtol=0
    )
    assert torch.all(attn.qkv.bias == 0) and torch.all(attn.proj.bias == 0)


def test_mimetic_init_per_head_is_a_scaled_projection():
    # 4 heads of 8 dims on 32 input dims: each head's W_q^T W_k is the best
    # rank-8 approximation of beta * I, i.e. beta times a projection
    attn = SelfAttention(32, 32, num_heads=4)
    attn.mimetic_init_(alpha_qk=0.0, beta_qk=0.5)
    for product in _qk_products(attn).detach():
        torch.testing.assert_close(product, product.t(), atol=1e-5, rtol=0)
        torch.testing.assert_close(
            product @ product, 0.5 * product, atol=1e-5, rtol=0
        )
        assert torch.trace(product).item() == pytest.approx(0.5 * 8, abs=1e-4)


def test_mimetic_init_with_noise_around_the_identity():
    torch.manual_seed(0)
    dims = 256
    attn = SelfAttention(dims, dims, num_heads=1)
    attn.mimetic_init_(alpha_qk=0.7, beta_qk=0.7, alpha_vo=0.4, beta_vo=0.4)
    eye = torch.eye(dims)
    for product, alpha, beta in (
        (_qk_products(attn)[0], 0.7, 0.7),
        (_value_path(attn), 0.4, -0.4),
    ):
        product = product.detach()
        # diagonal mean beta; the rest is alpha * Z, Z of variance 1 / dims,
        # so its Frobenius norm is alpha * sqrt(dims)
        assert torch.diagonal(product).mean().item() == pytest.approx(
            beta, abs=0.02
        )
        noise = torch.linalg.matrix_norm(product - beta * eye) / dims**0.5
        assert noise.item() == pytest.approx(alpha, rel=0.05)


def test_mimetic_init_keeps_what_it_cannot_shape():
    # a T2T layer, 27 -> 32 dims: q / k rows past the 27th and the values
    # keep their weights
    torch.manual_seed(0)
    attn = SelfAttention(27, 32, num_heads=1, v_shortcut=True)
    before = attn.qkv.weight.detach().clone()
    proj = attn.proj.weight.detach().clone()
    attn.mimetic_init_(alpha_qk=0.0, beta_qk=1.0)
    after = attn.qkv.weight.detach()
    q, k = after[:27], after[32:59]
    torch.testing.assert_close(q.t() @ k, torch.eye(27), atol=1e-5, rtol=0)
    assert torch.equal(after[27:32], before[27:32])
    assert torch.equal(after[59:], before[59:])
    assert torch.equal(attn.proj.weight, proj)


def test_attention_weights_are_those_the_forward_applies():
    """What the pictures draw: rows of the softmax of ``scale * q k^T``,
    each summing to 1, which the forward applies to the values."""
    torch.manual_seed(0)
    layer = SelfAttention(24, 24, num_heads=3).eval()
    x = torch.randn(2, 5, 24)
    weights = layer.attention_weights(x)
    q, k, v = layer.split_heads(x)
    expected = ((q @ k.transpose(-2, -1)) * 8**-0.5).softmax(-1)
    torch.testing.assert_close(weights, expected)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 5))
    out = (weights @ v).transpose(1, 2).reshape(2, 5, 24)
    torch.testing.assert_close(layer(x), layer.proj(out))
