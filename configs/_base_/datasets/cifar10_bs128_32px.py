# CIFAR-10 at its own 32x32 resolution, for training from scratch: the
# dataset, normalisation and loaders of the 224x224 transfer file, with
# RandAugment and random erasing as in the ImageNet recipe, batch 128.
_base_ = ['./cifar10_bs64_t2t_224.py']

train_pipeline = [
    dict(type='RandomCrop', crop_size=32, padding=4),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(
        type='RandAugment',
        policies='timm_increasing',
        num_policies=2,
        total_level=10,
        magnitude_level=9,
        magnitude_std=0.5,
        # the normalisation's (RGB) mean, rounded
        hparams=dict(
            pad_val=[round(x) for x in _base_.data_preprocessor.mean],
            interpolation='bicubic',
        ),
    ),
    dict(
        type='RandomErasing',
        erase_prob=0.25,
        mode='rand',
        min_area_ratio=0.02,
        max_area_ratio=1 / 3,
        fill_color=_base_.data_preprocessor.mean,
        fill_std=_base_.data_preprocessor.std,
    ),
    dict(type='PackInputs'),
]
test_pipeline = [dict(type='PackInputs')]

train_dataloader = dict(batch_size=128, dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(batch_size=256, dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
