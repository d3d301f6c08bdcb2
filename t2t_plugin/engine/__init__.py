"""Training helpers: atomic and loadable checkpoints, CPU autocast and
distributed set-up, training curves, and input checks for the tools."""
from .checkpoint import (
    AtomicLocalBackend,
    CheckpointMismatchError,
    allow_mmengine_checkpoints,
    checkpoint_read_error,
    checkpoint_safe_globals,
    load_checkpoints_strictly,
    remove_stale_temp_files,
)
from .curves import find_scalar_files, load_scalars, plot_curves
from .distributed import init_cpu_dist, setup_cpu_dist
from .hooks import TrainingCurvesHook
from .inputs_check import (
    BUILD_ERRORS,
    find_missing_inputs,
    load_config,
    report_build_error,
)
from .optim_constructor import BackboneLayerDecayOptimWrapperConstructor
from .optim_wrapper import AutocastOptimWrapper

# Resume, ``load_from`` and ``Pretrained`` initialisation all go through
# ``torch.load``; configs import this package before any of them runs.
allow_mmengine_checkpoints()

__all__ = [
    'BUILD_ERRORS', 'AtomicLocalBackend', 'AutocastOptimWrapper',
    'BackboneLayerDecayOptimWrapperConstructor', 'CheckpointMismatchError',
    'TrainingCurvesHook', 'allow_mmengine_checkpoints',
    'checkpoint_read_error', 'checkpoint_safe_globals',
    'find_missing_inputs', 'find_scalar_files', 'init_cpu_dist',
    'load_checkpoints_strictly', 'load_config', 'load_scalars',
    'plot_curves', 'remove_stale_temp_files', 'report_build_error',
    'setup_cpu_dist'
]
