"""Train a model from an mmengine config with mmengine's Runner.

The run's checks are hooks of the config, so mmpretrain's
``tools/train.py`` and ``mim train`` make them too.
"""

import argparse
import importlib.util
import os.path as osp
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Optional

from mmengine.config import Config


def light_module(name: str) -> ModuleType:
    """``t2t_plugin.<name>``, a module importing only the standard library
    and ``mmengine.config``, read by its path while ``t2t_plugin`` is not
    imported: the package's ``__init__`` imports mmpretrain's models
    (seconds, mmdet too where installed), and a wrong option, key or data
    folder is answered before that (also for tools/test.py)."""
    package = importlib.util.find_spec('t2t_plugin')
    if 't2t_plugin' in sys.modules or package is None:
        # the package's own module (or the usual ModuleNotFoundError)
        return importlib.import_module(f't2t_plugin.{name}')
    path = osp.join(package.submodule_search_locations[0], *name.split('.'))
    spec = importlib.util.spec_from_file_location(
        f'_t2t_plugin_{name.replace(".", "_")}', f'{path}.py'
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


arguments = light_module('cli.arguments')
config_reader = light_module('engine.config')
doc_pages = light_module('doc_pages')


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
    parser.add_argument(
        '--verbose',
        action='store_true',
        help='print the environment, the config and every log line here '
        '(by default they go to the log file in the work dir only)',
    )
    return arguments.parse_launch_args(
        parser, 'train_cfg.max_epochs=10 "model.backbone.arch=t-14"', argv
    )


def merge_args(cfg: Config, args: argparse.Namespace) -> Config:
    """The options of the command line applied to a config whose
    ``--cfg-options`` are merged (:func:`load_checked`)."""
    arguments.set_default_work_dir(cfg, args.config, args.work_dir)
    if args.amp:
        arguments.set_amp(cfg)
    if args.resume == 'auto':
        # SampleSeededRunner: the work dir's newest intact checkpoint, else
        # load_from (jobs that always pass --resume keep their weights)
        cfg.resume = 'auto'
    elif args.resume is not None:
        cfg.resume, cfg.load_from = True, args.resume
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


def build_runner(cfg: Config):
    """The Runner (of the config's ``runner_type``, mmengine's without one)
    with its loops and optimizer built, so that a wrong config fails before
    the run starts (``Runner.train`` keeps what is built)."""
    from mmengine.registry import RUNNERS

    runner = RUNNERS.build(cfg)
    runner.train_loop  # noqa: B018  the properties build the loops
    if cfg.get('val_cfg') is not None and cfg.get('val_dataloader'):
        runner.val_loop  # noqa: B018
    runner.optim_wrapper = runner.build_optim_wrapper(runner.optim_wrapper)
    return runner


def load_checked(
    args: argparse.Namespace, loaders: list[str]
) -> tuple[Optional[Config], int]:
    """The config with ``--cfg-options`` merged, read and checked without
    importing the models, or None and the exit code after one line saying
    why not: a missing or broken file, a misspelt key, a missing dataset
    folder, class folders that are not the head's classes, a work dir that
    cannot be written."""
    try:
        cfg = config_reader.load_config(
            args.config, args.cfg_options, import_custom_modules=False
        )
    except config_reader.ConfigError as error:
        if isinstance(error, config_reader.OptionError):
            error = f'Invalid options for {args.config}: {error}'
        print(error, file=sys.stderr)
        return None, 2
    arguments.set_default_work_dir(cfg, args.config, args.work_dir)
    problems = config_reader.input_problems(cfg, loaders, doc_pages.data_page)
    if problems:
        print('\n'.join(problems), file=sys.stderr)
        return None, 1
    return cfg, 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    val = [] if args.no_validate else ['val_dataloader']
    loaded, code = load_checked(args, ['train_dataloader', *val])
    if loaded is None:
        return code
    from t2t_plugin import cli
    from t2t_plugin.engine.hooks import release_locks

    cfg, code = cli.configure_run(args, merge_args, loaded)
    if cfg is None:
        return code
    with cli.progress_only(not args.verbose):
        code, runner = cli.run_reported(
            lambda: build_runner(cfg), args.config, True
        )
        if code == 0:
            code, _ = cli.run_reported(runner.train, args.config)
    if code == 0:
        cli.close_dist()
    else:  # this process may go on (main() called from Python)
        release_locks()
    return code


if __name__ == '__main__':
    sys.exit(main())
