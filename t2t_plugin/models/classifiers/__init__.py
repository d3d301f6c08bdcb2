from .distillation_classifier import DistillationClassifier

__all__ = ['DistillationClassifier']
