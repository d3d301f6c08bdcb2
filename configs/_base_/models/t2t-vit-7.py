# T2T-ViT-7 (performer T2T layers, embed dims 256) for ImageNet-1k.
_base_ = './t2t-vit.py'

model = dict(backbone=dict(arch='7'), head=dict(in_channels=256))
