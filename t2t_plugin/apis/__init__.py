"""Python API for using trained models: ``init_model``, ``inference_model``."""
from .inference import (
    build_test_pipeline,
    class_names,
    inference_model,
    init_model,
    list_images,
    load_checkpoint_file,
    preprocess_image,
    read_image,
)

__all__ = [
    'build_test_pipeline', 'class_names', 'inference_model', 'init_model',
    'list_images', 'load_checkpoint_file', 'preprocess_image', 'read_image'
]
