"""Command-line plumbing of the tools (options, one-line error reports,
exit codes); library code, ``t2t_plugin.apis`` included, never imports
it."""

from ..engine.console_log import progress_only
from .arguments import (
    enable_show,
    enable_tta,
    parse_launch_args,
    set_amp,
    set_default_work_dir,
)
from .launch import close_dist
from .reporting import configure_run, run_reported

__all__ = [
    'close_dist',
    'configure_run',
    'enable_show',
    'enable_tta',
    'parse_launch_args',
    'progress_only',
    'run_reported',
    'set_amp',
    'set_default_work_dir',
]
