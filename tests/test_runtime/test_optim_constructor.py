"""Layer-wise lr decay through the backbone's get_layer_depth."""

import pytest
from mmengine.optim import build_optim_wrapper
from torch import nn

import t2t_plugin  # noqa: F401
from t2t_plugin.models import T2TViT

CFG = dict(
    optimizer=dict(type='AdamW', lr=1e-3, weight_decay=0.05),
    constructor='mmpretrain.BackboneLayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(layer_decay_rate=0.5, norm_decay_mult=0.0),
)


class Detector(nn.Module):
    def __init__(self, backbone: nn.Module) -> None:
        super().__init__()
        self.backbone = backbone
        self.neck = nn.Linear(8, 8)


def test_backbone_depths_set_the_learning_rates(tiny_arch):
    backbone = T2TViT(arch=tiny_arch('performer'), img_size=32)
    model = Detector(backbone)
    optimizer = build_optim_wrapper(model, CFG).optimizer
    lrs = {id(p): g['lr'] for g in optimizer.param_groups for p in g['params']}
    decays = {
        id(p): g['weight_decay']
        for g in optimizer.param_groups
        for p in g['params']
    }
    # 4 depths: T2T module 0, encoder layers 1 and 2, then the rest
    assert lrs[id(backbone.tokens_to_token.project.weight)] == pytest.approx(
        1e-3 * 0.5**3
    )
    assert lrs[id(backbone.encoder[0].attn.qkv.weight)] == pytest.approx(
        1e-3 * 0.5**2
    )
    assert lrs[id(backbone.encoder[1].ffn.layers[1].weight)] == pytest.approx(
        1e-3 * 0.5
    )
    assert lrs[id(backbone.norm.weight)] == pytest.approx(1e-3)
    assert lrs[id(model.neck.weight)] == pytest.approx(1e-3)
    assert decays[id(backbone.encoder[0].ln1.weight)] == 0
    assert decays[id(backbone.encoder[0].attn.qkv.weight)] == 0.05
    # the performer's fixed random features are a buffer, never optimised
    assert all(
        p is not backbone.tokens_to_token.attention1.attn.random_matrix
        for g in optimizer.param_groups
        for p in g['params']
    )


def test_backbone_without_layer_depths_is_explained():
    with pytest.raises(TypeError, match='get_layer_depth.*Linear'):
        build_optim_wrapper(Detector(nn.Linear(2, 2)), CFG)
