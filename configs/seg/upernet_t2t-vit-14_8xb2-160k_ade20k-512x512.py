# UPerNet with the performer T2T-ViT-14 backbone: the same recipe as the
# t-14 config, with T2T layers linear in the number of tokens (see
# docs/dense_prediction.md).
_base_ = './upernet_t2t-vit-t-14_8xb2-160k_ade20k-512x512.py'

checkpoint = (
    'https://github.com/yitu-opensource/T2T-ViT/releases/'
    'download/main/81.5_T2T_ViT_14.pth.tar'
)

model = dict(backbone=dict(arch='14', init_cfg=dict(checkpoint=checkpoint)))
