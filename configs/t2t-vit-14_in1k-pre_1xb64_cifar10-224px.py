# T2T-ViT-14 transferred from ImageNet-1k to CIFAR-10, the recipe of the
# official transfer_learning.py: 224x224 inputs, SGD (momentum 0.9, lr 0.05,
# weight decay 5e-4), batch 64, 60 epochs of cosine decay to 2e-4, and the
# backbone at 0.01x the head's lr.
_base_ = [
    './_base_/models/t2t-vit-14.py',
    './_base_/datasets/cifar10_bs64_t2t_224.py',
    './_base_/default_runtime.py',
]

model = dict(
    backbone=dict(
        init_cfg=dict(
            type='Pretrained',
            # The last (EMA) checkpoint of configs/t2t-vit-14_8xb64_in1k.py
            # or a converted official release; see docs/weights.md.
            checkpoint='work_dirs/t2t-vit-14_8xb64_in1k/epoch_310.pth',
            prefix='backbone.',
        )
    ),
    head=dict(
        num_classes=10,
        loss=dict(_delete_=True, type='CrossEntropyLoss', loss_weight=1.0),
    ),
    # Plain labels: no mixup or cutmix in the transfer recipe.
    train_cfg=None,
)

optim_wrapper = dict(
    optimizer=dict(type='SGD', lr=0.05, momentum=0.9, weight_decay=5e-4),
    paramwise_cfg=dict(custom_keys={'backbone': dict(lr_mult=0.01)}),
)
# Stepped per epoch like the official script; eta_min is absolute for every
# parameter group, as in torch's CosineAnnealingLR.
param_scheduler = [
    dict(
        type='CosineAnnealingLR',
        T_max=60,
        eta_min=2e-4,
        by_epoch=True,
        begin=0,
        end=60,
    ),
]

train_cfg = dict(by_epoch=True, max_epochs=60, val_interval=1)
val_cfg = dict()
test_cfg = dict()
auto_scale_lr = dict(base_batch_size=64)
