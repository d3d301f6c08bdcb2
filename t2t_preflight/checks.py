"""The pre-flight of a run: every check of a config's inputs and outputs
that needs no model, in one place. Our tools run :func:`preflight` before
the models are imported; the Runner runs :func:`check_config` as it is
built, whichever door builds it, and its hooks check what only the built
datasets can tell."""

from typing import Optional

from mmengine.config import Config

from .config import (
    arch_problem,
    empty_scheduler,
    file_config,
    misspelt_keys,
    output_problem,
    schedule_mismatch,
    topk_problem,
    warn_stale_variables,
)
from .errors import ConfigError
from .inputs import checkpoint_problem


def config_problem(cfg: Config, training: bool = False) -> Optional[str]:
    """The first mistake of a config that its file and the disk answer
    alone, or None: an unknown arch, a schedule that cannot run, a top-k
    above the classes, a checkpoint that is not there (``init_cfg`` ones for a
    ``training`` only), a work dir that cannot be written."""
    work_dir = cfg.get('work_dir')
    return (
        arch_problem(cfg)
        or empty_scheduler(cfg)
        or topk_problem(cfg)
        or checkpoint_problem(cfg, training)
        # the Runner makes the work dir first thing: mmengine's OSError else
        or (work_dir and output_problem(work_dir, '--work-dir'))
        or None
    )


def preflight(cfg: Config, dataloaders: list[str]) -> list[str]:
    """What stops a run of ``cfg`` on the ``dataloaders`` it reads, before
    anything is built: the config's own mistake (:func:`config_problem`),
    in one line, empty if none. (The datasets are judged after the
    models' import, where their classes say where they look:
    :func:`~t2t_preflight.inputs.find_missing_data`.)"""
    problem = config_problem(cfg, 'train_dataloader' in dataloaders)
    return [problem] if problem else []


def check_config(cfg: Config) -> None:
    """The checks a Runner makes on its config before it creates the work
    dir: a warning line for a variable given as an option that does not
    reach its keys (:func:`~t2t_preflight.config.stale_variables`), then
    :func:`config_problem` and a key that is no argument of the class the
    registry builds for its dict
    (:func:`~t2t_preflight.config.misspelt_keys`), which raise
    :class:`ConfigError`."""
    warn_stale_variables(cfg)
    problem = config_problem(cfg) or misspelt_keys(cfg)
    if problem:
        raise ConfigError(problem)


def schedule_warning(cfg: Config) -> Optional[str]:
    """The warning line of a training's schedule that ends after it, or
    before it where the file ended it with training
    (:func:`~t2t_preflight.config.schedule_mismatch`); None if it fits."""
    return schedule_mismatch(cfg, file_config(cfg))
