# T2T-ViT-7 trained from scratch on CIFAR-10 at 32x32. The T2T module's soft
# splits use stride 1, 2, 2 (3x3 kernels) instead of 4, 2, 2, so a 32x32
# image becomes 8x8 tokens rather than 2x2. Label smoothing, mixup, cutmix
# and drop path come with the ImageNet model file.
_base_ = [
    './_base_/models/t2t-vit-7.py',
    './_base_/datasets/cifar10_bs128_32px.py',
    './_base_/default_runtime.py',
]

model = dict(
    backbone=dict(
        img_size=32,
        t2t_cfg=dict(
            kernel_sizes=(3, 3, 3), strides=(1, 2, 2), paddings=(1, 1, 1))),
    head=dict(num_classes=10),
)

optim_wrapper = dict(
    optimizer=dict(type='AdamW', lr=1e-3, weight_decay=0.05),
    paramwise_cfg=dict(
        norm_decay_mult=0.0,
        bias_decay_mult=0.0,
        flat_decay_mult=0.0,
        custom_keys={'.cls_token': dict(decay_mult=0.0)}),
)
param_scheduler = [
    dict(
        type='LinearLR',
        start_factor=1e-3,
        by_epoch=True,
        begin=0,
        end=10,
        convert_to_iter_based=True),
    dict(
        type='CosineAnnealingLR',
        eta_min=1e-5,
        by_epoch=True,
        begin=10,
        end=300,
        convert_to_iter_based=True),
]

train_cfg = dict(by_epoch=True, max_epochs=300, val_interval=5)
val_cfg = dict()
test_cfg = dict()
auto_scale_lr = dict(base_batch_size=128)
