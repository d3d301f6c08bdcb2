from .non_finite_guard_hook import (
    NonFiniteGuardHook,
    NonFiniteLossError,
    first_non_finite,
)
from .random_state_hook import (
    RandomStateHook,
    get_random_state,
    set_random_state,
)
from .training_curves_hook import TrainingCurvesHook
from .training_stopped import TrainingStopped

__all__ = [
    'NonFiniteGuardHook', 'NonFiniteLossError', 'RandomStateHook',
    'TrainingCurvesHook', 'TrainingStopped', 'first_non_finite',
    'get_random_state', 'set_random_state'
]
