# RetinaNet with a T2T-ViT-t-14 backbone on COCO, 1x schedule (12 epochs),
# 8 GPUs x 2 images. mmdet's ResNet-50 RetinaNet with the backbone swapped:
# T2T-ViT -> T2TFeaturePyramid (strides 8, 16, 32) -> FPN (P3-P7).
# Another arch is the arch and the pyramid's input widths (the T2T maps'
# 64, then the embed dims), e.g. --cfg-options model.backbone.arch=7
# model.neck.0.in_channels=[64,64,256].
_base_ = [
    'mmdet::_base_/models/retinanet_r50_fpn.py',
    'mmdet::_base_/datasets/coco_detection.py',
    './_base_/schedules/adamw-layer-decay_1x.py',
    'mmdet::_base_/default_runtime.py',
    'mmdet::retinanet/retinanet_tta.py',
]

custom_imports = dict(imports=['t2t_plugin'], allow_failed_imports=False)

# Random augmentation seeded per sample, random state in the checkpoints:
# new augmentation every epoch and an exact resume (see this project's
# docs/training.md#resume).
runner_type = 'SampleSeededRunner'
default_hooks = dict(exact_resume=dict(type='ExactResumeHook'))

# The official ImageNet-1k release, converted on load (any checkpoint of
# configs/t2t-vit-t-14_8xb64_in1k.py or in mmpretrain's layout works too).
checkpoint = (
    'https://github.com/yitu-opensource/T2T-ViT/releases/'
    'download/main/81.7_T2T_ViTt_14.pth.tar'
)

model = dict(
    backbone=dict(
        _delete_=True,
        type='mmpretrain.T2TViT',
        arch='t-14',
        img_size=224,
        out_type='featmap',
        out_t2t_maps=True,
        out_indices=(-1,),
        drop_path_rate=0.1,
        init_cfg=dict(
            type='Pretrained', checkpoint=checkpoint, prefix='backbone.'
        ),
    ),
    neck=[
        # RetinaNet reads strides 8-128, so the stride-4 level is not built.
        dict(
            type='mmpretrain.T2TFeaturePyramid',
            in_channels=(64, 64, 384),
            out_channels=(192, 384, 768),
            out_indices=(1, 2, 3),
        ),
        dict(
            type='FPN',
            in_channels=[192, 384, 768],
            out_channels=256,
            start_level=0,
            add_extra_convs='on_input',
            num_outs=5,
        ),
    ],
)
