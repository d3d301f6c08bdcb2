from .training_curves_hook import TrainingCurvesHook

__all__ = ['TrainingCurvesHook']
