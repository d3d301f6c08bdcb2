"""Model analysis: complexity counts and what the model looks at."""
from .complexity import PAPER_MACS, ModelComplexity, count_complexity

__all__ = ['PAPER_MACS', 'ModelComplexity', 'count_complexity']
