# T2T-ViT-12: the recipe of T2T-ViT-7 (lr 1e-3, weight decay 0.03, the
# warm-up from 1e-6 that goes with that lr) on the deeper model.
_base_ = './t2t-vit-7_8xb64_in1k.py'

model = dict(backbone=dict(arch='12'))
