# A small T2T-ViT trained from scratch on your own folder of small images,
# one GPU (or the CPU), batch 64: a few thousand images of about 28 to 40
# pixels, grey or colour, resized to 32x32. The recommended starting point
# for such data; see docs/custom_data.md for what it scores against a
# ResNet-18 and when to pick another config.
#
#   data/custom/train/<class name>/*.png|jpg     (mmpretrain CustomDataset)
#   data/custom/val/<class name>/*.png|jpg
_base_ = ['./_base_/default_runtime.py']

# Environment variables set these (mmengine's substitution), and every key
# set from them follows: DATA_ROOT=... NUM_CLASSES=... IMG_SIZE=...
# MAX_EPOCHS=... WARMUP_EPOCHS=... before the command
data_root = '{{$DATA_ROOT:data/custom}}'
num_classes = {{'$NUM_CLASSES:3'}}  # the number of class folders
# a multiple of the total soft-split stride, 2 * 1 * 2 = 4
img_size = {{'$IMG_SIZE:32'}}
# as measured in docs/custom_data.md; more keep improving
max_epochs = {{'$MAX_EPOCHS:12'}}
warmup_epochs = {{'$WARMUP_EPOCHS:2'}}

model = dict(
    type='ImageClassifier',
    backbone=dict(
        type='T2TViT',
        # 128 wide, 4 layers: 0.6 M parameters, 50 M MACs at 32x32
        arch=dict(
            token_layer='performer',
            embed_dims=128,
            num_layers=4,
            num_heads=4,
            feedforward_channels=256,
        ),
        img_size=img_size,
        in_channels=3,
        # Soft splits of stride 2, 1, 2 with 3x3 kernels: 32x32 pixels ->
        # 16x16 -> 16x16 -> 8x8 tokens, each split overlapping its
        # neighbours.
        t2t_cfg=dict(
            token_dims=32,
            kernel_sizes=(3, 3, 3),
            strides=(2, 1, 2),
            paddings=(1, 1, 1),
        ),
        # No class token: the head classifies the tokens pooled, which
        # learns faster from few images (compact transformers do the same).
        with_cls_token=False,
        out_type='raw',
        drop_path_rate=0.0,
        # Mimetic initialisation (Trockman and Kolter, ICML 2023): each
        # attention layer starts as trained ViTs' do, W_q^T W_k near the
        # identity and the value-projection path near minus it; +6.5
        # points at 12 epochs on few images (docs/custom_data.md).
        attn_init=dict(type='mimetic'),
    ),
    neck=None,
    head=dict(
        type='T2TClsHead',
        num_classes=num_classes,
        in_channels=128,  # the backbone's embed dims
        pool='attention',
        loss=dict(
            type='LabelSmoothLoss', label_smooth_val=0.1, mode='original'
        ),
        topk=(1,),
    ),
)

# Images are read in colour: grey files become three equal channels, so
# grey and colour images can be mixed. ImageNet's mean and std.
data_preprocessor = dict(
    num_classes=num_classes,
    mean=[123.675, 116.28, 103.53],
    std=[58.395, 57.12, 57.375],
    to_rgb=True,
)

# Every image to img_size, then shifts of up to 4 pixels and mirror
# images; heavier augmentation (RandomResizedCrop, RandAugment, mixup) is
# for longer schedules. For handwriting or text drop the RandomFlip.
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(
        type='Resize',
        scale=(img_size, img_size),
        backend='pillow',
        interpolation='bicubic',
    ),
    dict(type='RandomCrop', crop_size=img_size, padding=4),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(
        type='Resize',
        scale=(img_size, img_size),
        backend='pillow',
        interpolation='bicubic',
    ),
    dict(type='PackInputs'),
]

# Small images decode in well under a millisecond: the main process
# loads them faster than worker processes would start and feed it.
train_dataloader = dict(
    batch_size=64,
    num_workers=0,
    persistent_workers=False,
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
    num_workers=0,
    persistent_workers=False,
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

# AdamW at lr 2e-3, weight decay 0.05 (none on norms and biases), a linear
# warm-up over the first 2 epochs, then a cosine to 1e-5 at the last one.
optim_wrapper = dict(
    optimizer=dict(type='AdamW', lr=2e-3, weight_decay=0.05),
    paramwise_cfg=dict(
        norm_decay_mult=0.0, bias_decay_mult=0.0, flat_decay_mult=0.0
    ),
)
param_scheduler = [
    dict(
        type='LinearLR',
        start_factor=0.01,
        by_epoch=True,
        begin=0,
        end=warmup_epochs,
        convert_to_iter_based=True,
    ),
    dict(
        type='CosineAnnealingLR',
        eta_min=1e-5,
        by_epoch=True,
        begin=warmup_epochs,
        end=max_epochs,
        convert_to_iter_based=True,
    ),
]
train_cfg = dict(by_epoch=True, max_epochs=max_epochs, val_interval=3)
val_cfg = dict()
test_cfg = dict()
auto_scale_lr = dict(base_batch_size=64)

default_hooks = dict(
    logger=dict(interval=20),
    checkpoint=dict(interval=10, max_keep_ckpts=2),
)
randomness = dict(seed=0)
