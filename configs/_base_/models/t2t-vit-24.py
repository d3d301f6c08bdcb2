# T2T-ViT-24 (performer T2T layers, embed dims 512) for ImageNet-1k.
_base_ = './t2t-vit.py'

model = dict(backbone=dict(arch='24'), head=dict(in_channels=512))
