"""ConvStemTokenLayer: a token layer of the T2T module registered from the
project, against the formula (conv, BatchNorm, ReLU twice, then the
projection)."""

import torch
from mmengine.config import Config
from mmpretrain import get_model

from projects.small_data.levers import ConvStemTokenLayer
from t2t_plugin.models import T2TModule, T2TViT

from . import CONFIGS


def test_conv_stem_matches_formula():
    """The running statistics and affine terms of the norms set to other
    values."""
    torch.manual_seed(0)
    module = T2TModule(
        img_size=32,
        embed_dims=24,
        token_dims=8,
        token_layer='ConvStemTokenLayer',
        kernel_sizes=(3, 3, 3),
        strides=(2, 1, 2),
        paddings=(1, 1, 1),
    ).eval()
    assert isinstance(module.soft_split0, ConvStemTokenLayer)
    for name, value in module.state_dict().items():
        if '.norm_act.' not in name or 'num_batches' in name:
            continue
        if name.endswith(('.running_var', '.weight')):
            value.uniform_(0.5, 2.0)
        else:
            value.normal_()
    sd = module.state_dict()
    x = torch.randn(2, 3, 32, 32)
    y = x
    for step, (stride, padding) in enumerate(((2, 1), (1, 1))):
        y = torch.nn.functional.conv2d(
            y,
            sd[f'soft_split{step}.weight'],
            sd[f'soft_split{step}.bias'],
            stride,
            padding,
        )
        norm = f'soft_split{step}.norm_act.0'
        y = (y - sd[f'{norm}.running_mean'][:, None, None]) / torch.sqrt(
            sd[f'{norm}.running_var'][:, None, None] + 1e-5
        )
        y = y * sd[f'{norm}.weight'][:, None, None]
        y = torch.relu(y + sd[f'{norm}.bias'][:, None, None])
    y = torch.nn.functional.conv2d(
        y, sd['project.weight'], sd['project.bias'], 2, 1
    )
    tokens, grid, maps = module(x)
    assert grid == (8, 8) and maps[1].shape == (2, 8, 16, 16)
    torch.testing.assert_close(
        tokens, y.flatten(2).transpose(1, 2), atol=1e-5, rtol=1e-5
    )


def test_non_square_input(tiny_arch):
    backbone = T2TViT(
        arch=tiny_arch(token_layer='ConvStemTokenLayer'),
        img_size=64,
        out_type='featmap',
        out_t2t_maps=True,
    )
    outs = backbone(torch.randn(2, 3, 96, 64))
    assert [tuple(o.shape) for o in outs] == [
        (2, 64, 24, 16),
        (2, 64, 12, 8),
        (2, 32, 6, 4),
    ]


def test_the_config_builds_through_get_model():
    model = get_model(
        Config.fromfile(
            str(CONFIGS / 't2t-vit-lite_1xb64_custom-32px-conv-stem.py')
        )
    )
    assert isinstance(model.backbone.tokens_to_token.soft_split1,
                      ConvStemTokenLayer)  # fmt: skip
    assert model(torch.randn(1, 3, 32, 32), mode='tensor').shape == (1, 3)
