# RetinaNet with a T2T-ViT-7 backbone on your own COCO-format detection
# data, 512-pixel images, 24 epochs, one GPU x 4 images. See
# docs/custom_data.md, "Detection".
#
#   data/custom_coco/annotations/{train,val}.json   (COCO format)
#   data/custom_coco/images/*.jpg                    (file_name in the json)
_base_ = './retinanet_t2t-vit-t-14_fpn_1x_coco.py'

data_root = 'data/custom_coco/'
# The category names in the json files, in any order; their number is the
# head's num_classes. The palette colours the boxes of --show-dir.
metainfo = dict(classes=('cat', 'dog'), palette=[(220, 20, 60), (0, 128, 255)])
num_classes = 2

# An ImageNet-1k T2T-ViT-7 checkpoint in mmpretrain's layout (see
# docs/custom_data.md, "Weights"); init_cfg=None trains from scratch.
checkpoint = 'checkpoints/t2t-vit-7_in1k.pth'

# The pyramid's input widths are the T2T maps' 64 channels, then
# T2T-ViT-7's embed dims.
model = dict(
    backbone=dict(arch='7', init_cfg=dict(checkpoint=checkpoint)),
    neck=[
        dict(_base_.model.neck[0], in_channels=(64, 64, 256)),
        _base_.model.neck[1],
    ],
    bbox_head=dict(num_classes=num_classes),
)

# Sides padded to a multiple of 32 by the data preprocessor (mmdet's
# default), so any image size tiles the soft splits.
img_scale = (512, 512)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', with_bbox=True),
    dict(type='Resize', scale=img_scale, keep_ratio=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackDetInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=img_scale, keep_ratio=True),
    dict(type='LoadAnnotations', with_bbox=True),
    dict(
        type='PackDetInputs',
        meta_keys=(
            'img_id',
            'img_path',
            'ori_shape',
            'img_shape',
            'scale_factor',
        ),
    ),
]
train_dataloader = dict(
    batch_size=4,
    dataset=dict(
        data_root=data_root,
        metainfo=metainfo,
        ann_file='annotations/train.json',
        data_prefix=dict(img='images/'),
        pipeline=train_pipeline,
    ),
)
val_dataloader = dict(
    dataset=dict(
        data_root=data_root,
        metainfo=metainfo,
        ann_file='annotations/val.json',
        data_prefix=dict(img='images/'),
        pipeline=test_pipeline,
    )
)
test_dataloader = val_dataloader
val_evaluator = dict(ann_file=data_root + 'annotations/val.json')
test_evaluator = val_evaluator

# 24 epochs for a few hundred to a few thousand images; lr x 0.1 after
# epochs 16 and 22; warm-up over 200 iterations (not 1000: a small set has
# few iterations an epoch).
train_cfg = dict(max_epochs=24)
param_scheduler = [
    dict(
        type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=200
    ),
    dict(
        type='MultiStepLR',
        begin=0,
        end=24,
        by_epoch=True,
        milestones=[16, 22],
        gamma=0.1,
    ),
]
auto_scale_lr = dict(base_batch_size=4)
