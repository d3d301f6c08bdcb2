"""Command-line plumbing of the tools: options and how they change a
config (``arguments``), starting a run and one-line error reports
(``reporting``), the CPU distributed launch (``launch``, ``distributed``),
and the model loading and image loop of the inference and visualisation
tools. Library code never imports it.
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
from .launch import close_dist
from .reporting import (
    configure_run,
    find_missing_inputs,
    run_reported,
    runner_from_cfg,
)

__all__ = [
    'add_launch_arguments',
    'close_dist',
    'configure_run',
    'enable_show',
    'enable_tta',
    'find_missing_inputs',
    'merge_options',
    'parse_launch_args',
    'run_reported',
    'runner_from_cfg',
    'set_amp',
    'set_default_work_dir',
]
