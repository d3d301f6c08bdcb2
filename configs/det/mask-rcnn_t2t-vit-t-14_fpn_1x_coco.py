# Mask R-CNN with a T2T-ViT-t-14 backbone on COCO, 1x schedule (12 epochs),
# 8 GPUs x 2 images. mmdet's ResNet-50 Mask R-CNN with the backbone swapped:
# T2T-ViT -> T2TFeaturePyramid (strides 4, 8, 16, 32) -> FPN (P2-P6).
_base_ = 'mmdet::mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py'

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
        dict(
            type='mmpretrain.T2TFeaturePyramid',
            in_channels=(64, 64, 384),
            out_channels=(96, 192, 384, 768)),
        dict(
            type='FPN',
            in_channels=[96, 192, 384, 768],
            out_channels=256,
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
