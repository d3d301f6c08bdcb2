_base_ = [
    './_base_/models/t2t-vit-7.py',
    './_base_/datasets/imagenet_bs64_t2t_224.py',
    './_base_/schedules/imagenet_bs512_adamw_t2t_310e.py',
    './_base_/default_runtime.py',
]

# The official recipe's lr and weight decay for this variant, and the
# warm-up from 1e-6 that goes with that lr.
optim_wrapper = dict(optimizer=dict(lr=1e-3, weight_decay=0.03))
param_scheduler = _base_.param_scheduler
param_scheduler[0].start_factor = 1e-6 / 1e-3  # LinearLR
