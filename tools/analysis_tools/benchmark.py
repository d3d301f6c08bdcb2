"""Throughput and peak memory of a config's model, inference and training.

A classifier is measured whole, a detector's or segmentor's backbone alone;
a training step is forward, backward and AdamW. Peak memory is tensor
memory, on CPU as on CUDA. Examples: docs/benchmark.md.
"""

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

import torch
from mmpretrain.registry import MODELS
from rich.console import Console
from rich.table import Table

from t2t_plugin.analysis.speed import (
    DTYPES,
    StepRunner,
    peak_memory,
    time_steps,
)
from t2t_plugin.apis import ArgumentRefused, check_shape_budget, config_stride
from t2t_plugin.cli.options import (
    add_device_argument,
    add_max_tokens_argument,
    check_arguments,
)
from t2t_plugin.cli.reporting import one_line, progress
from t2t_plugin.engine import load_config
from t2t_preflight.arguments import add_cfg_options


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog='benchmark.py', description=__doc__.splitlines()[0]
    )
    parser.add_argument('config', help='model config file')
    add_device_argument(parser)
    add_max_tokens_argument(parser)
    parser.add_argument('--batch-size', type=int, default=8)
    parser.add_argument(
        '--img-size',
        type=int,
        help='input side (default: the size the backbone is built for)',
    )
    parser.add_argument(
        '--modes', nargs='+', choices=('infer', 'train'), default=['infer']
    )
    parser.add_argument(
        '--dtypes',
        nargs='+',
        choices=sorted(DTYPES),
        default=['fp32'],
        help='fp32, or bf16 / fp16 autocast',
    )
    parser.add_argument('--iters', type=int, default=10, help='timed steps')
    parser.add_argument(
        '--warmup',
        type=int,
        default=2,
        help='untimed steps first (at least 1, so that gradients and AdamW '
        'state exist as in training)',
    )
    parser.add_argument('--threads', type=int, help='torch CPU threads')
    parser.add_argument('--json', type=Path, help='also write the rows here')
    add_cfg_options(parser)
    args = parser.parse_args(argv)
    for name in ('batch_size', 'iters', 'img_size', 'threads'):
        value = getattr(args, name)
        if value is not None and value < 1:
            option = '--' + name.replace('_', '-')
            parser.error(f'{option} must be at least 1, got {value}')
    check_arguments(parser, args)
    return args


def measure(args: argparse.Namespace, console: Console) -> list[dict]:
    """One row per (mode, dtype): images/s and peak memory in MiB."""
    cfg = load_config(args.config, args.cfg_options)
    if args.img_size:  # before a model is built to run at that size
        check_shape_budget(
            (args.img_size, args.img_size),
            config_stride(cfg),
            args.max_tokens,
            f'--img-size {args.img_size}',
        )
    device = torch.device(args.device)
    model = MODELS.build(cfg.model)
    if not isinstance(model, MODELS.get('ImageClassifier')):
        model = getattr(model, 'backbone', model)
    model.to(device)
    t2t = getattr(getattr(model, 'backbone', model), 'tokens_to_token', None)
    side = args.img_size or (
        t2t.init_out_size[0] * t2t.total_stride if t2t else 224
    )
    in_channels = cfg.model.get('backbone', {}).get('in_channels', 3)
    images = torch.randn(args.batch_size, in_channels, side, side).to(device)
    rows = []
    steps = [(mode, dtype) for mode in args.modes for dtype in args.dtypes]
    for mode, dtype in progress(steps, 'Measuring', console, always=True):
        step = StepRunner(model, images, mode == 'train', dtype)
        for _ in range(max(args.warmup, 1)):
            step()
        seconds = time_steps(step, args.iters)
        rows.append(
            dict(
                mode=mode,
                dtype=dtype,
                batch_size=args.batch_size,
                img_size=side,
                device=device.type,
                threads=torch.get_num_threads(),
                images_per_s=args.batch_size * args.iters / seconds,
                peak_memory_mib=peak_memory(step) / 2**20,
            )
        )
    return rows


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    console = Console(soft_wrap=True)
    try:
        rows = measure(args, console)
    except ArgumentRefused as error:
        print(f'benchmark.py: error: {error}', file=sys.stderr)
        return 2
    except (ValueError, RuntimeError) as error:  # ConfigError included
        print(f'benchmark.py: error: {one_line(error)}', file=sys.stderr)
        return 1
    table = Table(title=f'{args.config}, {rows[0]["threads"]} threads')
    for column in ('mode', 'dtype', 'batch', 'input', 'images/s', 'peak MiB'):
        table.add_column(column, justify='right')
    for row in rows:
        table.add_row(
            row['mode'],
            row['dtype'],
            str(row['batch_size']),
            f'{row["img_size"]}x{row["img_size"]}',
            f'{row["images_per_s"]:.1f}',
            f'{row["peak_memory_mib"]:.0f}',
        )
    console.print(table)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=2))
        print(f'Rows saved to {args.json}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
