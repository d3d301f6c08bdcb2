# The small-image recipe of configs/t2t-vit-lite_1xb64_custom-32px.py with
# locality self-attention in every encoder layer (LocalityTransformerLayer,
# projects/small_data/README.md): level with the recipe at 12 epochs,
# behind at 30.
_base_ = ['../../../configs/t2t-vit-lite_1xb64_custom-32px.py']

# run from the repository root, with it on the path (PYTHONPATH=.)
custom_imports = dict(
    imports=['t2t_plugin', 'projects.small_data.levers'],
    allow_failed_imports=False,
)

model = dict(backbone=dict(layer_cfgs=dict(type='LocalityTransformerLayer')))
