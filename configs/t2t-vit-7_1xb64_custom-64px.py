# T2T-ViT-7 trained from scratch on your own folder of images, one GPU (or
# the CPU), batch 64: a few thousand small images (grey or colour, any
# size), resized to 64x64. See docs/custom_data.md, "Classification".
#
#   data/custom/train/<class name>/*.png|jpg     (mmpretrain CustomDataset)
#   data/custom/val/<class name>/*.png|jpg
_base_ = ['./_base_/default_runtime.py']

# Environment variables set these (mmengine's substitution), and every key
# set from them follows: DATA_ROOT=... NUM_CLASSES=... IMG_SIZE=... before
# the command
data_root = '{{$DATA_ROOT:data/custom}}'
num_classes = {{'$NUM_CLASSES:3'}}  # the number of class folders
# a multiple of the total soft-split stride, 2 * 2 * 2 = 8
img_size = {{'$IMG_SIZE:64'}}

model = dict(
    type='ImageClassifier',
    backbone=dict(
        type='T2TViT',
        arch='7',
        img_size=img_size,
        # Soft splits of stride 2, 2, 2 instead of 4, 2, 2: a 64x64 image
        # gives 8x8 tokens (4x4 with the ImageNet strides, too few to learn
        # from). The 7x7 kernel keeps its overlap with padding 3.
        t2t_cfg=dict(
            kernel_sizes=(7, 3, 3), strides=(2, 2, 2), paddings=(3, 1, 1)
        ),
        drop_path_rate=0.1,
    ),
    neck=None,
    head=dict(
        type='T2TClsHead',
        num_classes=num_classes,
        in_channels=256,  # the backbone's embed dims
        loss=dict(
            type='LabelSmoothLoss', label_smooth_val=0.1, mode='original'
        ),
        topk=(1,),
    ),
)

# Images are read in colour: grey files become three equal channels, so
# grey and colour images can be mixed. ImageNet's mean and std; a
# dataset's own figures fit better when they differ much.
data_preprocessor = dict(
    num_classes=num_classes,
    mean=[123.675, 116.28, 103.53],
    std=[58.395, 57.12, 57.375],
    to_rgb=True,
)

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(
        type='RandomResizedCrop',
        scale=img_size,
        crop_ratio_range=(0.35, 1.0),
        backend='pillow',
        interpolation='bicubic',
    ),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    # Every side to img_size: the soft splits tile it exactly.
    dict(
        type='Resize',
        scale=(img_size, img_size),
        backend='pillow',
        interpolation='bicubic',
    ),
    dict(type='PackInputs'),
]

# Workers kept between epochs: starting them anew costs more than a
# small epoch takes.
train_dataloader = dict(
    batch_size=64,
    num_workers=2,
    persistent_workers=True,
    dataset=dict(
        type='CustomDataset',
        data_root=data_root,
        data_prefix='train',
        pipeline=train_pipeline,
    ),
    sampler=dict(type='DefaultSampler', shuffle=True),
)
val_dataloader = dict(
    batch_size=128,
    num_workers=2,
    persistent_workers=True,
    dataset=dict(
        type='CustomDataset',
        data_root=data_root,
        data_prefix='val',
        pipeline=test_pipeline,
    ),
    sampler=dict(type='DefaultSampler', shuffle=False),
)
val_evaluator = dict(type='Accuracy', topk=(1,))
test_dataloader = val_dataloader
test_evaluator = val_evaluator

# A few thousand images are ~50 steps an epoch at batch 64: 100 epochs,
# the first 5 a linear warm-up, then cosine to 1e-5. AdamW at the paper's
# lr for T2T-ViT-7 scaled to batch 64 is too timid from scratch on small
# data; 1e-3 with wd 0.05 trains well. No decay on norms, biases and the
# class token.
optim_wrapper = dict(
    optimizer=dict(type='AdamW', lr=1e-3, weight_decay=0.05),
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
        end=100,
        convert_to_iter_based=True,
    ),
]
train_cfg = dict(by_epoch=True, max_epochs=100, val_interval=5)
val_cfg = dict()
test_cfg = dict()
auto_scale_lr = dict(base_batch_size=64)

default_hooks = dict(
    logger=dict(interval=10),
    checkpoint=dict(interval=10, max_keep_ckpts=2),
)
randomness = dict(seed=0)
