"""The errors that stop a tool or a run in one line, each with the exit
code the tools give it. Library code raises them with a message a user can
act on; the tools print that message alone."""


class ConfigError(ValueError):
    """A config that cannot be loaded or run; the message is one line."""


class ArgumentRefused(ValueError):
    """A tool's option value refused after parsing (against the config or
    the machine), its message naming the option: tools report it as
    argparse does, in one line, exit code 2."""


class CfgOptionsError(ConfigError):
    """A ``--cfg-options`` entry that does not apply to the config."""


class TrainingStopped(RuntimeError):
    """A hook ended training on purpose; the message says why and what to
    do. The tools print it as one line and exit with 1."""


class RunCheckError(ValueError):
    """A check found that a run cannot start or that its result would mean
    nothing; the message is one line saying what to do. The tools print it
    alone and exit with 1."""
