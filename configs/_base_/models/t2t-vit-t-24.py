# T2T-ViT-t-24 (transformer T2T layers, embed dims 512) for ImageNet-1k.
_base_ = './t2t-vit.py'

model = dict(backbone=dict(arch='t-24'), head=dict(in_channels=512))
