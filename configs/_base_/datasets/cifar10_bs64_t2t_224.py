# CIFAR-10 upsampled to 224x224 for transfer learning, as in the official
# transfer_learning.py. Reads the python-pickle files under data_root (see
# docs/getting_started.md#data-preparation); nothing is downloaded.
dataset_type = 'LocalCIFAR10'
data_root = 'data/cifar10'
data_preprocessor = dict(
    num_classes=10,
    # The official CIFAR normalisation; CIFAR images are stored as RGB.
    mean=[125.307, 122.961, 113.8575],
    std=[51.5865, 50.847, 51.255],
    to_rgb=False,
)

train_pipeline = [
    dict(type='Resize', scale=224, interpolation='bilinear'),
    dict(type='RandomCrop', crop_size=224, padding=28),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackInputs'),
]
test_pipeline = [
    dict(type='Resize', scale=224, interpolation='bilinear'),
    dict(type='PackInputs'),
]

train_dataloader = dict(
    batch_size=64,
    num_workers=4,
    persistent_workers=True,
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        split='train',
        pipeline=train_pipeline,
    ),
    sampler=dict(type='DefaultSampler', shuffle=True),
)
val_dataloader = dict(
    batch_size=100,
    num_workers=4,
    persistent_workers=True,
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        split='test',
        pipeline=test_pipeline,
    ),
    sampler=dict(type='DefaultSampler', shuffle=False),
)
val_evaluator = dict(type='Accuracy', topk=(1, 5))

test_dataloader = val_dataloader
test_evaluator = val_evaluator
