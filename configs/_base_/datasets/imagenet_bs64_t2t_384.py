# ImageNet-1k at 384x384 for fine-tuning: the 224 recipe with its crop and
# test sizes changed.
_base_ = ['./imagenet_bs64_t2t_224.py']

train_pipeline = _base_.train_pipeline
train_pipeline[1].scale = 384  # RandomResizedCrop

# Official 384 models evaluate with crop_pct 1.0: resize to 384, no border.
test_pipeline = _base_.test_pipeline
test_pipeline[2].scale = 384  # ResizeEdge
test_pipeline[3].crop_size = 384  # CenterCrop

train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = dict(dataset=dict(pipeline=test_pipeline))
