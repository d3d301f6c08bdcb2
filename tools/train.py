"""Train a model from an mmengine config with mmengine's Runner.

Works for this project's mmpretrain configs and for mmdet / mmseg configs
that use ``type='mmpretrain.T2TViT'`` (the config's ``default_scope`` picks
the registries). Outputs go to ``work_dirs/<config name>/`` unless
``--work-dir`` says otherwise.
"""

import argparse
import os.path as osp
import sys

import torch
from mmengine.config import Config

from t2t_plugin.cli import (
    BUILD_ERRORS,
    add_launch_arguments,
    build_runner,
    close_dist,
    dist_failure_message,
    find_missing_inputs,
    load_config,
    parse_launch_args,
    prepare_launcher,
    report_build_error,
    set_default_work_dir,
)
from t2t_plugin.cli.run_checks import (
    add_training_guards,
    check_training_config,
    check_training_runner,
    misspelt_option_key,
    newest_intact_checkpoint,
)
from t2t_plugin.engine import (
    CheckpointMismatchError,
    checkpoint_read_error,
    remove_stale_temp_files,
)
from t2t_plugin.engine.hooks import TrainingStopped


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('config', help='config file')
    parser.add_argument('--work-dir', help='folder for logs and checkpoints')
    parser.add_argument(
        '--resume',
        nargs='?',
        type=str,
        const='auto',
        help='resume from the latest checkpoint in the work dir (no value '
        'or "auto") or from the checkpoint PATH given',
    )
    parser.add_argument(
        '--amp',
        action='store_true',
        help='mixed precision: fp16 autocast with dynamic loss scaling on '
        'CUDA (bf16 if the config sets optim_wrapper.dtype), bf16 autocast '
        'on CPU',
    )
    parser.add_argument(
        '--auto-scale-lr',
        action='store_true',
        help='scale the learning rate by the real batch size over the '
        "config's auto_scale_lr.base_batch_size",
    )
    parser.add_argument(
        '--no-validate',
        action='store_true',
        help='skip evaluation during training',
    )
    parser.add_argument(
        '--no-pin-memory',
        action='store_true',
        help='turn off pin_memory in the dataloaders',
    )
    parser.add_argument(
        '--no-persistent-workers',
        action='store_true',
        help='turn off persistent_workers in the dataloaders',
    )
    add_launch_arguments(
        parser, 'train_cfg.max_epochs=10 "model.backbone.arch=t-14"'
    )
    return parse_launch_args(parser)


def set_amp(cfg: Config) -> None:
    """Turn on mixed precision in ``cfg.optim_wrapper``."""
    optim_wrapper = cfg.optim_wrapper
    kind = optim_wrapper.get('type', 'OptimWrapper')
    if kind not in ('OptimWrapper', 'AmpOptimWrapper', 'AutocastOptimWrapper'):
        raise ValueError(
            f'--amp supports OptimWrapper configs, but this '
            f'one uses {kind}; set mixed precision in the '
            'config instead.'
        )
    if torch.cuda.is_available():
        optim_wrapper.type = 'AmpOptimWrapper'
        optim_wrapper.pop('device_type', None)  # AutocastOptimWrapper's
        optim_wrapper.setdefault('loss_scale', 'dynamic')
    else:
        # mmengine's AmpOptimWrapper asserts on CPU; CPU autocast is bf16.
        optim_wrapper.type = 'AutocastOptimWrapper'
        optim_wrapper.pop('loss_scale', None)
        optim_wrapper.dtype = 'bfloat16'


def set_resume(cfg: Config, resume: str) -> None:
    """Resume from ``resume`` or, for ``'auto'``, the work dir's latest.

    A fresh work dir has nothing to resume: the run then starts as it would
    without ``--resume`` (from the config's ``load_from`` if any), so that
    jobs that always pass ``--resume`` keep their pretrained weights.

    Args:
        cfg (Config): The run's config, with its ``work_dir`` set.
        resume (str): ``'auto'`` or the path of a checkpoint.
    """
    if resume != 'auto':
        cfg.resume = True
        cfg.load_from = resume
        return
    # mmengine's finder trusts last_checkpoint, even an empty one.
    latest = newest_intact_checkpoint(cfg.work_dir)
    if latest is not None:
        cfg.resume = True
        cfg.load_from = latest
        return
    cfg.resume = False
    start = f'load_from={cfg.load_from}' if cfg.get('load_from') else 'scratch'
    print(f'No checkpoint in {cfg.work_dir} to resume; starting from {start}.')


def merge_args(cfg: Config, args: argparse.Namespace) -> Config:
    """Apply the command-line options to the config."""
    if args.cfg_options:
        error = misspelt_option_key(cfg, args.cfg_options)
        if error:
            raise ValueError(error)
        cfg.merge_from_dict(args.cfg_options)
    set_default_work_dir(cfg, args.config, args.work_dir)
    add_training_guards(cfg)
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
    error = check_training_config(cfg)
    if error:
        raise ValueError(error)
    # Atomic checkpoint writes also for configs from other toolboxes.
    checkpoint_hook = cfg.get('default_hooks', {}).get('checkpoint')
    if (
        checkpoint_hook is not None
        and checkpoint_hook.get('out_dir') is None
        and checkpoint_hook.get('backend_args') is None
    ):
        checkpoint_hook.backend_args = dict(backend='atomic_local')
    return cfg


def main() -> int:
    args = parse_args()
    if not osp.isfile(args.config):
        print(f'Config not found: {args.config}', file=sys.stderr)
        return 2
    cfg = load_config(args.config)
    if cfg is None:
        return 2
    try:
        cfg = merge_args(cfg, args)
    except (ValueError, KeyError) as error:
        print(f'Invalid options for {args.config}: {error}', file=sys.stderr)
        return 2

    loaders = ['train_dataloader'] + (
        [] if args.no_validate else ['val_dataloader']
    )
    missing = find_missing_inputs(cfg, loaders)
    if missing:
        print('\n'.join(missing), file=sys.stderr)
        return 1
    load_from = cfg.get('load_from')
    if load_from and '://' not in load_from:
        error = checkpoint_read_error(load_from)
        if error:
            print(error, file=sys.stderr)
            return 1

    error = prepare_launcher(cfg, args.launcher)
    if error:
        print(error, file=sys.stderr)
        return 2
    removed = remove_stale_temp_files(cfg.work_dir)
    if removed:
        print(
            f'Removed {len(removed)} temporary checkpoint file(s) left in '
            f'{cfg.work_dir} by an interrupted save.'
        )

    try:
        runner = build_runner(cfg, ('train_loop', 'val_loop'))
    except BUILD_ERRORS as error:
        report_build_error(args.config, error)
        return 1
    except FileNotFoundError as error:
        print(error, file=sys.stderr)
        return 1
    error = check_training_runner(runner)
    if error:
        print(error, file=sys.stderr)
        return 1
    # Errors from here on happen while training: they keep their traceback.
    try:
        runner.train()
    except (
        FileNotFoundError,
        CheckpointMismatchError,
        TrainingStopped,
    ) as error:
        print(error, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print('Interrupted; resume with --resume.', file=sys.stderr)
        return 130
    except RuntimeError as error:
        message = dist_failure_message(error, cfg)
        if message is None:
            raise
        print(message, file=sys.stderr)
        return 1
    close_dist()
    return 0


if __name__ == '__main__':
    sys.exit(main())
