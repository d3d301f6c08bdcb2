from .bad_image_hook import BadImageHook, TooManyBadImagesError
from .non_finite_guard_hook import (
    NonFiniteGuardHook,
    NonFiniteLossError,
    first_non_finite,
)
from .pyramid_stride_check_hook import (
    PyramidStrideCheckHook,
    PyramidStrideError,
)
from .random_state_hook import (
    RandomStateHook,
    get_random_state,
    set_random_state,
)
from .rank_heartbeat_hook import RankHeartbeatHook
from .training_curves_hook import TrainingCurvesHook
from .training_stopped import TrainingStopped

__all__ = [
    'BadImageHook',
    'NonFiniteGuardHook',
    'NonFiniteLossError',
    'PyramidStrideCheckHook',
    'PyramidStrideError',
    'RandomStateHook',
    'RankHeartbeatHook',
    'TooManyBadImagesError',
    'TrainingCurvesHook',
    'TrainingStopped',
    'first_non_finite',
    'get_random_state',
    'set_random_state',
]
