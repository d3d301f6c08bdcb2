"""Registered hooks that check and guard a run, set by
``configs/_base_/default_runtime.py``, so that every tool that builds an
mmengine Runner from our configs gets them: before the run
(:class:`RunCheckHook`), during it (:class:`RunGuardHook`), for an exact
resume (:class:`ExactResumeHook`), a detector's pyramid strides
(:class:`PyramidStrideCheckHook`); mmengine's ``CheckpointHook`` that
removes a checkpoint only once its successor is saved, mmpretrain's
``VisualizationHook`` drawing readable pictures, and the summary at the
end of a training."""

from t2t_preflight.errors import RunCheckError, TrainingStopped

from .exact_resume_hook import ExactResumeHook
from .pyramid_stride_check_hook import PyramidStrideCheckHook
from .run_check_hook import RunCheckHook, class_mismatch, release_locks
from .run_guard_hook import RunGuardHook
from .run_summary_hook import RunSummaryHook
from .save_first_checkpoint_hook import SaveFirstCheckpointHook
from .visualization_hook import ReadableVisualizationHook

__all__ = [
    'ExactResumeHook',
    'PyramidStrideCheckHook',
    'ReadableVisualizationHook',
    'RunCheckError',
    'RunCheckHook',
    'RunGuardHook',
    'RunSummaryHook',
    'SaveFirstCheckpointHook',
    'TrainingStopped',
    'class_mismatch',
    'release_locks',
]
