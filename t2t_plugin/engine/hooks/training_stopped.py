class TrainingStopped(RuntimeError):
    """A hook ended training on purpose; the message says why and what to
    do. ``tools/train.py`` prints it as one line and exits with 1."""
