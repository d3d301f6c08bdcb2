# T2T-ViT-19 (performer T2T layers, embed dims 448) for ImageNet-1k.
_base_ = './t2t-vit.py'

model = dict(backbone=dict(arch='19'), head=dict(in_channels=448))
