"""Train a model from an mmengine config with mmengine's Runner.

The run's checks are hooks of the config, so mmpretrain's
``tools/train.py`` and ``mim train`` make them too.
"""

import argparse
import sys
from collections.abc import Sequence
from typing import Optional

from mmengine.config import Config
from mmengine.registry import RUNNERS
from mmengine.runner import Runner

from t2t_plugin.cli import (
    close_dist,
    configure_run,
    find_missing_inputs,
    merge_options,
    parse_launch_args,
    run_reported,
    set_amp,
    set_default_work_dir,
)
from t2t_plugin.engine.hooks import (
    RunCheckError,
    output_problem,
    release_locks,
)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('config', help='config file')
    parser.add_argument('--work-dir', help='folder for logs and checkpoints')
    parser.add_argument(
        '--resume',
        nargs='?',
        type=str,
        const='auto',
        help='resume from the newest intact checkpoint in the work dir (no '
        'value or "auto") or from the checkpoint PATH given',
    )
    for flag, text in (
        ('--amp', 'mixed precision: fp16 (or bf16) on CUDA, bf16 on CPU'),
        ('--auto-scale-lr', 'scale the lr by the real over the base batch'),
        ('--no-validate', 'skip evaluation during training'),
        ('--no-pin-memory', 'turn off pin_memory in the dataloaders'),
        ('--no-persistent-workers', 'turn off persistent_workers too'),
    ):
        parser.add_argument(flag, action='store_true', help=text)
    return parse_launch_args(
        parser, 'train_cfg.max_epochs=10 "model.backbone.arch=t-14"', argv
    )


def set_resume(cfg: Config, resume: str) -> None:
    """Resume from ``resume`` or, for ``'auto'``, from what the Runner
    chooses: the work dir's newest intact checkpoint, or without one
    ``load_from`` if any (jobs that always pass ``--resume`` keep their
    pretrained weights)."""
    if resume != 'auto':
        cfg.resume, cfg.load_from = True, resume
    else:
        # SampleSeededRunner's resume='auto' keeps load_from to fall back on
        cfg.resume = 'auto' if cfg.get('load_from') else True


def merge_args(cfg: Config, args: argparse.Namespace) -> Config:
    merge_options(cfg, args.cfg_options)
    set_default_work_dir(cfg, args.config, args.work_dir)
    if args.amp:
        set_amp(cfg)
    if args.resume is not None:
        set_resume(cfg, args.resume)
    if args.auto_scale_lr:
        if 'base_batch_size' not in cfg.get('auto_scale_lr', {}):
            raise ValueError(
                '--auto-scale-lr needs auto_scale_lr = '
                'dict(base_batch_size=...) in the config.'
            )
        cfg.auto_scale_lr.enable = True
    if args.no_validate:
        cfg.val_cfg = cfg.val_dataloader = cfg.val_evaluator = None
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        if cfg.get(loader) is None:
            continue
        if args.no_pin_memory:
            cfg[loader].pin_memory = False
        if args.no_persistent_workers:
            cfg[loader].persistent_workers = False
    cfg.launcher = args.launcher
    return cfg


def build_runner(cfg: Config) -> Runner:
    """The Runner (of the config's ``runner_type``, mmengine's without one)
    with its loops and optimizer built, so that a wrong config fails before
    the run starts (``Runner.train`` keeps what is built)."""
    runner = RUNNERS.build(cfg)
    runner.train_loop  # noqa: B018  the properties build the loops
    if cfg.get('val_cfg') is not None and cfg.get('val_dataloader'):
        runner.val_loop  # noqa: B018
    try:
        runner.optim_wrapper = runner.build_optim_wrapper(runner.optim_wrapper)
    except (TypeError, ValueError, KeyError) as error:
        raise RunCheckError(
            f'optim_wrapper: {type(error).__name__}: {error}; check the '
            'optimizer settings of the config and --cfg-options.'
        ) from error
    return runner


def _problems(cfg: Config, args: argparse.Namespace) -> list[str]:
    # --no-validate has set val_dataloader to None, which is not checked
    missing = find_missing_inputs(
        cfg,
        ['train_dataloader', 'val_dataloader'],
        # the Runner resumes the work dir's checkpoint if there is one
        check_load_from=cfg.get('resume') != 'auto',
    )
    problem = output_problem(cfg.work_dir, '--work-dir')
    return missing or ([problem] if problem else [])


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    cfg, code = configure_run(args, merge_args, _problems)
    if cfg is None:
        return code
    code, runner = run_reported(
        lambda: build_runner(cfg), cfg, args.config, True
    )
    if code == 0:
        code, _ = run_reported(runner.train, cfg, args.config)
    if code == 0:
        close_dist()
    else:  # this process may go on (main() called from Python)
        release_locks()
    return code


if __name__ == '__main__':
    sys.exit(main())
