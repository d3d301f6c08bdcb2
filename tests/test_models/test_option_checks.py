"""The options of the model parts, checked when a part is built: one line
naming the class, the option, the value and what is accepted, through
MODELS.build, mmpretrain's get_model and our tools/train.py."""

import math

import pytest
from mmengine.config import Config
from mmpretrain import get_model
from mmpretrain.registry import MODELS

import t2t_plugin  # noqa: F401
from t2t_plugin.models.option_checks import (
    check_bool,
    check_choice,
    check_fraction,
    check_int,
    check_ints,
    check_keys,
    check_number,
    check_positive,
    check_size,
)

from ..helpers import run_main, write_class_folders
from ..test_datasets.image_folders import LITE, lite_options


def refusal(check, *args) -> str:
    with pytest.raises(ValueError) as error:
        check('Part', 'opt', *args)
    return str(error.value)


def test_the_checks_accept_what_they_name():
    assert check_bool('Part', 'opt', False) is False
    assert check_int('Part', 'opt', 3) == 3
    assert check_int('Part', 'opt', -1, minimum=-1) == -1
    assert check_positive('Part', 'opt', 1e-3) == 1e-3
    assert check_number('Part', 'opt', -0.5) == -0.5
    assert check_fraction('Part', 'opt', 0.0) == 0.0
    assert check_fraction('Part', 'opt', 1, closed=True) == 1.0
    assert check_choice('Part', 'opt', 'b', ('a', 'b')) == 'b'
    assert check_keys('Part', 'opt', dict(a=1), ('a', 'b')) == dict(a=1)
    assert check_ints('Part', 'opt', [1, 2, 3], 3) == (1, 2, 3)
    assert check_size('Part', 'opt', 32) == (32, 32)
    assert check_size('Part', 'opt', (32, 48)) == (32, 48)


@pytest.mark.parametrize(
    'check, args, accepted',
    [
        (check_bool, ('yes',), "opt='yes'; give True or False"),
        (check_bool, (1,), 'opt=1; give True or False'),
        (check_int, (0,), 'opt=0; give an integer of at least 1'),
        (check_int, (2.5,), 'opt=2.5; give an integer of at least 1'),
        (check_int, (True,), 'opt=True; give an integer of at least 1'),
        (check_int, (10**9, 1, 4096),
         'opt=1000000000; give an integer of at least 1 and at most 4096'),
        (check_positive, (-1,), 'opt=-1; give a finite number above 0'),
        (check_positive, (math.inf,), 'opt=inf; give a finite number above 0'),
        (check_positive, (math.nan,), 'opt=nan; give a finite number above 0'),
        (check_positive, ('0.1x',),
         "opt='0.1x'; give a finite number above 0"),
        (check_positive, (1e30, 10.0),
         'opt=1e+30; give a finite number above 0 and at most 10'),
        (check_number, ('abc',), "opt='abc'; give a finite number"),
        (check_number, (math.nan,), 'opt=nan; give a finite number'),
        (check_fraction, (1.0,), 'opt=1.0; give a number in [0, 1)'),
        (check_fraction, (-0.1,), 'opt=-0.1; give a number in [0, 1)'),
        (check_fraction, ('0.1',), "opt='0.1'; give a number in [0, 1)"),
        (check_choice, ('atention', ('token', 'attention')),
         "opt='atention'; choose one of 'token', 'attention' (did you mean "
         "'attention'?)"),
        (check_choice, (3, ('a', 'b')), "opt=3; choose one of 'a', 'b'"),
        (check_ints, ((3, 0, 3), 3),
         'opt=(3, 0, 3); give 3 integers, each of at least 1'),
        (check_ints, ((3, 3), 3),
         'opt=(3, 3); give 3 integers, each of at least 1'),
        (check_size, ('32',),
         "opt='32'; give a positive integer or a pair of them"),
    ],
)  # fmt: skip
def test_a_refusal_names_the_part_the_option_the_value_and_what_to_give(
    check, args, accepted
):
    assert refusal(check, *args) == f'Part got {accepted}.'


def test_an_unknown_key_is_named_with_the_nearest():
    assert refusal(check_keys, dict(stride=2), ('strides', 'paddings')) == (
        "Part got an unknown key 'stride' in opt; did you mean 'strides'? "
        'it takes paddings, strides.'
    )
    assert refusal(check_keys, 'x', ('a',)) == (
        "Part got opt='x'; give a dict with keys among ['a']."
    )


def backbone(tiny_arch, **kwargs):
    return dict(type='T2TViT', arch=tiny_arch(), **{'img_size': 32, **kwargs})


@pytest.mark.parametrize(
    'part, message',
    [
        (dict(with_cp='yes'), "T2TViT got with_cp='yes'; give True or False."),
        (dict(with_cls_token='no'),
         "T2TViT got with_cls_token='no'; give True or False."),
        (dict(drop_path_rate=1.5),
         'T2TViT got drop_path_rate=1.5; give a number in [0, 1).'),
        (dict(out_type='feat_map'),
         "T2TViT got out_type='feat_map'; choose one of 'cls_token', "
         "'featmap', 'avg_featmap', 'raw' (did you mean 'featmap'?)."),
        (dict(interpolate_mode='cubic'),
         "T2TViT got interpolate_mode='cubic'; choose one of 'bicubic', "
         "'bilinear', 'nearest', 'nearest-exact', 'area' (did you mean "
         "'bicubic'?)."),
        (dict(img_size=0),
         'T2TViT got img_size=0; give a positive integer or a pair of '
         'them.'),
        (dict(attn_init=dict(type='mimetic', alpha_qk='abc')),
         "T2TViT got attn_init.alpha_qk='abc'; give a finite number."),
        (dict(attn_init=dict(type='mimetic', alpha_qk=math.nan)),
         'T2TViT got attn_init.alpha_qk=nan; give a finite number.'),
        (dict(t2t_cfg=dict(stride=(2, 1, 2))),
         "T2TViT got an unknown key 'stride' in t2t_cfg; did you mean "
         "'strides'? it takes "),
        (dict(t2t_cfg=dict(with_cp='no')),
         "T2TModule got with_cp='no'; give True or False."),
        (dict(t2t_cfg=dict(strides=(2, 0, 2))),
         'T2TModule got strides=(2, 0, 2); give 3 integers, each of at '
         'least 1.'),
        (dict(t2t_cfg=dict(kernel_ratio=0)),
         'T2TModule got kernel_ratio=0; give a finite number above 0.'),
        (dict(t2t_cfg=dict(token_layer='perfomer')),
         "T2TModule got token_layer='perfomer'; choose one of "
         "'transformer', 'performer', 'convolution' (did you mean "
         "'performer'?), or the registered type of a token layer (a class "
         'with reads_map).'),
        (dict(layer_cfgs=dict(qkv_bias='yes')),
         "TransformerLayer got qkv_bias='yes'; give True or False."),
        (dict(layer_cfgs=dict(qk_scal=0.1)),
         "T2TViT got an unknown key 'qk_scal' in layer_cfgs; did you mean "
         "'qk_scale'? it takes "),
        (dict(layer_cfgs=dict(locality_attn='no')),
         "T2TViT got an unknown key 'locality_attn' in layer_cfgs; it "
         'takes '),
        (dict(layer_cfgs=dict(type='T2TClsHead')),
         "T2TViT got layer_cfgs type 'T2TClsHead'; give the registered "
         'type of a TransformerLayer (or leave it out).'),
    ],
)  # fmt: skip
def test_backbone_options(tiny_arch, part, message):
    with pytest.raises(ValueError) as error:
        MODELS.build(backbone(tiny_arch, **part))
    assert str(error.value).startswith(message)
    assert '\n' not in str(error.value)


@pytest.mark.parametrize(
    'arch, message',
    [
        (dict(num_heads=0), 'T2TViT got arch.num_heads=0; give an integer '
         'of at least 1.'),
        (dict(embed_dims=32.0), 'T2TViT got arch.embed_dims=32.0; give an '
         'integer of at least 1.'),
        (dict(mlp_ratio=-2), 'T2TViT got arch.mlp_ratio=-2; give a finite '
         'number above 0.'),
    ],
)  # fmt: skip
def test_custom_arch_values(tiny_arch, arch, message):
    settings = tiny_arch()
    settings.pop('feedforward_channels', None)
    with pytest.raises(ValueError) as error:
        MODELS.build(
            dict(type='T2TViT', arch={**settings, **arch}, img_size=32)
        )
    assert str(error.value) == message


@pytest.mark.parametrize(
    'head, message',
    [
        (dict(num_classes=0), 'T2TClsHead got num_classes=0; give an '
         'integer of at least 1.'),
        (dict(in_channels='128'), "T2TClsHead got in_channels='128'; give "
         'an integer of at least 1.'),
        (dict(topk=(1, 0)), 'T2TClsHead got topk=(1, 0); give 2 integers, '
         'each of at least 1.'),
        (dict(topk='5'), "T2TClsHead got topk='5'; give an integer of at "
         'least 1.'),
        (dict(pool='atention'), "T2TClsHead got pool='atention'; choose "
         "one of 'token', 'attention' (did you mean 'attention'?)."),
    ],
)  # fmt: skip
def test_head_options(head, message):
    cfg = dict(type='T2TClsHead', num_classes=3, in_channels=8)
    with pytest.raises(ValueError) as error:
        MODELS.build({**cfg, **head})
    assert str(error.value) == message


def test_neck_options():
    with pytest.raises(ValueError) as error:
        MODELS.build(dict(type='T2TFeaturePyramid', in_channels=(64, 0, 384)))
    assert str(error.value) == (
        'T2TFeaturePyramid got in_channels=(64, 0, 384); give 3 integers, '
        'each of at least 1.'
    )
    with pytest.raises(ValueError) as error:
        MODELS.build(
            dict(
                type='T2TFeaturePyramid',
                in_channels=(64, 64, 384),
                out_channels=-256,
            )
        )
    assert str(error.value) == (
        'T2TFeaturePyramid got out_channels=(-256, -256, -256, -256); give '
        '4 integers, each of at least 1.'
    )


def test_through_get_model():
    cfg = Config.fromfile(LITE)
    cfg.model.backbone.attn_init.alpha_qk = 'abc'
    with pytest.raises(ValueError) as error:
        get_model(cfg)
    assert str(error.value) == (
        "T2TViT got attn_init.alpha_qk='abc'; give a finite number."
    )


def test_through_our_train_tool(tmp_path):
    root = write_class_folders(tmp_path / 'data')
    result = run_main(
        'train',
        LITE,
        '--work-dir',
        tmp_path / 'work',
        '--cfg-options',
        *lite_options(root, 'model.backbone.with_cp=yes'),
    )
    assert result.returncode == 1
    assert 'Traceback' not in result.stderr
    assert (
        "ValueError: T2TViT got with_cp='yes'; give True or False."
        in result.stderr.strip().splitlines()[-1]
    )
