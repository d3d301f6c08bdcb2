# T2T-ViT for ImageNet-1k with the official training recipe's model parts.
# It is T2T-ViT-14; the files t2t-vit-{7,...,t-24}.py next to it set another
# `backbone.arch` and the head's `in_channels`, the backbone's embed dims.
model = dict(
    type='ImageClassifier',
    backbone=dict(type='T2TViT', arch='14', img_size=224, drop_path_rate=0.1),
    neck=None,
    head=dict(
        type='T2TClsHead',
        num_classes=1000,
        in_channels=384,  # embed dims of T2T-ViT-14
        # Applied to the mixed soft labels too, like timm's mixup target.
        loss=dict(
            type='LabelSmoothLoss', label_smooth_val=0.1, mode='original'
        ),
        topk=(1, 5),
    ),
    # One of the two per batch, picked with equal chance (timm's
    # mixup_switch_prob 0.5).
    train_cfg=dict(
        augments=[
            dict(type='Mixup', alpha=0.8),
            dict(type='CutMix', alpha=1.0),
        ]
    ),
)
