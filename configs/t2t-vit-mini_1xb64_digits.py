# The embedded demo: a small T2T-ViT trained on the 8x8 handwritten digits
# bundled with scikit-learn (1,797 images, 10 classes, nothing to download).
# `make demo` trains it on the CPU in a few minutes; see
# docs/getting_started.md#demo.
_base_ = ['./_base_/default_runtime.py']

model = dict(
    type='ImageClassifier',
    backbone=dict(
        type='T2TViT',
        arch=dict(
            token_layer='performer',
            embed_dims=64,
            num_layers=4,
            num_heads=4,
            feedforward_channels=128,
        ),
        img_size=8,
        in_channels=1,
        # Soft splits of stride 1, 1, 2: 8x8 pixels -> 4x4 tokens.
        t2t_cfg=dict(
            token_dims=32,
            kernel_sizes=(3, 3, 3),
            strides=(1, 1, 2),
            paddings=(1, 1, 1),
        ),
        drop_path_rate=0.1,
    ),
    neck=None,
    head=dict(
        type='T2TClsHead',
        num_classes=10,
        in_channels=64,  # the backbone's embed dims
        loss=dict(
            type='LabelSmoothLoss', label_smooth_val=0.1, mode='original'
        ),
        topk=(1, 5),
    ),
)

# Grey levels 0-255; mean and std of the training split.
data_preprocessor = dict(num_classes=10, mean=[77.8], std=[95.8], to_rgb=False)

train_pipeline = [
    # Shifts by up to one pixel: the digits are centred but not aligned.
    dict(type='RandomCrop', crop_size=8, padding=1),
    dict(type='PackInputs'),
]
# Images from files or arrays of any depth and channels become 8-bit grey
# (the inferencer reads files in colour).
test_pipeline = [
    dict(type='ConvertImage', channels=1),
    dict(type='PackInputs'),
]

train_dataloader = dict(
    batch_size=64,
    num_workers=0,
    # stated, as mmpretrain's tools/train.py turns it on by default
    persistent_workers=False,
    dataset=dict(type='DigitsDataset', split='train', pipeline=train_pipeline),
    sampler=dict(type='DefaultSampler', shuffle=True),
)
val_dataloader = dict(
    batch_size=128,
    num_workers=0,
    persistent_workers=False,
    dataset=dict(type='DigitsDataset', split='val', pipeline=test_pipeline),
    sampler=dict(type='DefaultSampler', shuffle=False),
)
val_evaluator = dict(type='Accuracy', topk=(1, 5))
test_dataloader = val_dataloader
test_evaluator = val_evaluator

optim_wrapper = dict(
    optimizer=dict(type='AdamW', lr=2e-3, weight_decay=0.05),
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
        start_factor=0.01,
        by_epoch=True,
        begin=0,
        end=5,
        convert_to_iter_based=True,
    ),
    dict(
        type='CosineAnnealingLR',
        eta_min=1e-5,
        by_epoch=True,
        begin=5,
        end=40,
        convert_to_iter_based=True,
    ),
]
train_cfg = dict(by_epoch=True, max_epochs=40, val_interval=4)
val_cfg = dict()
test_cfg = dict()
auto_scale_lr = dict(base_batch_size=64)

default_hooks = dict(
    logger=dict(interval=10),
    checkpoint=dict(interval=10, max_keep_ckpts=2),
)
randomness = dict(seed=0)
