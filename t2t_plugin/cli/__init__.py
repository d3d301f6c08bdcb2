"""Command-line plumbing of the tools (one-line error reports, exit
codes, the loop of the image tools); library code, ``t2t_plugin.apis``
included, never imports it. The options read before ``import t2t_plugin``
are :mod:`t2t_preflight.arguments`."""

from ..runtime.console_log import progress_only
from .launch import close_dist
from .reporting import run_reported

__all__ = [
    'close_dist',
    'progress_only',
    'run_reported',
]
