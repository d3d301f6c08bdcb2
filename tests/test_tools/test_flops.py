"""MAC counting: against a formula written out by hand, and the paper."""

import re

import pytest
import torch
from mmpretrain.registry import MODELS
from torch import nn
from torch.nn import functional as F

import t2t_plugin  # noqa: F401
from t2t_plugin.analysis import PAPER_MACS, count_complexity
from t2t_plugin.analysis.complexity import flop_analyzer

from ..helpers import ROOT, load_tool

get_flops = load_tool('tools/analysis_tools/get_flops.py')


def expected_macs(
    token_layer, side, embed, depth, ffn, token_dims, num_classes
):
    """MACs of a T2T-ViT classifier with the default soft splits.

    Returns (total, attention products).
    """
    m = token_dims // 2
    total = attention = 0
    splits = [
        ((side // 4) ** 2, 3 * 7 * 7),
        ((side // 8) ** 2, token_dims * 9),
    ]
    for tokens, in_dims in splits:
        total += tokens * in_dims * 3 * token_dims  # qkv / kqv
        total += 3 * tokens * token_dims * token_dims  # proj and the MLP
        if token_layer == 'transformer':
            products = 2 * tokens * tokens * token_dims  # q k^T, attn v
        else:
            # phi(q), phi(k); phi(k)^T v; phi(q) (...); the normaliser
            products = (
                2 * tokens * token_dims * m
                + 2 * tokens * m * token_dims
                + tokens * m
            )
        total += products
        attention += products
    total += (side // 16) ** 2 * token_dims * 9 * embed  # projection
    length = (side // 16) ** 2 + 1
    per_layer_products = 2 * length * length * embed
    total += depth * (
        length * embed * 4 * embed
        + 2 * length * embed * ffn
        + per_layer_products
    )
    attention += depth * per_layer_products
    return total + embed * num_classes, attention


def _classifier(arch, img_size, num_classes):
    embed = arch['embed_dims'] if isinstance(arch, dict) else 384
    return MODELS.build(
        dict(
            type='ImageClassifier',
            backbone=dict(
                type='T2TViT',
                arch=arch,
                img_size=img_size,
                t2t_cfg=dict(token_dims=16)
                if isinstance(arch, dict)
                else None,
            ),
            head=dict(
                type='T2TClsHead', num_classes=num_classes, in_channels=embed
            ),
        )
    )


@pytest.mark.parametrize('token_layer', ['performer', 'transformer'])
def test_counts_match_the_formula(token_layer):
    arch = dict(
        token_layer=token_layer,
        embed_dims=48,
        num_layers=2,
        num_heads=3,
        feedforward_channels=96,
    )
    result = count_complexity(_classifier(arch, 64, 10), (64, 64))
    total, attention = expected_macs(token_layer, 64, 48, 2, 96, 16, 10)
    assert result.macs == total
    assert result.attention_macs == attention


def _run_tool(capsys, arch):
    config = ROOT / f'configs/t2t-vit-{arch}_8xb64_in1k.py'
    assert get_flops.main([str(config)]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize(
    'arch,params', [('14', 21_465_806), ('t-14', 21_465_422)]
)
def test_tool_is_within_a_few_percent_of_the_paper(capsys, arch, params):
    out = _run_tool(capsys, arch)
    assert f'({params:,})' in out
    macs = float(re.search(r'^MACs +([\d.]+)G', out, re.M).group(1))
    paper = float(re.search(r'^Paper MACs +([\d.]+)G', out, re.M).group(1))
    assert paper * 1e9 == PAPER_MACS[(arch, 224)]
    assert macs == pytest.approx(paper, rel=0.03)
    attention = float(re.search(r'attention products ([\d.]+)G', out).group(1))
    if arch == 't-14':
        # what hook counters miss; the first T2T layer alone: 2 * 3136^2 * 64
        assert attention > 2 * 3136**2 * 64 / 1e9


def test_all_prints_the_comparison_table(capsys, monkeypatch):
    # the smallest arch only, to keep the test fast
    monkeypatch.setattr('t2t_plugin.analysis.PAPER_MACS', {('7', 224): 1.1e9})
    assert get_flops.main(['--all']) == 0
    row = next(
        line for line in capsys.readouterr().out.splitlines() if ' 7 ' in line
    )
    cells = [cell.strip() for cell in row.strip('│ ').split('│')]
    assert cells[:3] == ['7', '224x224', '4.26M']
    assert cells[5:] == ['1.10G', '+4.3%']


TINY_DET = """
_base_ = '{base}'
model = dict(
    backbone=dict(
        arch=dict(_delete_=True, token_layer='transformer', embed_dims=32,
                  num_layers=2, num_heads=2, feedforward_channels=64),
        img_size=64, t2t_cfg=dict(token_dims=16), init_cfg=None),
    neck=[
        dict(type='mmpretrain.T2TFeaturePyramid', in_channels=(16, 16, 32),
             out_channels=(16, 16, 32, 32)),
        dict(type='FPN', in_channels=[16, 16, 32, 32], out_channels=256,
             num_outs=5),
    ],
    # few proposals keep the RoI heads cheap
    test_cfg=dict(rpn=dict(nms_pre=50, max_per_img=10)))
"""


@pytest.mark.dense
def test_detectors_count_the_backbone_and_the_whole_model(
    tmp_path, capsys, monkeypatch
):
    pytest.importorskip('mmdet')
    config = tmp_path / 'tiny_mask_rcnn.py'
    config.write_text(
        TINY_DET.format(
            base=ROOT / 'configs/det/mask-rcnn_t2t-vit-t-14_fpn_1x_coco.py'
        )
    )
    assert get_flops.main([str(config), '--shape', '64']) == 0
    out = capsys.readouterr().out
    backbone, _ = expected_macs('transformer', 64, 32, 2, 64, 16, 0)
    match = re.search(r'^Backbone +T2TViT: .* ([\d.]+)M MACs', out, re.M)
    assert float(match.group(1)) == round(backbone / 1e6, 2)
    whole = re.search(
        r'^MACs +([\d.]+)([MG]) .*\(whole MaskRCNN\)$', out, re.M
    )
    scale = 1e9 if whole.group(2) == 'G' else 1e6
    assert float(whole.group(1)) * scale > 10 * backbone
    assert 'Paper' not in out

    # a model whose forward pass needs more than images: one line about it
    monkeypatch.setattr(get_flops, '_detector_inputs', lambda *_: None)
    assert get_flops.main([str(config), '--shape', '64']) == 0
    out = capsys.readouterr().out
    assert 'Whole model not counted: a forward pass of MaskRCNN' in out
    assert re.search(r'^Backbone +T2TViT: ', out, re.M)


def test_the_paper_is_quoted_for_imagenet_classifiers_only(capsys):
    config = str(ROOT / 'configs/t2t-vit-7_8xb64_in1k.py')
    assert get_flops.main([config]) == 0
    assert re.search(r'^Paper MACs +1.10G', capsys.readouterr().out, re.M)
    assert (
        get_flops.main([config, '--cfg-options', 'model.head.num_classes=10'])
        == 0
    )
    assert 'Paper' not in capsys.readouterr().out


@pytest.mark.parametrize('shape', [['0'], ['224', '-3']])
def test_shapes_below_one_pixel_are_refused(capsys, shape):
    with pytest.raises(SystemExit) as exit_info:
        get_flops.main(['some_config.py', '--shape', *shape])
    assert exit_info.value.code == 2
    assert 'error: --shape sides must be at least 1' in capsys.readouterr().err


class _FusedAttention(nn.Module):
    def forward(self, query, key, value):
        return F.scaled_dot_product_attention(query, key, value)


def test_fused_attention_counts_both_products():
    # batch 2, heads 3, 5 queries of 4 dims, 7 keys, values of 6 dims
    inputs = (
        torch.randn(2, 3, 5, 4),
        torch.randn(2, 3, 7, 4),
        torch.randn(2, 3, 7, 6),
    )
    # q @ k^T: 2*3*5*7*4 = 840; attn @ v: 2*3*5*7*6 = 1260
    assert flop_analyzer(_FusedAttention(), inputs).total() == 840 + 1260


def test_norms_are_not_counted_as_the_paper_does_not():
    model = nn.Sequential(nn.Linear(4, 3), nn.LayerNorm(3))
    assert flop_analyzer(model, (torch.ones(2, 4),)).total() == 2 * 4 * 3


def test_counting_by_shape_gives_what_the_real_kernel_gives(tiny_t2t_vit):
    model = tiny_t2t_vit('transformer')
    kernel = F.scaled_dot_product_attention
    result = count_complexity(model, (32, 32))
    assert F.scaled_dot_product_attention is kernel
    # traced with the real kernel, which the aten handle counts
    real = flop_analyzer(model, (torch.randn(1, 3, 32, 32),))
    total, attention = expected_macs('transformer', 32, 32, 2, 64, 16, 0)
    assert result.macs == real.total() == total
    assert result.attention_macs == attention


def test_shapes_above_the_token_budget_are_refused_before_building(
    capsys, monkeypatch
):
    def no_model(cfg):  # the check comes first: no model is built
        raise AssertionError('a model was built')

    monkeypatch.setattr(MODELS, 'build', no_model)
    config = str(ROOT / 'configs/t2t-vit-14_8xb64_in1k.py')
    # 100000 / 16 = 6250 tokens a side at the soft splits' stride 16
    assert get_flops.main([config, '--shape', '100000', '100000']) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        'get_flops.py: error: --shape 100000 100000 is 39062500 tokens at '
        'stride 16, above the budget of 4096; give a smaller --shape or '
        'raise --max-tokens.'
    ]
    # 65 x 64 tokens; the lite recipe's stride is 2 * 1 * 2 = 4
    lite = str(ROOT / 'configs/t2t-vit-lite_1xb64_custom-32px.py')
    for argv, tokens, stride in (
        ([config, '--shape', '1040', '1024'], 4160, 16),
        ([lite, '--shape', '260', '256'], 4160, 4),
    ):
        assert get_flops.main(argv) == 2
        err = capsys.readouterr().err
        assert f'is {tokens} tokens at stride {stride}, above' in err


@pytest.mark.parametrize(
    'option, line',
    [
        (
            'model.backbone.arch=t-15',
            "model.backbone.arch: Unknown T2T-ViT arch 't-15'; choose one of "
            '7, 10, 12, 14, 19, 24, 14-wide, 14-resnext, t-14, t-19, t-24 '
            '(also as t2t-vit-NAME, any case, NAME@384 at 384 px) or pass a '
            'dict.',
        ),
        (
            'model.backbone.frozen_stage=1',
            'model.backbone.frozen_stage: T2TViT takes no argument '
            "'frozen_stage'; did you mean 'frozen_stages'?",
        ),
    ],
)
def test_config_mistakes_are_one_line_before_building(
    capsys, monkeypatch, option, line
):
    def no_model(cfg):  # the config is judged first: no model is built
        raise AssertionError('a model was built')

    monkeypatch.setattr(MODELS, 'build', no_model)
    lite = str(ROOT / 'configs/t2t-vit-lite_1xb64_custom-32px.py')
    assert get_flops.main([lite, '--cfg-options', option]) == 1
    assert capsys.readouterr().err.strip().splitlines() == [f'error: {line}']
