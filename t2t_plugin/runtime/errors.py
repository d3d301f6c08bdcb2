"""The errors that end a run in one line: raised by the runner and its
hooks, printed alone by the tools (exit code 1), the last line of a
traceback through any other tool."""


class TrainingStopped(RuntimeError):
    """A hook ended training on purpose; the message says why and what to
    do. The tools print it as one line and exit with 1."""


class RunCheckError(ValueError):
    """A check found that a run cannot start or that its result would mean
    nothing; the message is one line saying what to do. The tools print it
    alone and exit with 1."""
