# UPerNet with a T2T-ViT-7 backbone on your own images and label PNGs,
# 256x256 crops, 4k iterations, one GPU x 4 images. See
# docs/custom_data.md, "Segmentation".
#
#   data/custom_seg/images/{train,val}/NAME.jpg
#   data/custom_seg/annotations/{train,val}/NAME.png   (one class index per
#                                   pixel, 0..num_classes-1; 255 is ignored)
_base_ = './upernet_t2t-vit-t-14_8xb2-160k_ade20k-512x512.py'

data_root = 'data/custom_seg'
# Class i is the pixel value i of the label PNGs; the palette colours the
# predictions of --show-dir.
metainfo = dict(
    classes=('background', 'road', 'building'),
    palette=[(0, 0, 0), (128, 64, 128), (70, 70, 70)],
)
num_classes = 3

# An ImageNet-1k T2T-ViT-7 checkpoint in mmpretrain's layout (see
# docs/custom_data.md, "Weights"); init_cfg=None trains from scratch.
checkpoint = 'checkpoints/t2t-vit-7_in1k.pth'

crop_size = (256, 256)
# The pyramid's input widths are the T2T maps' 64 channels, then
# T2T-ViT-7's embed dims.
model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(arch='7', init_cfg=dict(checkpoint=checkpoint)),
    neck=dict(in_channels=(64, 64, 256)),
    decode_head=dict(num_classes=num_classes),
    auxiliary_head=dict(num_classes=num_classes),
)

# Images at most 512 pixels wide, then 256x256 crops; the test resize keeps
# the aspect ratio (whole-image inference pads sides to a multiple of 32).
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations'),
    dict(
        type='RandomResize',
        scale=(512, 256),
        ratio_range=(0.5, 2.0),
        keep_ratio=True,
    ),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(512, 256), keep_ratio=True),
    dict(type='LoadAnnotations'),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(
    batch_size=4,
    dataset=dict(
        _delete_=True,
        type='BaseSegDataset',
        data_root=data_root,
        metainfo=metainfo,
        data_prefix=dict(
            img_path='images/train', seg_map_path='annotations/train'
        ),
        img_suffix='.jpg',
        seg_map_suffix='.png',
        pipeline=train_pipeline,
    ),
)
val_dataloader = dict(
    dataset=dict(
        _delete_=True,
        type='BaseSegDataset',
        data_root=data_root,
        metainfo=metainfo,
        data_prefix=dict(
            img_path='images/val', seg_map_path='annotations/val'
        ),
        img_suffix='.jpg',
        seg_map_suffix='.png',
        pipeline=test_pipeline,
    )
)
test_dataloader = val_dataloader

# 4k iterations (a few hundred images, ~40 epochs at batch 4): warm-up over
# the first 200, then linear decay to 0; evaluation and a checkpoint every
# 1000.
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=200),
    dict(
        type='PolyLR',
        eta_min=0.0,
        power=1.0,
        begin=200,
        end=4000,
        by_epoch=False,
    ),
]
train_cfg = dict(max_iters=4000, val_interval=1000)
default_hooks = dict(checkpoint=dict(interval=1000))
