"""T2TClsHead: logits, soft-label and label-smoothing losses, pre_logits,
checkpoint keys shared with mmpretrain's VisionTransformerClsHead."""

import pytest
import torch
import torch.nn.functional as F
from mmpretrain.models.heads import VisionTransformerClsHead
from mmpretrain.registry import MODELS
from mmpretrain.structures import DataSample

import t2t_plugin  # noqa: F401
from t2t_plugin.runtime.hooks.run_checks import width_problem


def build_head(**kwargs):
    head = MODELS.build(
        dict(type='T2TClsHead', num_classes=5, in_channels=8, **kwargs)
    )
    head.init_weights()
    return head


def test_logits_are_a_linear_map_of_the_cls_token():
    head = build_head()
    cls_token = torch.randn(3, 8)
    expected = cls_token @ head.layers.head.weight.t() + head.layers.head.bias
    torch.testing.assert_close(head((cls_token,)), expected)
    assert head.pre_logits((torch.randn(3, 8), cls_token)) is cls_token
    assert abs(head.layers.head.weight.std().item() - 0.02) < 0.01
    assert torch.all(head.layers.head.bias == 0)


def test_soft_labels_with_label_smoothing():
    head = build_head(
        loss=dict(
            type='LabelSmoothLoss', label_smooth_val=0.1, mode='original'
        )
    )
    cls_token = torch.randn(2, 8)
    # a mixup of classes 0 and 3 with weight 0.7, and a plain label 4
    mixed = torch.tensor([[0.7, 0, 0, 0.3, 0], [0, 0, 0, 0, 1.0]])
    samples = [DataSample().set_gt_score(score) for score in mixed]
    loss = head.loss((cls_token,), samples)['loss']
    smoothed = mixed * 0.9 + 0.1 / 5
    logits = head((cls_token,))
    expected = -(smoothed * F.log_softmax(logits, -1)).sum(-1).mean()
    torch.testing.assert_close(loss, expected)


def test_hard_labels_and_topk_accuracy():
    head = build_head(topk=(1, 3))
    cls_token = torch.randn(4, 8)
    labels = torch.tensor([0, 1, 2, 3])
    samples = [DataSample().set_gt_label(int(label)) for label in labels]
    losses = head.loss((cls_token,), samples)
    expected = F.cross_entropy(head((cls_token,)), labels)
    torch.testing.assert_close(losses['loss'], expected)
    predictions = head.predict((cls_token,))
    assert [int(p.pred_label) for p in predictions] == head(
        (cls_token,)
    ).argmax(-1).tolist()


def test_wrong_feature_shape_is_explained():
    head = build_head()
    with pytest.raises(ValueError, match="out_type='cls_token'"):
        head((torch.randn(2, 8, 4, 4),))


def test_keys_are_those_of_vision_transformer_head():
    """Checkpoints of this head (before and after it became a subclass of
    VisionTransformerClsHead) and of the upstream head load either way."""
    head = build_head()
    assert isinstance(head, VisionTransformerClsHead)
    assert list(head.state_dict()) == [
        'layers.head.weight',
        'layers.head.bias',
    ]
    upstream = VisionTransformerClsHead(num_classes=5, in_channels=8)
    upstream.load_state_dict(head.state_dict(), strict=True)
    cls_token = torch.randn(3, 8)
    torch.testing.assert_close(upstream((cls_token,)), head((cls_token,)))

    checkpoint = {
        'layers.head.weight': torch.randn(5, 8),
        'layers.head.bias': torch.randn(5),
    }
    head.load_state_dict(checkpoint, strict=True)
    expected = (
        cls_token @ checkpoint['layers.head.weight'].t()
        + checkpoint['layers.head.bias']
    )
    torch.testing.assert_close(head((cls_token,)), expected)


def test_attention_pool_is_a_softmax_weighted_sum_of_the_tokens():
    head = build_head(pool='attention')
    tokens = torch.randn(2, 6, 8)
    # CCT's sequence pooling written out: a score per token, softmax over
    # the tokens, the weighted sum
    pool = head.attention_pool
    scores = tokens @ pool.weight[0] + pool.bias[0]
    weights = torch.exp(scores) / torch.exp(scores).sum(1, keepdim=True)
    pooled = (weights[..., None] * tokens).sum(1)
    torch.testing.assert_close(head.pre_logits((tokens,)), pooled)
    expected = pooled @ head.layers.head.weight.t() + head.layers.head.bias
    torch.testing.assert_close(head((tokens,)), expected)
    assert abs(pool.weight.std().item() - 0.02) < 0.015

    # equal scores weigh every token alike: the plain mean
    with torch.no_grad():
        pool.weight.zero_()
    torch.testing.assert_close(head.pre_logits((tokens,)), tokens.mean(1))
    # a (B, C, h, w) map is pooled over its h*w positions
    featmap = tokens.transpose(1, 2).reshape(2, 8, 2, 3)
    torch.testing.assert_close(head.pre_logits((featmap,)), tokens.mean(1))
    assert list(head.state_dict()) == [
        'layers.head.weight',
        'layers.head.bias',
        'attention_pool.weight',
        'attention_pool.bias',
    ]


def test_attention_pool_explains_a_class_token_input():
    head = build_head(pool='attention')
    with pytest.raises(ValueError) as error:
        head((torch.randn(2, 8),))
    assert str(error.value) == (
        "T2TClsHead with pool='attention' reads tokens (B, N, 8), got "
        "(2, 8). Set out_type='raw' (or 'featmap') in the backbone and "
        'in_channels to its embed_dims.'
    )
    with pytest.raises(ValueError) as error:
        build_head(pool='max')
    assert str(error.value) == (
        "T2TClsHead got pool='max'; choose one of 'token', 'attention'."
    )


def test_backbone_mean_of_tokens_without_class_token(tiny_t2t_vit):
    """out_type='avg_featmap' with no class token: the plain mean of the
    tokens the encoder gives out."""
    raw = tiny_t2t_vit(out_type='raw', with_cls_token=False)
    mean = tiny_t2t_vit(out_type='avg_featmap', with_cls_token=False)
    mean.load_state_dict(raw.state_dict())
    images = torch.randn(2, 3, 32, 32)
    tokens = raw(images)[-1]
    assert tokens.shape == (2, 4, 32)
    torch.testing.assert_close(mean(images)[-1], tokens.mean(1))


@pytest.mark.parametrize(
    'pool, feats', [('token', (2, 12)), ('attention', (2, 4, 12))]
)
def test_width_of_another_arch_is_one_line_naming_the_key(pool, feats):
    head = build_head(pool=pool)
    with pytest.raises(ValueError) as error:
        head((torch.randn(feats),))
    assert str(error.value) == (
        'T2TClsHead has in_channels=8, but the backbone gives features of '
        'width 12; set model.head.in_channels=12.'
    )


def test_the_run_check_compares_the_head_with_the_backbone(tiny_arch):
    """A config written for one arch, run with another: the check before
    the run gives the line the first forward would."""
    model = MODELS.build(
        dict(
            type='ImageClassifier',
            backbone=dict(type='T2TViT', arch=tiny_arch(), img_size=32),
            head=dict(type='T2TClsHead', num_classes=5, in_channels=384),
        )
    )
    expected = (
        'T2TClsHead has in_channels=384, but the backbone gives features of '
        'width 32; set model.head.in_channels=32.'
    )
    assert width_problem(model) == expected
    with pytest.raises(ValueError) as error:
        model(torch.zeros(1, 3, 32, 32))
    assert str(error.value) == expected
    model.head.in_channels = 32
    assert width_problem(model) is None


def test_head_without_width_says_what_to_give():
    with pytest.raises(TypeError, match="argument: 'in_channels'"):
        MODELS.build(dict(type='T2TClsHead', num_classes=5))
