"""Registered runtime parts: atomic and loadable checkpoints, CPU autocast,
the layer-decay optimizer constructor and the training-curves hook; the one
reader of checkpoints and configs that every tool and API uses."""
import importlib
import warnings

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

# Resume, ``load_from`` and ``Pretrained`` initialisation all go through
# ``torch.load``; configs import this package before any of them runs.
allow_mmengine_checkpoints()

# Names that lived here before the command-line plumbing moved to
# ``t2t_plugin.cli`` and the curves to ``t2t_plugin.analysis``.
_MOVED = {
    'BUILD_ERRORS': 't2t_plugin.cli',
    'find_missing_inputs': 't2t_plugin.cli',
    'report_build_error': 't2t_plugin.cli',
    'init_cpu_dist': 't2t_plugin.cli',
    'setup_cpu_dist': 't2t_plugin.cli',
    'find_scalar_files': 't2t_plugin.analysis',
    'load_scalars': 't2t_plugin.analysis',
    'plot_curves': 't2t_plugin.analysis',
}


def __getattr__(name: str):
    if name not in _MOVED:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    home = _MOVED[name]
    warnings.warn(
        f't2t_plugin.engine.{name} moved to {home}.{name}; import it from '
        'there.',
        DeprecationWarning,
        stacklevel=2)
    return getattr(importlib.import_module(home), name)


__all__ = [
    'AtomicLocalBackend', 'AutocastOptimWrapper',
    'BackboneLayerDecayOptimWrapperConstructor', 'CheckpointError',
    'CheckpointMismatchError', 'ConfigError', 'TrainingCurvesHook',
    'allow_mmengine_checkpoints', 'check_finite_weights',
    'checkpoint_read_error',
    'checkpoint_safe_globals', 'checkpoint_state_dict', 'load_config',
    'load_checkpoints_strictly', 'load_state_dict_strictly',
    'non_finite_weights', 'read_checkpoint', 'remove_stale_temp_files',
    'strip_module_prefix'
]
