"""Train a model from an mmengine config with mmengine's Runner.

The run's checks are hooks of the config, so mmpretrain's
``tools/train.py`` and ``mim train`` make them too.
"""

import argparse
import sys
from collections.abc import Sequence
from typing import Optional

from mmengine.config import Config

# Read, changed by the options and checked before ``import t2t_plugin``
# (seconds of model imports): a wrong key, folder or file is answered at
# once.
from t2t_preflight import arguments


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
    ``--cfg-options`` are merged (``arguments.load_checked``)."""
    arguments.set_default_work_dir(cfg, args.config, args.work_dir)
    if args.amp:
        arguments.set_amp(cfg)
    if args.resume == 'auto':
        # SampleSeededRunner: the work dir's newest intact checkpoint, else
        # load_from's weights (jobs that always pass --resume keep them);
        # another Runner: mmpretrain's resume=True, load_from=None
        # (build_runner)
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


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    val = [] if args.no_validate else ['val_dataloader']
    cfg, code = arguments.load_checked(
        args, merge_args, ['train_dataloader', *val]
    )
    if cfg is None:
        return code
    from t2t_plugin import cli
    from t2t_plugin.runtime import build_runner
    from t2t_plugin.runtime.hooks import release_locks

    with cli.progress_only(not args.verbose):
        code, runner = cli.run_reported(
            lambda: build_runner(cfg, 'train'), args.config, True
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
