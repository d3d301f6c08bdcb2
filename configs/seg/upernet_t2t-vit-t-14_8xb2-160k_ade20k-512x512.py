# UPerNet with a T2T-ViT-t-14 backbone on ADE20K, 512x512 crops, 160k
# iterations, 8 GPUs x 2 images. mmseg's ResNet-50 UPerNet with the backbone
# swapped: T2T-ViT -> T2TFeaturePyramid (strides 4, 8, 16, 32) -> UPerHead.
_base_ = 'mmseg::upernet/upernet_r50_4xb4-160k_ade20k-512x512.py'

custom_imports = dict(imports=['t2t_plugin'], allow_failed_imports=False)

# The official ImageNet-1k release, converted on load (any checkpoint of
# configs/t2t-vit-t-14_8xb64_in1k.py or in mmpretrain's layout works too).
checkpoint = ('https://github.com/yitu-opensource/T2T-ViT/releases/'
              'download/main/81.7_T2T_ViTt_14.pth.tar')

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
        out_indices=(-1, ),
        drop_path_rate=0.1,
        init_cfg=dict(
            type='Pretrained', checkpoint=checkpoint, prefix='backbone.')),
    neck=dict(
        type='mmpretrain.T2TFeaturePyramid',
        in_channels=(64, 64, 384),
        out_channels=(96, 192, 384, 768)),
    decode_head=dict(in_channels=[96, 192, 384, 768], num_classes=150),
    auxiliary_head=dict(in_channels=384, in_index=2, num_classes=150))

# AdamW with layer-wise learning-rate decay over the depths of
# T2TViT.get_layer_depth: encoder layer i trains at lr * 0.75 ** (14 - i),
# the T2T module and the class token at lr * 0.75 ** 15, the final norm,
# neck and heads at lr (0.75 per layer spreads ViTDet's 0.7 over 12 layers
# across 14). Norms and the class token get no weight decay.
optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(
        type='AdamW', lr=0.0001, betas=(0.9, 0.999), weight_decay=0.05),
    constructor='mmpretrain.BackboneLayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(
        layer_decay_rate=0.75,
        norm_decay_mult=0.,
        custom_keys={'backbone.cls_token': dict(decay_mult=0.)}))

param_scheduler = [
    dict(
        type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0,
        end=1500),
    dict(
        type='PolyLR',
        eta_min=0.0,
        power=1.0,
        begin=1500,
        end=160000,
        by_epoch=False)
]

train_dataloader = dict(batch_size=2)
val_dataloader = dict(batch_size=1)
test_dataloader = val_dataloader

# loss, learning-rate and metric curves as <work_dir>/curves.png
default_hooks = dict(curves=dict(type='TrainingCurvesHook'))
