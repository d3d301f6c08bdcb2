"""Deprecated: use mmpretrain's APIs, which now reach this plugin's models.

``mmpretrain.get_model``, ``inference_model``,
``ImageClassificationInferencer`` and ``FeatureExtractor`` take this
plugin's configs, index names (``mmpretrain.list_models('*_t2tp')``) and
checkpoints, official releases included (see ``docs/mmpretrain_apis.md``).
The old names stay importable for a while and say where they went.
"""
import importlib
import warnings
from typing import Any

# old name -> (module, name) of its replacement
_MOVED = {
    'init_model': ('t2t_plugin.cli.model_loading', 'load_model'),
    'inference_model': ('mmpretrain', 'inference_model'),
    'load_checkpoint_file': ('t2t_plugin.engine', 'read_checkpoint'),
    'list_images': ('t2t_plugin.cli.model_loading', 'list_images'),
    'preprocess_image': ('t2t_plugin.cli.model_loading', 'preprocess_image'),
    'build_test_pipeline': ('t2t_plugin.cli.model_loading', 'test_pipeline'),
    'read_image': ('t2t_plugin.cli.model_loading', 'read_image_input'),
}


def __getattr__(name: str) -> Any:
    if name not in _MOVED:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    module, new_name = _MOVED[name]
    warnings.warn(
        f't2t_plugin.apis.{name} is deprecated; use {module}.{new_name} '
        '(mmpretrain.get_model / ImageClassificationInferencer for models).',
        DeprecationWarning,
        stacklevel=2)
    return getattr(importlib.import_module(module), new_name)


__all__ = list(_MOVED)
