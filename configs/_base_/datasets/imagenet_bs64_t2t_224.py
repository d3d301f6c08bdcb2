# ImageNet-1k in mmpretrain's standard layout (see
# docs/getting_started.md#data-preparation), with the augmentations of the
# official T2T-ViT recipe: mmpretrain's own T2T-ViT dataset file holds
# exactly the paper's pipelines (bicubic RandomResizedCrop 224, flip,
# RandAugment m9-mstd0.5, random erasing 0.25; evaluation at short side 248
# and a 224 centre crop; tests/test_configs/test_configs.py pins them).
# Here the loaders get more workers, persistent and pinned.
_base_ = 'mmpretrain::_base_/datasets/imagenet_bs64_t2t_224.py'

# Arrays of any depth and channels, as the inferencer passes them.
test_pipeline = _base_.test_pipeline
test_pipeline.insert(1, dict(type='ConvertImage'))

train_dataloader = dict(
    num_workers=8, persistent_workers=True, pin_memory=True
)
val_dataloader = dict(
    num_workers=8,
    persistent_workers=True,
    pin_memory=True,
    dataset=dict(pipeline=test_pipeline),
)
test_dataloader = val_dataloader
