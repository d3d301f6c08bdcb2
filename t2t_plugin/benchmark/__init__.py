"""Speed and memory measurement of T2T-ViT beside other implementations."""
from .measure import (
    DTYPES,
    StepRunner,
    matmul_gflops,
    peak_memory,
    tensor_bytes,
    time_steps,
)
from .references import (
    build_mmpretrain_reference,
    build_official_reference,
    plugin_to_official_state_dict,
)

__all__ = [
    'DTYPES', 'StepRunner', 'build_mmpretrain_reference',
    'build_official_reference', 'matmul_gflops', 'peak_memory',
    'plugin_to_official_state_dict', 'tensor_bytes', 'time_steps'
]
