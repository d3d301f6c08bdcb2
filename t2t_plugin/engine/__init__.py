"""Registered runtime parts: atomic and loadable checkpoints, CPU autocast,
the layer-decay optimizer constructor, the training-curves hook and the
runner that seeds augmentation per sample; the one reader of checkpoints
and configs that every tool and API uses."""

from t2t_preflight import ConfigError, check_config, load_config

from .checkpoint import (
    AtomicLocalBackend,
    CheckpointError,
    CheckpointMismatchError,
    check_finite_weights,
    checkpoint_read_error,
    checkpoint_safe_globals,
    checkpoint_state_dict,
    load_state_dict_strictly,
    non_finite_tensors,
    read_checkpoint,
    remove_stale_temp_files,
)
from .hooks import TrainingCurvesHook
from .optim_constructor import BackboneLayerDecayOptimWrapperConstructor
from .optim_wrapper import AutocastOptimWrapper
from .sample_seeded_runner import (
    SampleSeededRunner,
    build_runner,
    newest_intact_checkpoint,
)

__all__ = [
    'AtomicLocalBackend',
    'AutocastOptimWrapper',
    'BackboneLayerDecayOptimWrapperConstructor',
    'CheckpointError',
    'CheckpointMismatchError',
    'ConfigError',
    'SampleSeededRunner',
    'TrainingCurvesHook',
    'build_runner',
    'check_finite_weights',
    'checkpoint_read_error',
    'checkpoint_safe_globals',
    'check_config',
    'checkpoint_state_dict',
    'load_config',
    'load_state_dict_strictly',
    'newest_intact_checkpoint',
    'non_finite_tensors',
    'read_checkpoint',
    'remove_stale_temp_files',
]
