# The small-image recipe of configs/t2t-vit-lite_1xb64_custom-32px.py with
# a convolutional stem for token layers (ConvStemTokenLayer,
# projects/small_data/README.md): 43 M MACs, behind the recipe at 12 and
# 30 epochs on fashion.
_base_ = ['../../../configs/t2t-vit-lite_1xb64_custom-32px.py']

# run from the repository root, with it on the path (PYTHONPATH=.)
custom_imports = dict(
    imports=['t2t_plugin', 'projects.small_data.levers'],
    allow_failed_imports=False,
)

model = dict(backbone=dict(arch=dict(token_layer='ConvStemTokenLayer')))
