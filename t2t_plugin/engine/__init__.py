"""Registered runtime parts: atomic and loadable checkpoints, CPU autocast,
the layer-decay optimizer constructor, the training-curves hook and the
runner that seeds augmentation per sample; the one reader of checkpoints
and configs that every tool and API uses."""

from t2t_preflight import ConfigError, check_config, load_config

from .checkpoint import (
    AtomicLocalBackend,
    CheckpointError,
    CheckpointMismatchError,
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
    'check_config',
    'load_config',
    'newest_intact_checkpoint',
    'read_checkpoint',
    'remove_stale_temp_files',
]
