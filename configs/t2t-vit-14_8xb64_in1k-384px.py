# T2T-ViT-14 at 384x384, fine-tuned from a 224x224 ImageNet checkpoint with
# the same recipe. The backbone resizes the position table of the 224
# checkpoint (14x14 tokens) to 24x24 when it loads.
_base_ = [
    './_base_/models/t2t-vit-14.py',
    './_base_/datasets/imagenet_bs64_t2t_384.py',
    './_base_/schedules/imagenet_bs512_adamw_t2t_310e.py',
    './_base_/default_runtime.py',
]

model = dict(backbone=dict(img_size=384))

# The last checkpoint of configs/t2t-vit-14_8xb64_in1k.py (its weights are
# the EMA ones), or a converted official release; see docs/weights.md.
load_from = 'work_dirs/t2t-vit-14_8xb64_in1k/epoch_310.pth'
