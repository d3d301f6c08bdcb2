"""The pre-flight of a run: every check of a config's inputs and outputs
that needs no model, in one place. Our tools run :func:`preflight` before
the models are imported; a Runner built any other way runs
:func:`check_config` as it is built, and its hooks check what only the
built datasets can tell."""

import os.path as osp
from dataclasses import dataclass
from typing import Optional

from mmengine.config import Config

from .config import (
    ConfigError,
    arch_problem,
    empty_scheduler,
    misspelt_keys,
    output_problem,
    schedule_mismatch,
    topk_problem,
    warn_stale_variables,
)
from .inputs import checkpoint_paths, checkpoint_problem


@dataclass(frozen=True)
class Answered:
    """What a pre-flight answered for a run, so that the run's hooks do
    not judge it again (``SampleSeededRunner.preflight``): the checkpoint
    files found, and whether the run trains (None: not known)."""

    checkpoints: frozenset = frozenset()
    trains: Optional[bool] = None

    @classmethod
    def of(cls, cfg: Config, dataloaders: list[str] = ()) -> 'Answered':
        """What :func:`check_config` (no ``dataloaders``) or
        :func:`preflight` on ``dataloaders`` answered for ``cfg``."""
        training = 'train_dataloader' in dataloaders
        return cls(
            frozenset(checkpoint_paths(cfg, training)),
            training if dataloaders else None,
        )


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


def check_config(cfg: Config, preflight_done: bool = False) -> Optional[str]:
    """The checks a Runner makes on its config before it creates the work
    dir. Unless ``preflight_done`` (the tool ran :func:`preflight` on this
    config), a warning line for a variable that does not reach its keys
    (:func:`~t2t_preflight.config.stale_variables`) and
    :func:`config_problem`; then a key that is no argument of the class
    the registry builds for its dict
    (:func:`~t2t_preflight.config.misspelt_keys`). Those raise
    :class:`ConfigError`; a schedule that ends after training, or before
    it where the file ended it with training, is returned as a warning
    line (None if it fits)."""
    filename, loaded = cfg.filename, None
    if filename and osp.isfile(filename):
        try:
            loaded = Config.fromfile(filename, import_custom_modules=False)
        # a file changed since, or that reads what is gone: not judged
        except Exception:
            loaded = None
    if not preflight_done:
        if loaded is not None:
            warn_stale_variables(cfg, loaded)
        problem = config_problem(cfg)
        if problem:
            raise ConfigError(problem)
    problem = misspelt_keys(cfg)
    if problem:
        raise ConfigError(problem)
    return schedule_mismatch(cfg, loaded)
