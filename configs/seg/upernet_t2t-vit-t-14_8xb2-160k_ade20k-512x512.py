# UPerNet with a T2T-ViT-t-14 backbone on ADE20K, 512x512 crops, 160k
# iterations, 8 GPUs x 2 images. mmseg's ResNet-50 UPerNet with the backbone
# swapped: T2T-ViT -> T2TFeaturePyramid (strides 4, 8, 16, 32) -> UPerHead.
# Another arch is the arch and the pyramid's input widths (the T2T maps'
# 64, then the embed dims), e.g. --cfg-options model.backbone.arch=7
# model.neck.in_channels=[64,64,256].
_base_ = [
    'mmseg::_base_/models/upernet_r50.py',
    'mmseg::_base_/datasets/ade20k.py',
    'mmseg::_base_/default_runtime.py',
    './_base_/schedules/adamw-layer-decay_160k.py',
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

crop_size = (512, 512)
# T2T-ViT tiles its input exactly (sides a multiple of 16), so whole-image
# testing pads each image to a multiple of 32; the padding is cropped off
# the prediction again.
data_preprocessor = dict(size=crop_size, test_cfg=dict(size_divisor=32))
model = dict(
    data_preprocessor=data_preprocessor,
    pretrained=None,
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
    neck=dict(
        type='mmpretrain.T2TFeaturePyramid',
        in_channels=(64, 64, 384),
        out_channels=(96, 192, 384, 768),
    ),
    decode_head=dict(in_channels=[96, 192, 384, 768], num_classes=150),
    auxiliary_head=dict(in_channels=384, in_index=2, num_classes=150),
)

train_dataloader = dict(batch_size=2)
val_dataloader = dict(batch_size=1)
test_dataloader = val_dataloader
