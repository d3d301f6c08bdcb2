"""PyramidStrideCheckHook: a detector whose anchor strides miss the
strides of its feature pyramid stops before training, in one line; every
detection config sets the hook."""

import pytest
from mmengine.config import Config

from ...helpers import (
    ROOT,
    build_dense_model,
    dense_config,
    plain_runner,
    tiny_retinanet,
    toolbox,
)

CONFIGS = ROOT / 'configs'
pytestmark = [
    pytest.mark.dense,
    pytest.mark.usefixtures('one_thread', 'restore_default_scope'),
]


WRONG_FPN_RETINANET = """
_base_ = {base!r}
model = dict(
    backbone=dict(
        arch=dict(_delete_=True, **{arch!r}),
        t2t_cfg=dict(token_dims={token_dims}),
        init_cfg=None),
    neck=[
        dict(type='mmpretrain.T2TFeaturePyramid',
             in_channels=({token_dims}, {token_dims}, {arch[embed_dims]}),
             out_channels=(96, 192, 384, 768)),
        dict(type='FPN', in_channels=[96, 192, 384, 768], out_channels=256,
             num_outs=5),
    ])
pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', with_bbox=True),
    dict(type='Resize', scale=(128, 128), keep_ratio=True),
    dict(type='PackDetInputs'),
]
train_dataloader = dict(
    num_workers=0, persistent_workers=False,
    dataset=dict(data_root={root!r}, ann_file='annotations/train.json',
                 data_prefix=dict(img='images/'), pipeline=pipeline))
train_cfg = dict(max_epochs=1)
val_cfg = None
val_dataloader = None
val_evaluator = None
"""


@pytest.mark.slow
def test_anchor_strides_that_miss_the_pyramid_stop_before_training(tmp_path):
    """The neck snippet of a Mask R-CNN (FPN from stride 4) under
    RetinaNet's anchors (strides 8-128), through mmdet's Runner."""
    toolbox('mmdet')

    from t2t_plugin.runtime.hooks import TrainingStopped

    config = tiny_retinanet(
        WRONG_FPN_RETINANET, tmp_path, 'retinanet_wrong_fpn.py'
    )
    cfg = Config.fromfile(str(config))
    cfg.work_dir = str(tmp_path / 'work')
    runner = plain_runner(cfg)
    with pytest.raises(TrainingStopped) as error:
        runner.train()
    assert str(error.value) == (
        'The neck returns maps at strides (4, 8, 16, 32, 64) but '
        'bbox_head.prior_generator.strides are (8, 16, 32, 64, 128): the '
        'head would place its anchors at the wrong positions. Make the neck '
        "match (an FPN after T2TFeaturePyramid's strides 8-32 under "
        "RetinaNet: start_level=0, add_extra_convs='on_input', num_outs=5; "
        "after strides 4-32: start_level=1, add_extra_convs='on_input') or "
        'change the strides of the head.'
    )
    assert runner.iter == 0
    assert not list((tmp_path / 'work').rglob('*.pth'))

    # every detection config sets the hook
    for path in sorted((CONFIGS / 'det').glob('*.py')):
        hooks = Config.fromfile(str(path)).custom_hooks
        assert 'PyramidStrideCheckHook' in [hook.type for hook in hooks], path
    # the configs as they are: the strides match, the check passes
    for name in (
        'retinanet_t2t-vit-t-14_fpn_1x_coco.py',
        'mask-rcnn_t2t-vit-t-14_fpn_1x_coco.py',
    ):
        model = build_dense_model(
            dense_config(CONFIGS / 'det' / name, True), 'mmdet'
        )
        from t2t_plugin.runtime.hooks import PyramidStrideCheckHook

        class Holder:
            pass

        holder = Holder()
        holder.model = model
        PyramidStrideCheckHook().before_run(holder)
