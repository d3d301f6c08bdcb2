"""mmpretrain-format T2T-ViT checkpoints load strictly into our models.

Only the key layout is shared: mmpretrain 1.2.0's ``T2T_ViT`` scales its
attention wrongly, so its outputs are not a reference for ours.
"""

import logging

import pytest
import torch
from mmengine.config import Config
from mmpretrain.registry import MODELS

import t2t_plugin  # noqa: F401
from t2t_plugin.engine import CheckpointMismatchError

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


def test_a_run_of_mmpretrains_t2t_vit_gives_its_logits_here(
    tmp_path, monkeypatch
):
    """A checkpoint an mmengine Runner saved while training mmpretrain's
    T2T_ViT (its meta holds the config) is converted by the reader with
    one line: its attention reads q.k * sqrt(head_dim), so its q rows are
    rescaled, and our model then gives mmpretrain's logits."""
    from mmengine.logging import MMLogger
    from mmengine.runner import save_checkpoint
    from mmpretrain import get_model

    torch.manual_seed(0)
    theirs = mmpretrain_classifier().eval()
    with torch.no_grad():
        for param in theirs.parameters():
            param.normal_(0, 0.2)
    cfg_text = (
        "model = dict(type='ImageClassifier', backbone=dict(type='T2T_ViT', "
        f'layer_cfgs=dict(num_heads={SMALL["num_heads"]})))'
    )
    path = tmp_path / 'epoch_1.pth'
    save_checkpoint(
        {'state_dict': theirs.state_dict(), 'meta': {'cfg': cfg_text}},
        str(path),
    )
    images = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        expected = theirs(images)
        unconverted = our_classifier().eval()
        unconverted.load_state_dict(theirs.state_dict())
        # the same weights without the conversion: other logits
        assert (unconverted(images) - expected).abs().max() > 1e-2
    lines = []
    monkeypatch.setattr(
        MMLogger.get_current_instance(),
        'log',
        lambda level, line, *a, **k: (
            lines.append(line) if level >= logging.WARNING else None
        ),
    )
    ours = get_model(our_config(), pretrained=str(path)).eval()
    with torch.no_grad():
        torch.testing.assert_close(ours(images), expected)
    assert lines == [
        f"Checkpoint {path} comes from mmpretrain's T2T_ViT, whose attention "
        'scales q.k by sqrt(head_dim) instead of the official scale: its q '
        "weights are rescaled to give that model's outputs (num_heads="
        f'{SMALL["num_heads"]}).'
    ]
    # another number of heads than the run's is refused by the arch record
    other = our_config(num_heads=6)
    with pytest.raises(CheckpointMismatchError) as error:
        get_model(other, pretrained=str(path))
    assert 'was trained with model.backbone.arch.num_heads=3' in str(
        error.value
    )
