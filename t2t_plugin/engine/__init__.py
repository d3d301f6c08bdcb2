"""Registered runtime parts: atomic and loadable checkpoints, CPU autocast,
the layer-decay optimizer constructor, the training-curves hook and the
runner that seeds augmentation per sample; the one reader of checkpoints
and configs that every tool and API uses."""

from ..deprecation import moved_attributes
from .checkpoint import (
    AtomicLocalBackend,
    CheckpointError,
    CheckpointMismatchError,
    allow_mmengine_checkpoints,
    check_finite_weights,
    checkpoint_read_error,
    checkpoint_safe_globals,
    checkpoint_state_dict,
    load_checkpoints_strictly,
    load_state_dict_strictly,
    non_finite_weights,
    read_checkpoint,
    remove_stale_temp_files,
    strip_module_prefix,
)
from .config import ConfigError, load_config
from .hooks import TrainingCurvesHook
from .optim_constructor import BackboneLayerDecayOptimWrapperConstructor
from .optim_wrapper import AutocastOptimWrapper
from .sample_seeded_runner import SampleSeededRunner

# Resume, ``load_from`` and ``Pretrained`` initialisation all go through
# ``torch.load``; configs import this package before any of them runs.
allow_mmengine_checkpoints()

# Names that lived here before the command-line plumbing moved to
# ``t2t_plugin.cli`` and the curves to ``t2t_plugin.analysis``.
_MOVED = {
    'BUILD_ERRORS': ('t2t_plugin.cli', 'BUILD_ERRORS'),
    'find_missing_inputs': ('t2t_plugin.cli', 'find_missing_inputs'),
    'report_build_error': ('t2t_plugin.cli', 'report_build_error'),
    'init_cpu_dist': ('t2t_plugin.cli', 'init_cpu_dist'),
    'setup_cpu_dist': ('t2t_plugin.cli', 'setup_cpu_dist'),
    'find_scalar_files': ('t2t_plugin.analysis', 'find_scalar_files'),
    'load_scalars': ('t2t_plugin.analysis', 'load_scalars'),
    'plot_curves': ('t2t_plugin.analysis', 'plot_curves'),
}


__getattr__ = moved_attributes(__name__, _MOVED)

__all__ = [
    'AtomicLocalBackend',
    'AutocastOptimWrapper',
    'BackboneLayerDecayOptimWrapperConstructor',
    'CheckpointError',
    'CheckpointMismatchError',
    'ConfigError',
    'SampleSeededRunner',
    'TrainingCurvesHook',
    'allow_mmengine_checkpoints',
    'check_finite_weights',
    'checkpoint_read_error',
    'checkpoint_safe_globals',
    'checkpoint_state_dict',
    'load_config',
    'load_checkpoints_strictly',
    'load_state_dict_strictly',
    'non_finite_weights',
    'read_checkpoint',
    'remove_stale_temp_files',
    'strip_module_prefix',
]
