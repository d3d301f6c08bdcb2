"""Registered runtime parts: atomic and loadable checkpoints, CPU autocast,
the layer-decay optimizer constructor, the training-curves hook and the
runner that seeds augmentation per sample; the one reader of checkpoints
and configs that every tool and API uses."""

from t2t_preflight import ConfigError, check_config, load_config

from ..models.checkpoint_checks import non_finite_tensors
from .checkpoint import (
    AtomicLocalBackend,
    CheckpointError,
    CheckpointMismatchError,
    checkpoint_safe_globals,
    checkpoint_weights,
    load_state_dict_strictly,
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
    'checkpoint_safe_globals',
    'check_config',
    'checkpoint_weights',
    'load_config',
    'load_state_dict_strictly',
    'newest_intact_checkpoint',
    'non_finite_tensors',
    'read_checkpoint',
    'remove_stale_temp_files',
]
