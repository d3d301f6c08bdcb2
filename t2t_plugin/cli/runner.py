"""The mmengine Runner of a tool run, built before any data is read."""

import os.path as osp
from collections.abc import Sequence
from typing import Optional

from mmengine.config import Config
from mmengine.registry import RUNNERS
from mmengine.runner import Runner


def set_default_work_dir(
    cfg: Config, config_path: str, work_dir: Optional[str]
) -> None:
    """Set ``cfg.work_dir``: ``work_dir`` if given, else the config's own,
    else ``./work_dirs/<config name>`` as in every OpenMMLab toolbox.

    Args:
        cfg (Config): The run's config.
        config_path (str): The config file the run was started with.
        work_dir (str, optional): ``--work-dir`` from the command line.
    """
    if work_dir:
        cfg.work_dir = work_dir
    elif cfg.get('work_dir') is None:
        cfg.work_dir = osp.join(
            './work_dirs', osp.splitext(osp.basename(config_path))[0]
        )


def build_runner(cfg: Config, loops: Sequence[str] = ()) -> Runner:
    """Build the Runner and the given loops, before any step runs.

    mmengine builds the datasets and loops only inside ``Runner.train`` /
    ``Runner.test``; building them here lets a wrong config or option fail
    before the run starts, where the tool can report it as one line.

    Args:
        cfg (Config): The run's config.
        loops (Sequence[str]): Loop properties to build now, e.g.
            ``('train_loop', 'val_loop')`` or ``('test_loop',)``.

    Returns:
        Runner: The runner, with those loops built.
    """
    runner = (
        Runner.from_cfg(cfg)
        if 'runner_type' not in cfg
        else RUNNERS.build(cfg)
    )
    for loop in loops:
        getattr(runner, loop)  # the properties build the loops on access
    return runner
