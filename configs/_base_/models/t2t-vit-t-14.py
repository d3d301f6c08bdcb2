# T2T-ViT-t-14 (transformer T2T layers, embed dims 384) for ImageNet-1k.
_base_ = './t2t-vit.py'

model = dict(backbone=dict(arch='t-14'), head=dict(in_channels=384))
