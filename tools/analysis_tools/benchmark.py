"""Throughput and peak memory of a config's model, inference and training.

A classifier is measured whole, through its data preprocessor, a training
step being its loss, backward and AdamW; a detector's or segmentor's
backbone alone. Peak memory is tensor memory, on CPU as on CUDA.
``--compare`` measures other configs beside the first, in alternating
rounds of the same run, with the first's images/s over theirs;
``--profile`` lists the operators a training step spends its time in.
Examples: docs/benchmark.md.
"""

import argparse
import json
import os
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from mmengine.config import Config

# The options and the configs are read and checked before the model
# imports (seconds), as in tools/train.py.
from t2t_preflight.arguments import (
    add_cfg_options,
    add_device_argument,
    add_max_tokens_argument,
    positive_int,
    read_model_config,
)
from t2t_preflight.errors import ArgumentRefused, RunCheckError

if TYPE_CHECKING:
    import torch
    from rich.console import Console

# The keys of t2t_plugin.analysis.speed.DTYPES, named before its import.
DTYPE_NAMES = ('bf16', 'fp16', 'fp32')


def thread_count(value: str) -> int:
    """``--threads`` values: a positive count, or ``all`` (every core)."""
    if value == 'all':
        return os.cpu_count() or 1
    try:
        count = int(value)
    except ValueError:
        count = 0
    if count < 1:
        raise argparse.ArgumentTypeError(
            f"a thread count is a positive number or 'all', got {value!r}"
        )
    return count


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog='benchmark.py', description=__doc__.splitlines()[0]
    )
    parser.add_argument('config', help='model config file')
    parser.add_argument(
        '--compare',
        nargs='+',
        default=[],
        metavar='CONFIG',
        help='configs measured beside the first, in alternating rounds '
        '(--cfg-options apply to the first only)',
    )
    add_device_argument(parser)
    add_max_tokens_argument(parser)
    parser.add_argument('--batch-size', type=positive_int, default=8)
    parser.add_argument(
        '--img-size',
        type=positive_int,
        help='input side (default: the size the backbone is built for)',
    )
    parser.add_argument(
        '--modes', nargs='+', choices=('infer', 'train'), default=['infer']
    )
    parser.add_argument(
        '--dtypes',
        nargs='+',
        choices=DTYPE_NAMES,
        default=['fp32'],
        help='fp32, or bf16 / fp16 autocast',
    )
    parser.add_argument(
        '--iters', type=positive_int, default=10, help='timed steps per round'
    )
    parser.add_argument(
        '--rounds',
        type=positive_int,
        default=1,
        help='timed rounds, the configs in turn in each; images/s is the '
        'median round',
    )
    parser.add_argument(
        '--warmup',
        type=int,
        default=2,
        help='untimed steps first (at least 1, so that gradients and AdamW '
        'state exist as in training)',
    )
    parser.add_argument(
        '--threads',
        type=thread_count,
        nargs='+',
        help="torch CPU threads, one measurement each ('all': every core)",
    )
    parser.add_argument(
        '--profile',
        type=positive_int,
        metavar='TOP',
        help='list the TOP operators of each training step (torch.profiler)',
    )
    parser.add_argument('--json', type=Path, help='also write the rows here')
    add_cfg_options(parser)
    args = parser.parse_args(argv)
    if args.profile and 'train' not in args.modes:
        parser.error('--profile lists a training step: add train to --modes')
    return args


def build_step_inputs(
    cfg: Config, args: argparse.Namespace
) -> tuple['torch.nn.Module', 'torch.Tensor', Optional[list]]:
    """The model of ``cfg`` (read by
    :func:`~t2t_preflight.arguments.read_model_config`) on ``--device``,
    its input batch, and for a classifier the labelled data samples its
    loss reads (its images are then raw pixels, 0 to 255, for its data
    preprocessor)."""
    import torch
    from mmpretrain.registry import MODELS
    from mmpretrain.structures import DataSample

    from t2t_plugin.apis import check_shape_budget, config_stride
    from t2t_plugin.cli.options import check_model_keys

    check_model_keys(cfg)
    if args.img_size:  # before a model is built to run at that size
        check_shape_budget(
            (args.img_size, args.img_size),
            config_stride(cfg),
            args.max_tokens,
            f'--img-size {args.img_size}',
        )
    if 'data_preprocessor' in cfg:  # as mmengine's Runner hands it over
        cfg.model.setdefault('data_preprocessor', cfg.data_preprocessor)
    device = torch.device(args.device)
    model = MODELS.build(cfg.model)
    classifier = isinstance(model, MODELS.get('ImageClassifier'))
    if not classifier:
        model = getattr(model, 'backbone', model)
    model.to(device)
    t2t = getattr(getattr(model, 'backbone', model), 'tokens_to_token', None)
    # a config without T2T-ViT (a reference model) may state img_size
    side = args.img_size or (
        t2t.init_out_size[0] * t2t.total_stride
        if t2t
        else cfg.get('img_size', 224)
    )
    in_channels = cfg.model.get('backbone', {}).get('in_channels', 3)
    shape = (args.batch_size, in_channels, side, side)
    if not classifier:
        return model, torch.randn(shape).to(device), None
    images = torch.randint(0, 256, shape, dtype=torch.uint8).to(device)
    num_classes = cfg.model.head.get('num_classes', 2)
    samples = [
        DataSample().set_gt_label(index % num_classes)
        for index in range(args.batch_size)
    ]
    return model, images, samples


def config_name(config: str) -> str:
    return Path(config).stem


def median_ratio(first: list[float], other: list[float]) -> float:
    """The first config's images/s over another's, the median of the
    rounds' ratios (seconds per round of the other over the first's)."""
    return statistics.median(o / f for f, o in zip(first, other))


def read_configs(args: argparse.Namespace) -> dict[str, Config]:
    """The config of each name measured (the first's with
    ``--cfg-options``), read and checked before the model imports."""
    configs: dict[str, Config] = {}
    for index, config in enumerate([args.config, *args.compare]):
        name = config_name(config)
        if name in configs:
            raise ArgumentRefused(
                f'{config} is measured twice (as {name}); compare '
                'different configs'
            )
        options = args.cfg_options if index == 0 else None
        configs[name] = read_model_config(config, options)
    return configs


def measure(
    args: argparse.Namespace, configs: dict[str, Config], console: 'Console'
) -> list[dict]:
    """One row per (threads, mode, dtype, config of ``configs``, by name):
    images/s (median and best round), the first config's images/s over
    it, params, MACs per image, peak memory in MiB, and for ``--profile``
    the training step's top operators."""
    import torch

    from t2t_plugin.analysis import count_complexity
    from t2t_plugin.analysis.speed import (
        StepRunner,
        alternating_rounds,
        peak_memory,
        top_operators,
    )
    from t2t_plugin.cli.reporting import progress

    built = {
        name: build_step_inputs(cfg, args) for name, cfg in configs.items()
    }
    counts = {
        name: count_complexity(
            model, tuple(images.shape[-2:]), images.shape[1]
        )
        for name, (model, images, _) in built.items()
    }
    rows = []
    threads = args.threads or [torch.get_num_threads()]
    cases = [
        (count, mode, dtype)
        for count in threads
        for mode in args.modes
        for dtype in args.dtypes
    ]
    for count, mode, dtype in progress(cases, 'Measuring', console, True):
        torch.set_num_threads(count)
        steps = {
            name: StepRunner(model, images, mode == 'train', dtype, samples)
            for name, (model, images, samples) in built.items()
        }
        for step in steps.values():
            for _ in range(max(args.warmup, 1)):
                step()
        seconds = alternating_rounds(steps, args.rounds, args.iters)
        first = seconds[config_name(args.config)]
        for name, step in steps.items():
            images = step.images
            row = dict(
                config=name,
                mode=mode,
                dtype=dtype,
                batch_size=images.shape[0],
                img_size=images.shape[-1],
                device=images.device.type,
                threads=count,
                images_per_s=images.shape[0]
                * args.iters
                / statistics.median(seconds[name]),
                best_images_per_s=images.shape[0]
                * args.iters
                / min(seconds[name]),
                first_over_this=None
                if seconds[name] is first
                else median_ratio(first, seconds[name]),
                params=counts[name].params,
                macs=counts[name].macs,
                peak_memory_mib=peak_memory(step) / 2**20,
            )
            profiled = (count, dtype) == (threads[0], args.dtypes[0])
            if args.profile and mode == 'train' and profiled:
                row['top_operators'] = [
                    vars(op)
                    for op in top_operators(step, args.iters, args.profile)
                ]
            rows.append(row)
    return rows


def count_text(value: float) -> str:
    return f'{value / 1e9:.2f} G' if value >= 1e9 else f'{value / 1e6:.1f} M'


def print_tables(
    args: argparse.Namespace, rows: list[dict], console: 'Console'
) -> None:
    from rich.table import Table

    first = config_name(args.config)
    table = Table(
        title=f'batch {rows[0]["batch_size"]}, '
        f'{rows[0]["img_size"]}x{rows[0]["img_size"]}, '
        f'{rows[0]["device"]}, {args.rounds} rounds of {args.iters} steps'
    )
    columns = ['config', 'mode', 'dtype', 'threads', 'images/s', 'best']
    if args.compare:
        columns.append('first x')
    columns += ['params', 'MACs', 'peak MiB']
    for column in columns:
        table.add_column(
            column, justify='left' if column == 'config' else 'right'
        )
    for row in rows:
        ratio = row['first_over_this']
        cells = [
            row['config'],
            row['mode'],
            row['dtype'],
            str(row['threads']),
            f'{row["images_per_s"]:.1f}',
            f'{row["best_images_per_s"]:.1f}',
        ]
        if args.compare:
            cells.append('' if ratio is None else f'{ratio:.2f}x')
        cells += [
            count_text(row['params']),
            count_text(row['macs']),
            f'{row["peak_memory_mib"]:.0f}',
        ]
        table.add_row(*cells)
    if args.compare:
        table.caption = f"first x: the images/s of {first} over the row's"
    console.print(table)
    for row in rows:
        if 'top_operators' not in row:
            continue
        ops = Table(
            title=f'{row["config"]}: training step, {row["threads"]} '
            f'threads, the {len(row["top_operators"])} operators with '
            'the most own time'
        )
        for column in ('operator', 'ms per step', 'share', 'calls per step'):
            ops.add_column(
                column, justify='left' if column == 'operator' else 'right'
            )
        for op in row['top_operators']:
            ops.add_row(
                op['name'][:60],
                f'{op["self_ms"]:.2f}',
                f'{100 * op["share"]:.1f}%',
                f'{op["calls"]:g}',
            )
        console.print(ops)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    try:
        configs = read_configs(args)
    except RunCheckError as error:
        print(f'benchmark.py: error: {error}', file=sys.stderr)
        return error.exit_code
    from rich.console import Console

    from t2t_plugin.cli.options import check_arguments
    from t2t_plugin.cli.reporting import one_line

    code = check_arguments('benchmark.py', args)
    if code:
        return code
    console = Console(soft_wrap=True)
    if not console.is_terminal:  # a log keeps the tables' columns whole
        console.width = 160
    try:
        rows = measure(args, configs, console)
    except (ValueError, RuntimeError) as error:  # RunCheckError included
        print(f'benchmark.py: error: {one_line(error)}', file=sys.stderr)
        return getattr(error, 'exit_code', 1)
    print_tables(args, rows, console)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=2))
        print(f'Rows saved to {args.json}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
