_base_ = [
    './_base_/models/t2t-vit-t-14.py',
    './_base_/datasets/imagenet_bs64_t2t_224.py',
    './_base_/schedules/imagenet_bs512_adamw_t2t_310e.py',
    './_base_/default_runtime.py',
]
