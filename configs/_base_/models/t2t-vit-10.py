# T2T-ViT-10 (performer T2T layers, embed dims 256) for ImageNet-1k.
_base_ = './t2t-vit.py'

model = dict(backbone=dict(arch='10'), head=dict(in_channels=256))
