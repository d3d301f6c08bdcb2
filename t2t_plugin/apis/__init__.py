"""The functions behind the inference and image tools (as
``mmpretrain.apis``): a model loaded for inference, its images read and
checked, the checks of a tool's inputs before a model is built. They raise
exceptions with one-line messages and never print; the tools
(``t2t_plugin.cli``) report them."""

from t2t_preflight.errors import ArgumentRefused

from .image_files import (
    IMAGE_SUFFIXES,
    class_folder,
    image_stem,
    list_images,
    non_image_files,
)
from .inference import (
    IMAGE_ERRORS,
    check_token_budget,
    load_model,
    preprocess_image,
    test_pipeline,
)
from .input_checks import (
    check_device,
    check_shape_budget,
    check_writable,
    config_num_layers,
    config_stride,
)

__all__ = [
    'IMAGE_ERRORS',
    'IMAGE_SUFFIXES',
    'ArgumentRefused',
    'check_device',
    'check_shape_budget',
    'check_token_budget',
    'check_writable',
    'class_folder',
    'config_num_layers',
    'config_stride',
    'image_stem',
    'list_images',
    'load_model',
    'non_image_files',
    'preprocess_image',
    'test_pipeline',
]
