# The fine-tuning schedule of every T2T-ViT detector here: mmdet's 1x
# schedule (12 epochs, lr x 0.1 after epochs 8 and 11) with AdamW and
# layer-wise learning-rate decay in place of SGD.
_base_ = 'mmdet::_base_/schedules/schedule_1x.py'

# AdamW with layer-wise learning-rate decay over the depths of
# T2TViT.get_layer_depth: encoder layer i trains at lr * 0.75 ** (14 - i),
# the T2T module and the class token at lr * 0.75 ** 15, the final norm,
# neck and heads at lr (0.75 per layer spreads ViTDet's 0.7 over 12 layers
# across 14). Norms and the class token get no weight decay. The log's
# base_lr is this lr as scheduled; its lr is the T2T module's.
optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(
        type='AdamW', lr=0.0001, betas=(0.9, 0.999), weight_decay=0.05
    ),
    constructor='mmpretrain.BackboneLayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(
        layer_decay_rate=0.75,
        norm_decay_mult=0.0,
        custom_keys={'backbone.cls_token': dict(decay_mult=0.0)},
    ),
)

# Linear warm-up over the first 1000 iterations. A shorter run needs a
# shorter one, e.g. --cfg-options param_scheduler.0.end=50
# (docs/custom_data.md, "Short runs").
param_scheduler = [
    dict(
        type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=1000
    ),
    dict(
        type='MultiStepLR',
        begin=0,
        end=12,
        by_epoch=True,
        milestones=[8, 11],
        gamma=0.1,
    ),
]

custom_hooks = [
    # at the end: loss, learning-rate and metric curves as
    # <work_dir>/curves.png, best and last mAP, the checkpoint, the saved
    # config and the test and export commands on them
    dict(type='RunSummaryHook', metric='coco/bbox_mAP'),
    # the strides of the neck's maps against the heads' anchor strides (a
    # mismatch trains silently to a poor mAP)
    dict(type='PyramidStrideCheckHook'),
    # the plugin's checks and guards (docs/troubleshooting.md), as in
    # configs/_base_/default_runtime.py
    dict(type='RunCheckHook'),
    dict(type='RunGuardHook', max_consecutive=5, max_bad_images=100),
]
