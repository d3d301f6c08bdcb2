# The small-image recipe of configs/t2t-vit-lite_1xb64_custom-32px.py with
# the dense relative localisation loss beside its classifier (DRLocClsHead,
# projects/small_data/README.md): +0.4 points on average at 30 epochs on
# fashion, behind at 12. Its checkpoints load into the recipe's config,
# which drops the loss's MLP.
_base_ = ['../../../configs/t2t-vit-lite_1xb64_custom-32px.py']

# run from the repository root, with it on the path (PYTHONPATH=.)
custom_imports = dict(
    imports=['t2t_plugin', 'projects.small_data.levers'],
    allow_failed_imports=False,
)

model = dict(head=dict(type='DRLocClsHead', drloc=dict(weight=0.1)))
