class TrainingStopped(RuntimeError):
    """A hook ended training on purpose; the message says why and what to
    do. The tools print it as one line and exit with 1."""


class RunCheckError(ValueError):
    """A check of a run found that it cannot start or that its result
    would mean nothing; the message is one line saying what to do. The
    tools print it alone and exit with 1; other tools end with it as the
    last line of their traceback."""
