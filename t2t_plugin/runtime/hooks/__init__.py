"""Registered hooks that check and guard a run, set by
``configs/_base_/default_runtime.py``, so that every tool that builds an
mmengine Runner from our configs gets them."""

from .bad_image_hook import BadImageHook, TooManyBadImagesError
from .checkpoint_check_hook import CheckpointCheckHook, class_mismatch
from .non_finite_guard_hook import NonFiniteGuardHook, NonFiniteLossError
from .non_finite_output_hook import NonFiniteOutputHook
from .pyramid_stride_check_hook import (
    PyramidStrideCheckHook,
    PyramidStrideError,
)
from .random_state_hook import RandomStateHook
from .rank_heartbeat_hook import RankHeartbeatHook
from .resume_guard_hook import ResumeGuardHook
from .run_check_hook import RunCheckHook
from .run_checks import RunCheckError, TrainingStopped
from .run_summary_hook import RunSummaryHook
from .save_first_checkpoint_hook import SaveFirstCheckpointHook
from .training_curves_hook import TrainingCurvesHook
from .visualization_hook import ReadableVisualizationHook
from .work_dir_hook import DiskFullError, WorkDirHook, release_locks

__all__ = [
    'BadImageHook',
    'CheckpointCheckHook',
    'DiskFullError',
    'NonFiniteGuardHook',
    'NonFiniteLossError',
    'NonFiniteOutputHook',
    'PyramidStrideCheckHook',
    'PyramidStrideError',
    'RandomStateHook',
    'ReadableVisualizationHook',
    'RankHeartbeatHook',
    'ResumeGuardHook',
    'RunCheckError',
    'RunCheckHook',
    'RunSummaryHook',
    'SaveFirstCheckpointHook',
    'TooManyBadImagesError',
    'TrainingCurvesHook',
    'TrainingStopped',
    'WorkDirHook',
    'class_mismatch',
    'release_locks',
]
