"""Command-line plumbing of the tools: options and how they change a
config (``arguments``), one-line error reporting (``reporting``), the CPU
distributed launcher (``launch``, ``distributed``), and the model loading
and image loop of ``tools/infer.py`` and the visualisation tools.

The checks of a run are registered hooks (``t2t_plugin.engine.hooks``),
not part of this package; library code never imports it.
"""

from .arguments import (
    add_launch_arguments,
    enable_show,
    enable_tta,
    merge_options,
    parse_launch_args,
    set_amp,
    set_default_work_dir,
)
from .distributed import init_cpu_dist, setup_cpu_dist
from .launch import close_dist, dist_failure_message, prepare_launcher
from .reporting import (
    BUILD_ERRORS,
    CHECK_ERRORS,
    find_missing_inputs,
    load_config,
    os_error_line,
    report_build_error,
    run_reported,
)

__all__ = [
    'BUILD_ERRORS',
    'CHECK_ERRORS',
    'add_launch_arguments',
    'close_dist',
    'dist_failure_message',
    'enable_show',
    'enable_tta',
    'find_missing_inputs',
    'init_cpu_dist',
    'load_config',
    'merge_options',
    'os_error_line',
    'parse_launch_args',
    'prepare_launcher',
    'report_build_error',
    'run_reported',
    'set_amp',
    'set_default_work_dir',
    'setup_cpu_dist',
]
