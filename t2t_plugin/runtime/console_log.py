"""What a run prints on the terminal when its tool asks for the progress
only: mmengine's progress and evaluation lines, warnings, errors and the
lines marked :data:`SHOWN` (the run's summary); the log file in the work
dir keeps every record (environment, config, hooks).

A filter on the console handler of the run's ``MMLogger``, added by
:class:`~t2t_plugin.runtime.SampleSeededRunner` as it builds its logger
inside :func:`progress_only`; mmpretrain's and mmengine's own tools never
enter it and print everything, as they always did.
"""

import contextlib
import logging
import re
from collections.abc import Iterator
from contextvars import ContextVar

# ``extra=`` of a record the terminal shows at any level.
SHOWN = {'shown': True}
# The lines of mmengine's LoggerHook: training and evaluation progress,
# and the metrics of each evaluation.
_PROGRESS = re.compile(r'^(Epoch|Iter)\((train|val|test)\)')
# The test metrics, which the test tool prints itself once the test ends.
_TEST_METRICS = 'after_test_epoch'
# Warnings of mmengine about itself that its CheckpointHook gives every
# training (it builds a FileClient whatever its arguments): nothing the
# user can act on; the log file keeps them.
_HOST_NOTICES = (
    '"FileClient" will be deprecated in future.',
    '"HardDiskBackend" is the alias of "LocalBackend"',
)

_progress_only: ContextVar[bool] = ContextVar('progress_only', default=False)


class ProgressOnlyFilter(logging.Filter):
    """Lets through warnings (but mmengine's notices about itself),
    errors, :data:`SHOWN` records and the progress lines of mmengine's
    ``LoggerHook``."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING:
            return not record.getMessage().startswith(_HOST_NOTICES)
        if getattr(record, 'shown', False):
            return True
        return (
            bool(_PROGRESS.match(record.getMessage()))
            and record.funcName != _TEST_METRICS
        )


@contextlib.contextmanager
def progress_only(enabled: bool = True) -> Iterator[None]:
    """Within it (if ``enabled``), the loggers of the Runners built show
    only the progress on the terminal (:func:`show_progress_only`)."""
    token = _progress_only.set(enabled)
    try:
        yield
    finally:
        _progress_only.reset(token)


def show_progress_only(logger: logging.Logger) -> None:
    """Within :func:`progress_only`, filter the console handlers of
    ``logger`` (not its file handlers) and say on the terminal where the
    full log is."""
    if not _progress_only.get():
        return
    files = [h for h in logger.handlers if isinstance(h, logging.FileHandler)]
    for handler in logger.handlers:
        if handler not in files and isinstance(handler, logging.StreamHandler):
            handler.addFilter(ProgressOnlyFilter())
    if files:
        logger.info(
            f'Full log (environment, config): {files[0].baseFilename}',
            extra=SHOWN,
        )
