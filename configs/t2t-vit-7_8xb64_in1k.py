_base_ = [
    './_base_/models/t2t-vit-7.py',
    './_base_/datasets/imagenet_bs64_t2t_224.py',
    './_base_/schedules/imagenet_bs512_adamw_t2t_310e.py',
    './_base_/default_runtime.py',
]

# The official recipe's lr and weight decay for this variant.
optim_wrapper = dict(optimizer=dict(lr=1e-3, weight_decay=0.03))
param_scheduler = [
    dict(
        type='LinearLR',
        start_factor=1e-6 / 1e-3,
        by_epoch=True,
        begin=0,
        end=10,
        convert_to_iter_based=True),
    dict(
        type='CosineAnnealingLR',
        T_max=290,
        eta_min=1e-5,
        by_epoch=True,
        begin=10,
        end=300,
        convert_to_iter_based=True),
]
