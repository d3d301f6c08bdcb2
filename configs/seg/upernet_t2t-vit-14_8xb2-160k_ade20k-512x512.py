# UPerNet with the performer T2T-ViT-14 backbone: the same recipe as the
# t-14 config, with T2T layers linear in the number of tokens (see README).
_base_ = './upernet_t2t-vit-t-14_8xb2-160k_ade20k-512x512.py'

checkpoint = 'checkpoints/t2t-vit-14_in1k.pth'

model = dict(
    backbone=dict(
        arch='14',
        init_cfg=dict(checkpoint=checkpoint)))
