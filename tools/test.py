"""Evaluate a checkpoint on a config's test set with mmengine's Runner.

Works for this project's mmpretrain configs and for mmdet / mmseg configs
with the T2T-ViT backbone. Prints the metrics (top-1 / top-5 accuracy for
classification); ``--out x.pkl`` saves the predictions as mmpretrain's
``tools/test.py`` does (read by its ``analyze_results.py`` and
``confusion_matrix.py``), ``--out-item metrics`` the metrics instead. The
checkpoint may be a file or a URL, official releases included.
"""

import argparse
import os.path as osp
import sys
from collections.abc import Sequence
from typing import Optional

import numpy as np
from mmengine.config import Config
from mmengine.evaluator import DumpResults
from mmengine.fileio import dump
from mmengine.registry import RUNNERS
from mmengine.runner import Runner

from t2t_plugin import doc_pages
from t2t_plugin.cli import (
    add_launch_arguments,
    close_dist,
    enable_show,
    enable_tta,
    find_missing_inputs,
    load_config,
    merge_options,
    parse_launch_args,
    prepare_launcher,
    run_reported,
    set_default_work_dir,
)
from t2t_plugin.engine.hooks import output_problem

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
        '--show', action='store_true', help='show the predictions'
    )
    parser.add_argument(
        '--show-dir',
        help='save images with their predictions drawn to this folder '
        '(inside the work dir if relative); segmentation writes them to '
        f'its vis_data/vis_image/ sub-folder ({doc_pages.CUSTOM_DATA})',
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
    parser.add_argument(
        '--tta',
        action='store_true',
        help="test-time augmentation (the config's tta_model and "
        'tta_pipeline, else the average over horizontal flips)',
    )
    parser.add_argument(
        '--no-pin-memory',
        action='store_true',
        help='turn off pin_memory in the test dataloader',
    )
    add_launch_arguments(parser, 'test_dataloader.batch_size=32')
    return parse_launch_args(parser, argv)


def merge_args(cfg: Config, args: argparse.Namespace) -> Config:
    """Apply the command-line options to the config."""
    merge_options(cfg, args.cfg_options)
    set_default_work_dir(cfg, args.config, args.work_dir)
    cfg.load_from = args.checkpoint
    cfg.launcher = args.launcher
    if args.show or args.show_dir:
        enable_show(
            cfg, args.show_dir, args.show, args.interval, args.wait_time
        )
    if args.tta:
        enable_tta(cfg)
    if args.no_pin_memory:
        cfg.test_dataloader.pin_memory = False
    if args.out_item and not args.out:
        raise ValueError('--out-item needs --out FILE.')
    if (
        args.out
        and args.out_item != 'metrics'
        and not args.out.endswith('.pkl')
    ):
        raise ValueError(
            '--out saves the predictions as a .pkl file; got '
            f'--out {args.out} (use --out-item metrics for '
            '.json or .yaml).'
        )
    # Checked now: dump() would fail only after the whole evaluation.
    if (
        args.out
        and args.out_item == 'metrics'
        and not args.out.lower().endswith(METRICS_SUFFIXES)
    ):
        raise ValueError(
            f'--out saves the metrics as '
            f'{", ".join(METRICS_SUFFIXES)}; got --out '
            f'{args.out}.'
        )
    return cfg


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    for path, what in (
        (args.config, 'Config'),
        (args.checkpoint, 'Checkpoint'),
    ):
        if '://' not in path and not osp.isfile(path):
            print(f'{what} not found: {path}', file=sys.stderr)
            return 2
    cfg = load_config(args.config)
    if cfg is None:
        return 2
    try:
        cfg = merge_args(cfg, args)
    except (ValueError, KeyError) as error:
        print(f'Invalid options for {args.config}: {error}', file=sys.stderr)
        return 2
    # The checkpoint replaces any init_cfg weights: only data is needed.
    problems = find_missing_inputs(
        cfg, ['test_dataloader'], check_load_from=False, check_init_cfg=False
    )
    outputs = [(cfg.work_dir, '--work-dir')]
    if args.out:  # the metrics; a DumpResults metric checks itself
        outputs.append((args.out, '--out'))
    problems += filter(None, (output_problem(*pair) for pair in outputs))
    if problems:
        print(problems[0], file=sys.stderr)
        return 1
    error = prepare_launcher(cfg, args.launcher)
    if error:
        print(error, file=sys.stderr)
        return 2

    built = []

    def build() -> None:
        runner = (
            Runner.from_cfg(cfg)
            if 'runner_type' not in cfg
            else RUNNERS.build(cfg)
        )
        # The loop builds the test dataset: config mistakes show up here.
        metrics = runner.test_loop.evaluator.metrics
        if args.out and args.out_item != 'metrics':
            metrics.append(DumpResults(out_file_path=args.out))
        built.append(runner)

    code = run_reported(build, cfg, args.config, True)
    metrics = {}
    if code == 0:
        code = run_reported(
            lambda: metrics.update(built[0].test()), cfg, args.config
        )
    if code:
        return code
    if built[0].rank == 0 and args.out and args.out_item == 'metrics':
        dump(metrics, args.out)
    for name, value in metrics.items() if built[0].rank == 0 else ():
        # mmseg's metrics are numpy floats
        print(
            f'{name}: {value:.4f}'
            if isinstance(value, (float, np.floating))
            else f'{name}: {value}'
        )
    close_dist()
    return 0


if __name__ == '__main__':
    sys.exit(main())
