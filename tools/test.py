"""Evaluate a checkpoint on a config's test set with mmengine's Runner.

Prints the metrics; ``--out x.pkl`` saves the predictions as mmpretrain's
``tools/test.py`` does, ``--out-item metrics`` the metrics instead.
"""

import argparse
import sys
from collections.abc import Sequence
from typing import Optional

from mmengine.config import Config

# Read, changed by the options and checked before ``import t2t_plugin``
# (seconds of model imports), as in tools/train.py.
from t2t_preflight import arguments, doc_pages
from t2t_preflight.config import output_problem

# Formats mmengine's ``dump`` writes, by file suffix.
METRICS_SUFFIXES = ('.json', '.yaml', '.yml', '.pkl')


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('config', help='config file')
    parser.add_argument('checkpoint', help='checkpoint file or URL')
    parser.add_argument(
        '--work-dir', help='folder for the logs (default work_dirs/<config>)'
    )
    parser.add_argument(
        '--out',
        help='file to save the predictions to (.pkl, as mmpretrain) or, '
        'with --out-item metrics, the metrics (.json, .yaml or .pkl)',
    )
    parser.add_argument(
        '--out-item',
        choices=['metrics', 'pred'],
        help='what --out saves (default: pred)',
    )
    parser.add_argument(
        '--show-dir',
        help='save images with their predictions drawn to this folder '
        '(inside the work dir if relative); classification draws small '
        'images at least 224 px wide, as <class folder>_<image>_0.png; '
        'segmentation writes them to its vis_data/vis_image/ sub-folder '
        f'({doc_pages.CUSTOM_DATA})',
    )
    parser.add_argument(
        '--wait-time',
        type=float,
        default=2,
        help='with --show, seconds each image stays (default 2)',
    )
    parser.add_argument(
        '--interval',
        type=int,
        default=1,
        help='with --show or --show-dir, draw every INTERVAL-th test image '
        '(segmentation: every INTERVAL-th batch; detection: every image, '
        "mmdet's hook has no test interval)",
    )
    for flag, text in (
        ('--tta', "test-time augmentation: the config's or horizontal flips"),
        (
            '--verbose',
            'print the environment, the config and every log line here '
            '(by default the log file keeps them)',
        ),
        ('--show', 'show the predictions'),
        ('--no-pin-memory', 'turn off pin_memory in the test dataloader'),
    ):
        parser.add_argument(flag, action='store_true', help=text)
    return arguments.parse_launch_args(
        parser, 'test_dataloader.batch_size=32', argv
    )


def merge_args(cfg: Config, args: argparse.Namespace) -> Config:
    arguments.set_default_work_dir(cfg, args.config, args.work_dir)
    cfg.load_from = args.checkpoint
    cfg.launcher = args.launcher
    if args.show or args.show_dir:
        arguments.enable_show(
            cfg, args.show_dir, args.show, args.interval, args.wait_time
        )
    if args.tta:
        arguments.enable_tta(cfg)
    if args.no_pin_memory:
        cfg.test_dataloader.pin_memory = False
    return cfg


def out_problem(args: argparse.Namespace) -> Optional[str]:
    """Why ``--out`` / ``--out-item`` cannot be used, checked first:
    mmengine's ``dump`` would fail only after the whole evaluation."""
    if args.out_item and not args.out:
        return '--out-item needs --out FILE.'
    if args.out and args.out_item == 'metrics':
        if not args.out.lower().endswith(METRICS_SUFFIXES):
            return (
                f'--out saves the metrics as '
                f'{", ".join(METRICS_SUFFIXES)}; got --out {args.out}.'
            )
    elif args.out and not args.out.endswith('.pkl'):
        return (
            '--out saves the predictions as a .pkl file; got '
            f'--out {args.out} (use --out-item metrics for '
            '.json or .yaml).'
        )
    return None


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    # a usage error (exit 2), before the config and the data are read
    problem = out_problem(args)
    if problem:
        print(f'Invalid options for {args.config}: {problem}', file=sys.stderr)
        return 2
    if args.out_item == 'metrics':  # WorkDirHook checks DumpResults' file
        problem = output_problem(
            args.out,
            '--out',
            file=True,
            inputs={
                'the checkpoint': args.checkpoint,
                'the config': args.config,
            },
        )
        if problem:
            print(problem, file=sys.stderr)
            return 1
    cfg, answered, code = arguments.load_checked(
        args, merge_args, ['test_dataloader']
    )
    if cfg is None:
        return code
    import numpy as np
    from mmengine.evaluator import DumpResults
    from mmengine.fileio import dump

    from t2t_plugin import cli
    from t2t_plugin.engine import build_runner

    def build():
        runner = build_runner(cfg, answered, 'test')
        # The loop builds the test dataset: config mistakes show up here.
        metrics = runner.test_loop.evaluator.metrics
        if args.out and args.out_item != 'metrics':
            metrics.append(DumpResults(out_file_path=args.out))
        return runner

    with cli.progress_only(not args.verbose):
        code, runner = cli.run_reported(build, args.config, True)
        if code == 0:
            code, metrics = cli.run_reported(
                runner.test, args.config, checkpoint=args.checkpoint
            )
    if code:
        return code
    if runner.rank == 0 and args.out and args.out_item == 'metrics':
        dump(metrics, args.out)
    for name, value in metrics.items() if runner.rank == 0 else ():
        if isinstance(value, (float, np.floating)):  # mmseg's: numpy floats
            value = f'{value:.4f}'
        print(f'{name}: {value}')
    cli.close_dist()
    return 0


if __name__ == '__main__':
    sys.exit(main())
