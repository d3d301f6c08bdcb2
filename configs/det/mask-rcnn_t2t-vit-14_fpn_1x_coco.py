# Mask R-CNN with the performer T2T-ViT-14 backbone: the same recipe as the
# t-14 config. Its T2T layers are linear in the number of tokens, which
# makes it the cheaper choice at 800x1333 (see docs/dense_prediction.md).
_base_ = './mask-rcnn_t2t-vit-t-14_fpn_1x_coco.py'

checkpoint = (
    'https://github.com/yitu-opensource/T2T-ViT/releases/'
    'download/main/81.5_T2T_ViT_14.pth.tar'
)

model = dict(backbone=dict(arch='14', init_cfg=dict(checkpoint=checkpoint)))
