_base_ = [
    './_base_/models/t2t-vit-19.py',
    './_base_/datasets/imagenet_bs64_t2t_224.py',
    './_base_/schedules/imagenet_bs512_adamw_t2t_310e.py',
    './_base_/default_runtime.py',
]

# The official recipe's weight decay for this variant.
optim_wrapper = dict(optimizer=dict(weight_decay=0.065))
