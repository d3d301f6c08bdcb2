"""Deprecated: use mmpretrain's APIs, which now reach this plugin's models.

``mmpretrain.get_model``, ``inference_model``,
``ImageClassificationInferencer`` and ``FeatureExtractor`` take this
plugin's configs, index names (``mmpretrain.list_models('*_t2tp')``) and
checkpoints, official releases included (see ``docs/mmpretrain_apis.md``).
The old names stay importable for a while and say where they went.
"""

from ..deprecation import moved_attributes

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


__getattr__ = moved_attributes(
    __name__,
    _MOVED,
    ' (mmpretrain.get_model / ImageClassificationInferencer for models)',
)

__all__ = list(_MOVED)
