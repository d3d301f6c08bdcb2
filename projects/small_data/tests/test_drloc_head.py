"""DRLocClsHead: the relative localisation loss against its formula, its
MLP trained only (a checkpoint serves the recipe), the token grid it needs
checked before the run, its options checked at build."""

import copy

import pytest
import torch
from mmengine.config import Config
from mmpretrain import get_model
from mmpretrain.registry import MODELS
from mmpretrain.structures import DataSample

import projects.small_data.levers  # noqa: F401
from t2t_plugin.runtime.hooks.run_checks import width_problem
from tests.helpers import ROOT, run_main

from . import CONFIGS

DRLOC = CONFIGS / 't2t-vit-lite_1xb64_custom-32px-drloc.py'


def build_head(type='DRLocClsHead', **kwargs):
    head = MODELS.build(
        dict(type=type, num_classes=5, in_channels=8, **kwargs)
    )
    head.init_weights()
    return head


def test_drloc_is_the_l1_error_of_the_offsets_of_random_token_pairs():
    head = build_head(pool='attention', drloc=dict(weight=0.5, pairs=6))
    assert head.drloc_cfg == dict(weight=0.5, pairs=6, hidden=512)
    grid = torch.randn(2, 8, 3, 4)  # (B, C, h, w): 12 tokens per image
    samples = [DataSample().set_gt_label(label) for label in (1, 3)]
    torch.manual_seed(7)
    losses = head.loss((grid,), samples)
    torch.manual_seed(7)
    first, second = torch.randint(12, (2, 6)), torch.randint(12, (2, 6))
    errors = []
    for image in range(2):
        tokens = grid[image].flatten(1).t()  # (12, C), row-major
        for u, v in zip(first[image].tolist(), second[image].tolist()):
            target = torch.tensor([(u // 4 - v // 4) / 3, (u % 4 - v % 4) / 4])
            pred = head.aux_drloc(torch.cat([tokens[u], tokens[v]]))
            errors.append((pred - target).abs())
    expected = 0.5 * torch.stack(errors).mean()
    torch.testing.assert_close(losses['loss_drloc'], expected)
    without = build_head('T2TClsHead', pool='attention')
    assert 'loss_drloc' not in without.loss((grid,), samples)


def test_drloc_weights_train_only_and_load_either_way():
    head = build_head(pool='attention', drloc=dict(hidden=16))
    plain = build_head('T2TClsHead', pool='attention')
    # the logits do not depend on the localisation MLP
    tokens = torch.randn(2, 9, 8)
    plain.load_state_dict(head.state_dict())  # its MLP knowingly dropped
    torch.testing.assert_close(plain((tokens,)), head((tokens,)))
    fresh = build_head(pool='attention', drloc=dict(hidden=16))
    fresh.load_state_dict(plain.state_dict(), strict=False)
    torch.testing.assert_close(fresh((tokens,)), head((tokens,)))


@pytest.mark.parametrize(
    'drloc, accepted',
    [
        (dict(weight=-1), 'weight=-1; give a finite number above 0 and at '
         'most 10'),
        (dict(weight=1e30), 'weight=1e+30; give a finite number above 0 '
         'and at most 10'),
        (dict(weight=float('nan')), 'weight=nan; give a finite number above '
         '0 and at most 10'),
        (dict(weight='0.1x'), "weight='0.1x'; give a finite number above 0 "
         'and at most 10'),
        (dict(pairs=0), 'pairs=0; give an integer of at least 1 and at most '
         '4096'),
        (dict(pairs=-5), 'pairs=-5; give an integer of at least 1 and at '
         'most 4096'),
        (dict(pairs=2.5), 'pairs=2.5; give an integer of at least 1 and at '
         'most 4096'),
        (dict(pairs=10**9), 'pairs=1000000000; give an integer of at least '
         '1 and at most 4096'),
        (dict(hidden=0), 'hidden=0; give an integer of at least 1 and at '
         'most 4096'),
        (dict(pairs=True), 'pairs=True; give an integer of at least 1 and '
         'at most 4096'),
    ],
)  # fmt: skip
def test_drloc_options_are_checked_at_build(drloc, accepted):
    with pytest.raises(ValueError) as error:
        build_head(pool='attention', drloc=drloc)
    assert str(error.value) == f'DRLocClsHead got drloc.{accepted}.'


def test_drloc_mistakes_are_one_line():
    with pytest.raises(ValueError) as error:
        build_head(drloc=dict(pair=3))
    assert str(error.value) == (
        "DRLocClsHead got an unknown key 'pair' in drloc; did you mean "
        "'pairs'? it takes hidden, pairs, weight."
    )
    head = build_head(pool='attention', drloc=dict())
    with pytest.raises(ValueError, match=r'\A[^\n]*\Z') as error:
        head.loss((torch.randn(2, 10, 8),), [DataSample().set_gt_label(0)] * 2)
    assert 'square grid of tokens' in str(error.value)


def test_the_options_are_checked_through_get_model():
    cfg = Config.fromfile(str(DRLOC))
    cfg.model.head.drloc.pairs = 0
    with pytest.raises(ValueError, match='drloc.pairs=0; give an integer'):
        get_model(cfg)


def test_a_drloc_checkpoint_serves_the_recipe_through_get_model(tmp_path):
    """Trained with the localisation loss, tested with the recipe's config
    through mmpretrain's get_model: the MLP dropped, the same logits."""
    config = Config.fromfile(
        str(ROOT / 'configs' / 't2t-vit-lite_1xb64_custom-32px.py')
    )
    trained = get_model(Config.fromfile(str(DRLOC)))
    trained.init_weights()
    assert any(k.startswith('head.aux_drloc.') for k in trained.state_dict())
    path = tmp_path / 'drloc.pth'
    torch.save({'state_dict': trained.state_dict()}, path)
    served = get_model(copy.deepcopy(config), pretrained=str(path))
    assert not any('aux_' in k for k in served.state_dict())
    images = torch.randn(2, 3, 32, 32)
    trained.eval()
    torch.testing.assert_close(
        served(images, mode='tensor'), trained(images, mode='tensor')
    )


def test_the_run_check_refuses_drloc_without_a_token_grid(tiny_arch):
    """drloc behind a backbone whose raw tokens carry a class token: one
    line before the run, and the first training step says the same."""
    model = MODELS.build(
        dict(
            type='ImageClassifier',
            backbone=dict(
                type='T2TViT', arch=tiny_arch(), img_size=32, out_type='raw'
            ),
            head=dict(
                type='DRLocClsHead',
                num_classes=5,
                in_channels=32,
                pool='attention',
            ),
        )
    )
    advice = (
        "set out_type='raw' and with_cls_token=False (or "
        "out_type='featmap') in the backbone."
    )
    assert width_problem(model) == (
        'DRLocClsHead reads a square grid of tokens, got '
        f"out_type='raw' with a class token; {advice}"
    )
    samples = [DataSample().set_gt_label(0)]
    with pytest.raises(ValueError) as error:
        model(torch.zeros(1, 3, 32, 32), samples, mode='loss')
    # 2x2 tokens (strides 4, 2, 2 at 32 px) and the class token
    assert str(error.value) == (
        'DRLocClsHead reads a square grid of tokens, got features '
        f'of shape (1, 5, 32); {advice}'
    )
    model.backbone.with_cls_token = False
    assert width_problem(model) is None
    # the width comes first, as for T2TClsHead
    model.head.in_channels = 48
    assert width_problem(model) == (
        'DRLocClsHead has in_channels=48, but the backbone gives features of '
        'width 32; set model.head.in_channels=32.'
    )


def test_flops_count_the_model_that_serves_inference(tmp_path):
    """get_flops.py on the config with the localisation loss gives the
    parameters and MACs of the same config without it: the loss's MLP
    trains only."""
    from t2t_plugin.analysis import count_complexity

    cfg = Config.fromfile(str(DRLOC))
    model = MODELS.build(cfg.model)
    plain_cfg = copy.deepcopy(cfg.model)
    plain_cfg.head.type = 'T2TClsHead'
    plain_cfg.head.pop('drloc')
    plain = MODELS.build(plain_cfg)
    mlp = sum(p.numel() for p in model.head.aux_drloc.parameters())
    total = sum(p.numel() for p in model.parameters())
    assert mlp > 0
    assert total - mlp == sum(p.numel() for p in plain.parameters())
    ours = count_complexity(model, (32, 32), parts=('head',))
    reference = count_complexity(plain, (32, 32), parts=('head',))
    assert ours.params == total - mlp
    assert ours.macs == reference.macs
    assert ours.parts['head'].params == reference.parts['head'].params

    result = run_main('analysis_tools/get_flops', DRLOC)
    assert result.returncode == 0, result.stderr[-2000:]
    assert f'({total - mlp:,})' in result.stdout
    assert f'({total:,})' not in result.stdout
