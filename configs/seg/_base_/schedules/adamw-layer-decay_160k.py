# The fine-tuning schedule of every T2T-ViT segmentor here: mmseg's 160k
# iteration schedule with AdamW, layer-wise learning-rate decay and a linear
# warm-up, then linear (power 1) decay to 0.
_base_ = 'mmseg::_base_/schedules/schedule_160k.py'

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

# Warm-up over the first 1500 iterations. A shorter run scales both phases,
# e.g. for 200 iterations: --cfg-options train_cfg.max_iters=200
# param_scheduler.0.end=20 param_scheduler.1.begin=20
# param_scheduler.1.end=200 (docs/custom_data.md, "Short runs").
param_scheduler = [
    dict(
        type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500
    ),
    dict(
        type='PolyLR',
        eta_min=0.0,
        power=1.0,
        begin=1500,
        end=160000,
        by_epoch=False,
    ),
]

default_hooks = dict(
    # at the end: loss, learning-rate and metric curves as
    # <work_dir>/curves.png, best and last mIoU, the checkpoint, the saved
    # config and the test and export commands on them
    summary=dict(type='RunSummaryHook', metric='mIoU'),
    # the plugin's checks and guards (docs/troubleshooting.md), as in
    # configs/_base_/default_runtime.py
    run_check=dict(type='RunCheckHook'),
    run_guard=dict(type='RunGuardHook', max_consecutive=5, max_bad_images=100),
    exact_resume=dict(type='ExactResumeHook'),
)
