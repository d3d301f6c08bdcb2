# T2T-ViT-t-19 (transformer T2T layers, embed dims 448) for ImageNet-1k.
_base_ = './t2t-vit.py'

model = dict(backbone=dict(arch='t-19'), head=dict(in_channels=448))
