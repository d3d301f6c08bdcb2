# RetinaNet with a T2T-ViT-t-14 backbone on COCO, 1x schedule (12 epochs),
# 8 GPUs x 2 images. mmdet's ResNet-50 RetinaNet with the backbone swapped:
# T2T-ViT -> T2TFeaturePyramid (strides 8, 16, 32) -> FPN (P3-P7).
_base_ = 'mmdet::retinanet/retinanet_r50_fpn_1x_coco.py'

custom_imports = dict(imports=['t2t_plugin'], allow_failed_imports=False)

# The official ImageNet-1k release, converted on load (any checkpoint of
# configs/t2t-vit-t-14_8xb64_in1k.py or in mmpretrain's layout works too).
checkpoint = ('https://github.com/yitu-opensource/T2T-ViT/releases/'
              'download/main/81.7_T2T_ViTt_14.pth.tar')

model = dict(
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
    neck=[
        # RetinaNet reads strides 8-128, so the stride-4 level is not built.
        dict(
            type='mmpretrain.T2TFeaturePyramid',
            in_channels=(64, 64, 384),
            out_channels=(192, 384, 768),
            out_indices=(1, 2, 3)),
        dict(
            type='FPN',
            in_channels=[192, 384, 768],
            out_channels=256,
            start_level=0,
            add_extra_convs='on_input',
            num_outs=5),
    ])

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
        type='LinearLR', start_factor=0.001, by_epoch=False, begin=0,
        end=1000),
    dict(
        type='MultiStepLR',
        begin=0,
        end=12,
        by_epoch=True,
        milestones=[8, 11],
        gamma=0.1)
]

# loss, learning-rate and metric curves as <work_dir>/curves.png
default_hooks = dict(curves=dict(type='TrainingCurvesHook'))
