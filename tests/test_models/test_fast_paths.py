"""The optimised paths of the model against the plain formulas they replace.

The references here are written out from the paper and the official code:
explicit ``softmax(q k^T * scale) v``, the performer's ``repeat`` / ``einsum``
formula, ``nn.Unfold`` soft splits with transposed maps. Forward values and
gradients must agree to 1e-5 in float32; ``torch.compile`` must trace the
backbone in one graph with eager results; activation checkpointing must
give the same gradients with less memory.
"""

import math

import pytest
import torch
import torch.nn.functional as F

from t2t_plugin.analysis.speed import StepRunner, peak_memory, tensor_bytes
from t2t_plugin.models.backbones import T2TViT
from t2t_plugin.models.layers import SelfAttention
from t2t_plugin.models.t2t import PerformerAttention, SoftSplit, T2TModule

from ..reference import randomise_norms_and_biases

TOL = dict(atol=1e-5, rtol=1e-5)


def plain_softmax_attention(x, attn):
    """``softmax(q k^T * scale) v``, heads split by hand, v residual."""
    batch, length, _ = x.shape
    heads, head_dims = attn.num_heads, attn.head_dims
    qkv = F.linear(x, attn.qkv.weight, attn.qkv.bias)
    q, k, v = qkv.reshape(batch, length, 3, heads, head_dims).permute(
        2, 0, 3, 1, 4
    )
    weights = torch.softmax(q @ k.transpose(-2, -1) * attn.scale, dim=-1)
    out = (weights @ v).transpose(1, 2).reshape(batch, length, -1)
    out = F.linear(out, attn.proj.weight, attn.proj.bias)
    if attn.v_shortcut:
        out = out + v.transpose(1, 2).reshape(batch, length, -1)
    return out


def plain_performer_attention(x, attn):
    """The official performer formula, with its ``repeat`` and ``einsum``."""
    w = attn.random_matrix
    m, emb = w.shape
    k, q, v = torch.split(
        F.linear(x, attn.kqv.weight, attn.kqv.bias), emb, dim=-1
    )

    def features(t):
        xd = (t * t).sum(dim=-1, keepdim=True).repeat(1, 1, m) / 2
        return torch.exp(torch.einsum('bti,mi->btm', t, w) - xd) / math.sqrt(m)

    kp, qp = features(k), features(q)
    normaliser = torch.einsum('bti,bi->bt', qp, kp.sum(dim=1)).unsqueeze(2)
    kptv = torch.einsum('bin,bim->bnm', v, kp)
    y = torch.einsum('bti,bni->btn', qp, kptv) / (
        normaliser.repeat(1, 1, emb) + 1e-8
    )
    return v + F.linear(y, attn.proj.weight, attn.proj.bias)


def plain_t2t_module(images, module):
    """The official T2T pipeline: ``nn.Unfold``, transposes, reshapes."""
    batch = images.shape[0]
    x = images
    maps = []
    for step, layer in enumerate((module.attention1, module.attention2)):
        kernel = module.kernel_sizes[step]
        tokens = F.unfold(
            x,
            kernel,
            padding=module.paddings[step],
            stride=module.strides[step],
        ).transpose(1, 2)
        tokens = layer(tokens)
        height = (
            x.shape[2] + 2 * module.paddings[step] - kernel
        ) // module.strides[step] + 1
        x = tokens.transpose(1, 2).reshape(
            batch, module.token_dims, height, -1
        )
        maps.append(x)
    tokens = F.unfold(
        x,
        module.kernel_sizes[2],
        padding=module.paddings[2],
        stride=module.strides[2],
    ).transpose(1, 2)
    return module.project(tokens), maps


def _grads(module, inputs, output):
    """Gradients of a fixed random projection of ``output``."""
    probe = torch.randn(
        output.shape, generator=torch.Generator().manual_seed(1)
    )
    params = [p for p in module.parameters() if p.requires_grad]
    return torch.autograd.grad((output * probe).sum(), [inputs] + params)


def assert_close_scaled(got, expected):
    """1e-5 of the tensor's largest magnitude (at least 1): gradients sum
    many terms, whose float32 rounding grows with their size."""
    scale = expected.abs().max().clamp(min=1)
    torch.testing.assert_close(got / scale, expected / scale, **TOL)


def _assert_same_grads(module, x, fast, plain):
    fast_grads = _grads(module, x, fast)
    plain_grads = _grads(module, x, plain)
    assert len(fast_grads) == len(plain_grads)
    for got, expected in zip(fast_grads, plain_grads):
        assert_close_scaled(got, expected)


@pytest.mark.parametrize(
    'config',
    [
        # the first T2T transformer layer: one head, scale from the input
        # width, v residual
        dict(input_dims=147, embed_dims=64, scale=147**-0.5, v_shortcut=True),
        # an encoder layer: several heads, the head-width scale
        dict(input_dims=48, embed_dims=48, num_heads=4),
    ],
)
def test_fused_attention_matches_softmax_formula(config):
    attn = randomise_norms_and_biases(SelfAttention(**config, qkv_bias=True))
    x = torch.randn(2, 37, config['input_dims'], requires_grad=True)
    fast = attn(x)
    plain = plain_softmax_attention(x, attn)
    torch.testing.assert_close(fast, plain, **TOL)
    _assert_same_grads(attn, x, fast, plain)


@pytest.mark.parametrize('in_dims', [147, 576])
def test_performer_matches_official_formula(in_dims):
    attn = randomise_norms_and_biases(
        PerformerAttention(in_dims, 64, proj_drop=0.0)
    )
    x = torch.randn(2, 49, in_dims, requires_grad=True)
    fast = attn(x)
    plain = plain_performer_attention(x, attn)
    torch.testing.assert_close(fast, plain, **TOL)
    _assert_same_grads(attn, x, fast, plain)


@pytest.mark.parametrize(
    'kernel,stride,padding', [(7, 4, 2), (3, 2, 1), (3, 1, 1), (1, 1, 0)]
)
def test_soft_split_equals_unfold(kernel, stride, padding):
    images = torch.randn(2, 5, 16, 12, requires_grad=True)
    split = SoftSplit(kernel, stride, padding)
    fast = split(images.permute(0, 2, 3, 1))
    plain = F.unfold(images, kernel, padding=padding, stride=stride).transpose(
        1, 2
    )
    assert torch.equal(fast, plain)
    probe = torch.randn(plain.shape)
    (fast_grad,) = torch.autograd.grad((fast * probe).sum(), images)
    (plain_grad,) = torch.autograd.grad((plain * probe).sum(), images)
    assert_close_scaled(fast_grad, plain_grad)


@pytest.mark.parametrize('token_layer', ['transformer', 'performer'])
def test_t2t_module_matches_unfold_pipeline(token_layer):
    module = randomise_norms_and_biases(
        T2TModule(
            img_size=64,
            embed_dims=32,
            token_dims=16,
            token_layer=token_layer,
            drop_rate=0.0,
        )
    )
    images = torch.randn(2, 3, 64, 48, requires_grad=True)
    tokens, grid, maps = module(images)
    plain_tokens, plain_maps = plain_t2t_module(images, module)
    assert grid == (4, 3)
    torch.testing.assert_close(tokens, plain_tokens, **TOL)
    for fast_map, plain_map in zip(maps, plain_maps):
        assert fast_map.shape == plain_map.shape
        torch.testing.assert_close(fast_map, plain_map, **TOL)
    _assert_same_grads(module, images, tokens, plain_tokens)


@pytest.mark.parametrize('token_layer', ['transformer', 'performer'])
def test_compiled_backbone_matches_eager(token_layer, tiny_t2t_vit):
    # aot_eager traces forward and backward the way inductor does, without
    # its minute of C++ compilation; fullgraph fails on any graph break
    torch._dynamo.reset()
    model = randomise_norms_and_biases(tiny_t2t_vit(token_layer))
    compiled = torch.compile(model, fullgraph=True, backend='aot_eager')
    images = torch.randn(2, 3, 32, 32)
    model.eval()
    with torch.no_grad():
        torch.testing.assert_close(
            compiled(images)[0], model(images)[0], **TOL
        )
    model.train()
    eager_grads = torch.autograd.grad(
        model(images)[0].square().sum(), list(model.parameters())
    )
    compiled_grads = torch.autograd.grad(
        compiled(images)[0].square().sum(), list(model.parameters())
    )
    for got, expected in zip(compiled_grads, eager_grads):
        assert_close_scaled(got, expected)


def test_with_cp_same_gradients_under_dropout(tiny_t2t_vit):
    # checkpointing replays the forward: the dropout masks must be the same
    kwargs = dict(drop_rate=0.1, drop_path_rate=0.1)
    plain = tiny_t2t_vit('performer', **kwargs)
    with_cp = tiny_t2t_vit('performer', with_cp=True, **kwargs)
    with_cp.load_state_dict(plain.state_dict())
    plain.train()
    with_cp.train()
    images = torch.randn(2, 3, 32, 32)
    grads = []
    for model in (plain, with_cp):
        torch.manual_seed(7)
        model(images)[0].square().sum().backward()
        grads.append([param.grad for param in model.parameters()])
    for got, expected in zip(*grads):
        assert_close_scaled(got, expected)


def test_with_cp_lowers_training_peak_memory(tiny_arch):
    arch = tiny_arch('transformer', num_layers=4)
    plain = T2TViT(arch, img_size=32, t2t_cfg=dict(token_dims=16))
    with_cp = T2TViT(
        arch, img_size=32, t2t_cfg=dict(token_dims=16), with_cp=True
    )
    with_cp.load_state_dict(plain.state_dict())
    # a batch large enough for activations, not AdamW's temporaries, to
    # make the peak
    images = torch.randn(32, 3, 32, 32)
    activations = []
    for model in (plain, with_cp):
        step = StepRunner(model, images, train=True, dtype='fp32')
        step()
        # what the step adds to weights, gradients and optimizer state
        baseline = tensor_bytes(step.live_tensors())
        activations.append(peak_memory(step) - baseline)
    assert activations[1] < 0.85 * activations[0]
