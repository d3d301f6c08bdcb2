"""Plain-formula statements of the T2T-ViT math, independent of the package.

They follow the paper and the official code line by line (explicit softmax,
``repeat`` and ``einsum``), read weights from a state dict by name, and are
what the package's fused and reorganised paths are checked against.
"""

import math

import numpy as np
import torch
import torch.nn.functional as F


def randomise_norms_and_biases(module):
    """Non-trivial LayerNorm affine parameters and biases, so that a
    comparison with the formulas below involves every parameter."""
    with torch.no_grad():
        for name, param in module.named_parameters():
            if 'ln' in name:
                param.normal_(1.0 if name.endswith('weight') else 0.0, 0.2)
            elif name.endswith('bias'):
                param.normal_(0, 0.1)
    return module


def layer_norm(x, sd, name, eps=1e-5):
    return F.layer_norm(
        x, x.shape[-1:], sd[f'{name}.weight'], sd[f'{name}.bias'], eps
    )


def linear(x, sd, name):
    return F.linear(x, sd[f'{name}.weight'], sd.get(f'{name}.bias'))


def mlp(x, sd, name):
    hidden = F.gelu(linear(x, sd, f'{name}.layers.0.0'))
    return linear(hidden, sd, f'{name}.layers.1')


def softmax_attention(x, sd, name, num_heads, scale, v_residual):
    batch, length, _ = x.shape
    qkv = linear(x, sd, f'{name}.qkv')
    width = qkv.shape[-1] // 3
    head = width // num_heads
    qkv = qkv.reshape(batch, length, 3, num_heads, head).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    attn = torch.softmax((q * scale) @ k.transpose(-2, -1), dim=-1)
    out = (attn @ v).transpose(1, 2).reshape(batch, length, width)
    out = linear(out, sd, f'{name}.proj')
    if v_residual:
        out = v.transpose(1, 2).reshape(batch, length, width) + out
    return out


def transformer_block(x, sd, name, num_heads):
    scale = (x.shape[-1] // num_heads) ** -0.5
    x = x + softmax_attention(
        layer_norm(x, sd, f'{name}.ln1'),
        sd,
        f'{name}.attn',
        num_heads,
        scale,
        False,
    )
    return x + mlp(layer_norm(x, sd, f'{name}.ln2'), sd, f'{name}.ffn')


def token_transformer(x, sd, name):
    in_dims = x.shape[-1]
    y = softmax_attention(
        layer_norm(x, sd, f'{name}.ln1'),
        sd,
        f'{name}.attn',
        1,
        in_dims**-0.5,
        True,
    )
    return y + mlp(layer_norm(y, sd, f'{name}.ln2'), sd, f'{name}.ffn')


def performer_features(x, w):
    m = w.shape[0]
    xd = (x * x).sum(dim=-1, keepdim=True).repeat(1, 1, m) / 2
    wtx = torch.einsum('bti,mi->btm', x.float(), w)
    return torch.exp(wtx - xd) / math.sqrt(m)


def performer_attention(x, sd, name):
    w = sd[f'{name}.random_matrix']
    emb = w.shape[1]
    k, q, v = torch.split(linear(x, sd, f'{name}.kqv'), emb, dim=-1)
    kp, qp = performer_features(k, w), performer_features(q, w)
    normaliser = torch.einsum('bti,bi->bt', qp, kp.sum(dim=1)).unsqueeze(2)
    kptv = torch.einsum('bin,bim->bnm', v.float(), kp)
    y = torch.einsum('bti,bni->btn', qp, kptv) / (
        normaliser.repeat(1, 1, emb) + 1e-8
    )
    return v + linear(y, sd, f'{name}.proj')


def token_performer(x, sd, name):
    y = performer_attention(
        layer_norm(x, sd, f'{name}.ln1'), sd, f'{name}.attn'
    )
    return y + mlp(layer_norm(y, sd, f'{name}.ln2'), sd, f'{name}.ffn')


def sinusoid_table(n_position, dims):
    angles = np.array(
        [
            [pos / np.power(10000, 2 * (i // 2) / dims) for i in range(dims)]
            for pos in range(n_position)
        ]
    )
    angles[:, 0::2] = np.sin(angles[:, 0::2])
    angles[:, 1::2] = np.cos(angles[:, 1::2])
    return torch.FloatTensor(angles).unsqueeze(0)


def t2t_vit_logits(
    img, sd, token_layer, num_heads, splits=((7, 4, 2), (3, 2, 1), (3, 2, 1))
):
    """Logits of a T2T-ViT classifier from its state dict, plain formulas.

    ``sd`` holds the backbone under ``backbone.`` and the head under
    ``head.layers.head``. The position table is recomputed from the formula
    (for the input size the model was built for).
    """
    layer = (
        token_transformer if token_layer == 'transformer' else token_performer
    )
    x = img
    size = img.shape[-1]
    for step in range(2):
        kernel, stride, padding = splits[step]
        x = F.unfold(x, kernel, padding=padding, stride=stride).transpose(1, 2)
        x = layer(x, sd, f'backbone.tokens_to_token.attention{step + 1}')
        size = size // stride
        x = x.transpose(1, 2).reshape(x.shape[0], x.shape[2], size, size)
    kernel, stride, padding = splits[2]
    x = F.unfold(x, kernel, padding=padding, stride=stride).transpose(1, 2)
    x = linear(x, sd, 'backbone.tokens_to_token.project')
    cls = sd['backbone.cls_token'].expand(x.shape[0], -1, -1)
    x = torch.cat((cls, x), dim=1)
    x = x + sinusoid_table(x.shape[1], x.shape[2])
    depth = 1 + max(
        int(k.split('.')[2]) for k in sd if k.startswith('backbone.encoder.')
    )
    for index in range(depth):
        x = transformer_block(x, sd, f'backbone.encoder.{index}', num_heads)
    x = layer_norm(x, sd, 'backbone.norm')
    return linear(x[:, 0], sd, 'head.layers.head')
