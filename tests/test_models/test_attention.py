"""Each attention of the package against its plain formula."""

import pytest
import torch

from t2t_plugin.models.layers import TransformerLayer
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
