"""The errors that stop a tool or a run in one line. Library code raises
them with a message a user can act on; a tool prints that message alone
and exits with the error's ``exit_code``: it catches
:class:`RunCheckError`, the base of the others, and lists none of them."""

import pickle


class RunCheckError(ValueError):
    """A check found that a run cannot start or that its result would mean
    nothing; the message is one line saying what to do. A ValueError, as
    every other user mistake."""

    exit_code = 1


class ConfigError(RunCheckError):
    """A config that cannot be loaded or run, or a ``--cfg-options`` entry
    that does not apply to it; the message is one line. (A model or
    dataset part refuses a wrong argument with a ValueError, as the host's
    parts do.)"""


class ArgumentRefused(RunCheckError):
    """A tool's option value refused after parsing (against the config or
    the machine, processes not started as ``--launcher`` says included),
    its message naming the option: tools report it as argparse does, in
    one line, exit code 2."""

    exit_code = 2


class TrainingStopped(RunCheckError, RuntimeError):
    """A hook ended training on purpose; the message says why and what to
    do."""


class CheckpointError(RunCheckError, RuntimeError):
    """A checkpoint that cannot be read, or whose weights do not fit the
    model (a RuntimeError as torch's strict loading raises); one line.

    Args:
        message (str): The line.
        classes (int): Where only the classifier's number of classes
            differs from the head's, the checkpoint's number; else 0.
        advice (str): Then what to do in training, the end of the
            message: a tool that only runs the model replaces it.
    """

    def __init__(
        self, message: str, classes: int = 0, advice: str = ''
    ) -> None:
        super().__init__(message)
        self.classes = classes
        self.advice = advice


class DataFileError(RunCheckError, pickle.UnpicklingError):
    """A data file that cannot be read as data: damaged, malformed, or
    holding what would run code (an UnpicklingError too, as pickle's own
    refusals). The message is one line, starting with the file's path
    where it is known (``path``, else ``'A data file'``).

    Args:
        problem (str): What is wrong and what to do, after the file's name.
        path (str): The file. Defaults to '' (not known where raised).
    """

    def __init__(self, problem: str, path: str = '') -> None:
        super().__init__(f'{path or "A data file"} {problem}')
        self.problem = problem
        self.path = path

    def __reduce__(self) -> tuple:
        # sent back from data-loader workers: both arguments, not args
        return (type(self), (self.problem, self.path))

    def naming(self, path: str) -> 'DataFileError':
        """The same error, naming ``path``."""
        return type(self)(self.problem, path)
