"""Evaluate a checkpoint on a config's test set with mmengine's Runner.

Prints the metrics; ``--out x.pkl`` saves the predictions as mmpretrain's
``tools/test.py`` does (mmengine's ``DumpResults``), ``--out-item metrics``
the metrics instead (mmengine's ``dump``: json, yaml, pickle).
"""

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import Any, Optional

from mmengine.config import Config

# Read, changed by the options and checked before ``import t2t_plugin``
# (seconds of model imports), as in tools/train.py.
from t2t_preflight import arguments, doc_pages
from t2t_preflight.outputs import output_problem


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('config', help='config file')
    parser.add_argument('checkpoint', help='checkpoint file or URL')
    parser.add_argument(
        '--work-dir', help='folder for the logs (default work_dirs/<config>)'
    )
    parser.add_argument(
        '--out',
        help='file to save the predictions to (.pkl or .pickle, as '
        'mmpretrain) or, with --out-item metrics, the metrics (any format '
        "of mmengine's dump: .json, .yaml, .yml, .pkl, .pickle)",
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
        ('--amp', 'mixed precision: fp16 on CUDA, bf16 on CPU'),
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
    if args.amp:  # as mmpretrain's: mmengine's TestLoop autocasts
        cfg.test_cfg = {**(cfg.get('test_cfg') or {}), 'fp16': True}
    if args.no_pin_memory:
        cfg.test_dataloader.pin_memory = False
    return cfg


def out_problem(args: argparse.Namespace) -> tuple[Optional[str], Any]:
    """Why ``--out`` / ``--out-item`` cannot be used, as mmengine judges
    them (``dump`` with the handlers the config's imports registered,
    ``DumpResults``), asked before the Runner is built: ``dump`` would
    fail only after the whole evaluation. Else None, and the
    ``DumpResults`` that saves the predictions (None: not asked for)."""
    if not args.out:
        return None, None
    if args.out_item == 'metrics':
        from mmengine.fileio.handlers import file_handlers

        # the format dump takes from a file name
        if args.out.split('.')[-1] not in file_handlers:
            return (
                "--out-item metrics saves with mmengine's dump, which "
                f'writes {", ".join(file_handlers)} files; got --out '
                f'{args.out}.'
            ), None
        return None, None
    from mmengine.evaluator import DumpResults

    # its notice that it has no metric prefix: about mmengine itself
    logging.disable(logging.WARNING)
    try:
        return None, DumpResults(out_file_path=args.out)
    except ValueError as error:
        return (
            f"--out {args.out}: {str(error).rstrip('.')} (mmengine's "
            'DumpResults takes .pkl or .pickle; --out-item metrics saves '
            'the metrics as .json or .yaml too).'
        ), None
    finally:
        logging.disable(logging.NOTSET)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    # a usage error (exit 2), before the config and the data are read
    if args.out_item and not args.out:
        print(
            f'Invalid options for {args.config}: --out-item needs --out FILE.',
            file=sys.stderr,
        )
        return 2
    if args.out_item == 'metrics':  # RunCheckHook checks DumpResults' file
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
    cfg, code = arguments.load_checked(args, merge_args, ['test_dataloader'])
    if cfg is None:
        return code
    problem, dumper = out_problem(args)
    if problem:
        print(f'Invalid options for {args.config}: {problem}', file=sys.stderr)
        return 2
    import numpy as np
    from mmengine.fileio import dump

    from t2t_plugin import cli
    from t2t_plugin.runtime import build_runner

    def build():
        runner = build_runner(cfg, 'test')
        # The loop builds the test dataset: config mistakes show up here.
        metrics = runner.test_loop.evaluator.metrics
        if dumper is not None:
            metrics.append(dumper)
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
