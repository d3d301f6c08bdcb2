"""Speed and memory measurement of T2T-ViT beside other implementations.

The library of .dev_scripts/compare_implementations.py, kept beside it rather
than in the installed package: the references import other code bases
(a local checkout of the official code, under a private module name in
``sys.modules``), which no model or API of the plugin should depend on.
"""

from t2t_plugin.analysis.speed import (
    DTYPES,
    StepRunner,
    peak_memory,
    tensor_bytes,
    time_steps,
)

from .ceiling import matmul_gflops
from .references import (
    build_mmpretrain_reference,
    build_official_reference,
    plugin_to_official_state_dict,
)

__all__ = [
    'DTYPES',
    'StepRunner',
    'build_mmpretrain_reference',
    'build_official_reference',
    'matmul_gflops',
    'peak_memory',
    'plugin_to_official_state_dict',
    'tensor_bytes',
    'time_steps',
]
