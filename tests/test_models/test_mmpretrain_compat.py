"""mmpretrain-format T2T-ViT checkpoints load strictly into our models.

The key layout is shared; the numbers of its runs are checked in
tests/test_converters/test_mmpretrain.py.
"""

import torch
from mmengine.config import Config
from mmpretrain.registry import MODELS

import t2t_plugin  # noqa: F401

SMALL = dict(embed_dims=48, num_layers=3, num_heads=3, feedforward_channels=96)


def mmpretrain_classifier():
    return MODELS.build(
        dict(
            type='ImageClassifier',
            backbone=dict(
                type='T2T_ViT',
                img_size=64,
                embed_dims=SMALL['embed_dims'],
                num_layers=SMALL['num_layers'],
                layer_cfgs=dict(
                    num_heads=SMALL['num_heads'],
                    feedforward_channels=SMALL['feedforward_channels'],
                ),
            ),
            head=dict(
                type='VisionTransformerClsHead', num_classes=10, in_channels=48
            ),
        )
    )


def our_config(**arch):
    return Config(
        dict(
            model=dict(
                type='ImageClassifier',
                backbone=dict(
                    type='T2TViT',
                    arch=dict(token_layer='transformer', **{**SMALL, **arch}),
                    img_size=64,
                ),
                head=dict(type='T2TClsHead', num_classes=10, in_channels=48),
            )
        )
    )


def our_classifier():
    return MODELS.build(our_config().model)


def test_backbone_state_dict_loads_strictly():
    theirs = mmpretrain_classifier().backbone
    ours = our_classifier().backbone
    result = ours.load_state_dict(theirs.state_dict(), strict=True)
    assert not result.missing_keys and not result.unexpected_keys
    for key, value in theirs.state_dict().items():
        torch.testing.assert_close(ours.state_dict()[key], value)


def test_classifier_checkpoint_loads_strictly():
    theirs = mmpretrain_classifier()
    theirs.init_weights()
    ours = our_classifier()
    ours.load_state_dict(theirs.state_dict(), strict=True)
    # the same classifier weights give the same logits from the same features
    feats = (torch.randn(4, 48),)
    torch.testing.assert_close(ours.head(feats), theirs.head(feats))


def test_pretrained_init_cfg_reads_a_slim_checkpoint(tmp_path):
    source = our_classifier()
    source.init_weights()
    path = tmp_path / 'classifier.pth'
    torch.save({'state_dict': source.state_dict(), 'meta': {}}, path)
    backbone = MODELS.build(
        dict(
            type='T2TViT',
            arch=dict(token_layer='transformer', **SMALL),
            img_size=64,
            init_cfg=dict(
                type='Pretrained', checkpoint=str(path), prefix='backbone.'
            ),
        )
    )
    backbone.init_weights()
    expected = source.state_dict()
    for key, value in backbone.state_dict().items():
        torch.testing.assert_close(value, expected[f'backbone.{key}'])
