# T2T-ViT-14 (performer T2T layers, embed dims 384) for ImageNet-1k.
_base_ = './t2t-vit.py'

model = dict(backbone=dict(arch='14'), head=dict(in_channels=384))
