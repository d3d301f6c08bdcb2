# The official T2T-ViT ImageNet schedule for batch 512 (8 GPUs x 64):
# 10 warm-up epochs from 1e-6, cosine down to 1e-5 at epoch 300, then 10
# cool-down epochs at 1e-5. lr / weight decay are T2T-ViT-14's; the configs
# of other variants override them (and the warm-up start factor, 1e-6 / lr).
optim_wrapper = dict(
    optimizer=dict(
        type='AdamW', lr=5e-4, weight_decay=0.05, eps=1e-8, betas=(0.9, 0.999)
    ),
    # timm's filter_bias_and_bn plus the model's no_weight_decay(): no decay
    # on norms, biases (both 1-d) and the class token. The position table
    # is a fixed buffer, not a parameter.
    paramwise_cfg=dict(
        norm_decay_mult=0.0,
        bias_decay_mult=0.0,
        flat_decay_mult=0.0,
        custom_keys={'.cls_token': dict(decay_mult=0.0)},
    ),
)

param_scheduler = [
    dict(
        type='LinearLR',
        start_factor=1e-6 / 5e-4,
        by_epoch=True,
        begin=0,
        end=10,
        convert_to_iter_based=True,
    ),
    # mmengine leaves the last value in place once a scheduler's range is
    # over, so epochs 300-310 (the cool-down) run at eta_min.
    dict(
        type='CosineAnnealingLR',
        T_max=290,
        eta_min=1e-5,
        by_epoch=True,
        begin=10,
        end=300,
        convert_to_iter_based=True,
    ),
]

train_cfg = dict(by_epoch=True, max_epochs=310, val_interval=1)
val_cfg = dict()
test_cfg = dict()

# timm's ModelEmaV2 with decay 0.99996 per iteration; mmengine's momentum is
# the weight of the new value, 1 - decay. Evaluation and saved checkpoints
# use the averaged weights.
custom_hooks = [
    dict(
        type='EMAHook',
        ema_type='ExponentialMovingAverage',
        momentum=4e-5,
        priority='ABOVE_NORMAL',
    ),
]

# lr above is for 8 x 64 images per step; --auto-scale-lr rescales it.
auto_scale_lr = dict(base_batch_size=512)
