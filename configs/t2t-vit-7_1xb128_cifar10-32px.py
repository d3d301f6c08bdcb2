# T2T-ViT-7 trained from scratch on CIFAR-10 at 32x32. The T2T module's soft
# splits use stride 1, 2, 2 (3x3 kernels) instead of 4, 2, 2, so a 32x32
# image becomes 8x8 tokens rather than 2x2. Label smoothing, mixup, cutmix
# and drop path come with the ImageNet model file.
_base_ = [
    './_base_/models/t2t-vit-7.py',
    './_base_/datasets/cifar10_bs128_32px.py',
    './_base_/schedules/imagenet_bs512_adamw_t2t_310e.py',
    './_base_/default_runtime.py',
]

model = dict(
    backbone=dict(
        img_size=32,
        t2t_cfg=dict(
            kernel_sizes=(3, 3, 3), strides=(1, 2, 2), paddings=(1, 1, 1)
        ),
    ),
    head=dict(num_classes=10),
)

# The ImageNet schedule of T2T-ViT-7 (lr 1e-3, warm-up from 1e-6 over 10
# epochs, cosine to 1e-5 at epoch 300) with weight decay 0.05, without the
# cool-down epochs and the EMA.
optim_wrapper = dict(optimizer=dict(lr=1e-3, weight_decay=0.05))
param_scheduler = _base_.param_scheduler
param_scheduler[0].start_factor = 1e-6 / 1e-3  # LinearLR
train_cfg = dict(max_epochs=300, val_interval=5)
custom_hooks = []
auto_scale_lr = dict(base_batch_size=128)
