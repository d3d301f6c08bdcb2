# The reference of docs/custom_data.md's small-data table: mmpretrain's
# ResNet-18 with the pipeline, optimiser and schedule of the T2T-ViT recipe
# (everything but the model comes from the recipe's config).
_base_ = ['../../configs/t2t-vit-lite_1xb64_custom-32px.py']

model = dict(
    backbone=dict(_delete_=True, type='ResNet', depth=18),
    neck=dict(_delete_=True, type='GlobalAveragePooling'),
    head=dict(
        _delete_=True,
        type='LinearClsHead',
        # the number of class folders, as in the recipe
        num_classes={{'$NUM_CLASSES:3'}},
        in_channels=512,
        loss=dict(
            type='LabelSmoothLoss', label_smooth_val=0.1, mode='original'
        ),
        topk=(1,),
    ),
)
