"""Command-line plumbing of the tools: argument parsing, one-line error
reporting, launcher and runner set-up shared by ``tools/train.py`` and
``tools/test.py``, what ``tools/test.py`` adds to a run (``testing``), the
model loading and image checks of ``tools/infer.py`` and the visualisation
tools (``model_loading``), and the image loop of the visualisation tools.

Nothing here is needed to build or run a model from a config; library code
never imports this package.
"""

from .distributed import init_cpu_dist, setup_cpu_dist
from .inputs_check import (
    BUILD_ERRORS,
    find_missing_inputs,
    load_config,
    report_build_error,
)
from .launch import (
    add_launch_arguments,
    close_dist,
    dist_failure_message,
    parse_launch_args,
    prepare_launcher,
)
from .runner import build_runner, set_default_work_dir

__all__ = [
    'BUILD_ERRORS',
    'add_launch_arguments',
    'build_runner',
    'close_dist',
    'dist_failure_message',
    'find_missing_inputs',
    'init_cpu_dist',
    'load_config',
    'parse_launch_args',
    'prepare_launcher',
    'report_build_error',
    'set_default_work_dir',
    'setup_cpu_dist',
]
