"""Throughput and peak memory of T2T-ViT beside other implementations.

Every configuration (arch, batch size, dtype, inference or training step) is
measured for this plugin and for the references in the same run, in
alternating rounds (ours, reference, ours, reference, ...), so that a
machine whose load changes during the run slows all of them alike. All
implementations hold the same weights. The table gives images/s, how many
times faster and leaner this plugin is, peak tensor memory, and the
arithmetic throughput (GFLOP/s from the counted MACs) next to a plain matrix
product's (the ceiling of the machine), and how much faster than eager a
runtime computing in the same precision could at most be.

Examples::

    python .dev_scripts/compare_implementations.py --archs t-14 --threads 1
    python .dev_scripts/compare_implementations.py --archs t-14 14 \\
        --batch-sizes 1 4 16 --official-repo ~/src/T2T-ViT \\
        --plot work_dirs/benchmark.png --json work_dirs/benchmark.json
    python .dev_scripts/compare_implementations.py --device cuda \\
        --dtypes bf16 fp16 --batch-sizes 64 --modes train
    python .dev_scripts/compare_implementations.py --archs t-14 --threads 1 \\
        --modes infer --references --runtimes onnxruntime onnxruntime-int8 \\
        openvino openvino-bf16

Deployed copies (``--runtimes``: onnxruntime, OpenVINO, fp32 and their
int8 / bf16 variants) run the ONNX file of ``tools/deployment`` with the same
weights and inputs, in the same alternating rounds as the eager fp32
inference; their rows add the largest output difference to eager fp32 and
the top-1 agreement with it on digits (see ``benchmark_lib/runtimes.py``).
"""

import argparse
import csv
import json
import os
import platform
import statistics
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional, Union

import torch
from benchmark_lib import (
    DTYPES,
    StepRunner,
    build_mmpretrain_reference,
    build_official_reference,
    matmul_gflops,
    peak_memory,
    time_steps,
)
from benchmark_lib.runtimes import (
    DEPLOYED,
    RuntimeRunner,
    export_backbone,
    open_sessions,
    output_difference,
    top1_agreement,
)
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from torch import nn

import t2t_plugin  # noqa: F401
from t2t_plugin.analysis import count_complexity
from t2t_plugin.deployment import RuntimeSession
from t2t_plugin.models.backbones import T2TViT

OURS = 't2t-plugin'
OURS_CP = 't2t-plugin with_cp'
OURS_COMPILED = 't2t-plugin compiled'
# a product this large reaches the peak of the CPU libraries measured here
# (torch, onnxruntime and OpenVINO alike); 1024 stays below it
CEILING_SIZE = 2048
MODES = ('infer', 'train')
# a training step does the forward pass and, for the gradients of inputs
# and weights, about twice its arithmetic again
STEP_MACS_FACTOR = {'infer': 1, 'train': 3}


@dataclass
class Record:
    """One measured configuration of one implementation."""

    arch: str
    implementation: str
    mode: str
    dtype: str
    batch_size: int
    img_size: int
    device: str
    threads: int
    images_per_s: float
    round_images_per_s: list[float] = field(default_factory=list)
    speedup_of_ours: Optional[float] = None
    peak_memory_mib: Optional[float] = None
    memory_ratio_of_ours: Optional[float] = None
    gmacs_per_image: float = 0.0
    gflops: float = 0.0
    max_abs_diff: Optional[float] = None
    top1_agreement: Optional[float] = None


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description='Images/s and peak memory of T2T-ViT (inference and '
        "training step) beside mmpretrain's T2T_ViT and the official code, "
        'measured alternately in one run.'
    )
    parser.add_argument(
        '--archs',
        nargs='+',
        default=['t-14'],
        help="arch names ('t-14', '14', ...) or JSON dicts such as "
        '\'{"token_layer": "transformer", "embed_dims": 64, "num_layers": 2,'
        ' "num_heads": 2}\'',
    )
    parser.add_argument('--batch-sizes', nargs='+', type=int, default=[4])
    parser.add_argument('--img-size', type=int, default=224)
    parser.add_argument(
        '--dtypes',
        nargs='+',
        choices=sorted(DTYPES),
        default=['fp32'],
        help='fp32, or bf16 / fp16 autocast',
    )
    parser.add_argument(
        '--modes', nargs='+', choices=MODES, default=list(MODES)
    )
    parser.add_argument('--device', default='cpu', help='cpu or cuda[:N]')
    parser.add_argument(
        '--threads',
        type=int,
        help="torch's intra-op threads (default: torch's own choice)",
    )
    parser.add_argument(
        '--references',
        nargs='*',
        choices=('mmpretrain', 'official'),
        help='implementations to compare with (default: mmpretrain, and '
        'official when --official-repo is given)',
    )
    parser.add_argument(
        '--official-repo',
        type=Path,
        help='a local checkout of github.com/yitu-opensource/T2T-ViT '
        '(needs timm)',
    )
    parser.add_argument(
        '--with-cp',
        action='store_true',
        help='also train this plugin with activation checkpointing',
    )
    parser.add_argument(
        '--compile',
        action='store_true',
        help='also run this plugin under torch.compile',
    )
    parser.add_argument(
        '--runtimes',
        nargs='*',
        choices=sorted(DEPLOYED),
        default=[],
        help='deployed copies to time beside eager fp32 inference (CPU)',
    )
    parser.add_argument(
        '--agreement-images',
        type=int,
        default=200,
        help='digits for the top-1 agreement of the deployed copies '
        '(half fit the probe, half are compared); 0 skips it',
    )
    parser.add_argument(
        '--warmup', type=int, default=1, help='untimed steps per round'
    )
    parser.add_argument(
        '--iters', type=int, default=3, help='timed steps per round'
    )
    parser.add_argument(
        '--rounds',
        type=int,
        default=3,
        help='alternations of all implementations; the median counts',
    )
    parser.add_argument(
        '--no-memory',
        action='store_true',
        help='skip the peak-memory measurement',
    )
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--json', type=Path, help='write the records here')
    parser.add_argument('--csv', type=Path, help='write the records here')
    parser.add_argument(
        '--markdown',
        type=Path,
        help='append the command, machine and table to this results page '
        '(e.g. docs/benchmark_results.md)',
    )
    parser.add_argument(
        '--plot', type=Path, help='PNG of images/s against batch size'
    )
    args = parser.parse_args(argv)
    for name in ('warmup', 'iters', 'rounds', 'img_size'):
        minimum = 0 if name == 'warmup' else 1
        if getattr(args, name) < minimum:
            parser.error(
                f'--{name.replace("_", "-")} must be at least {minimum}.'
            )
    if min(args.batch_sizes) < 1:
        parser.error('--batch-sizes must be positive.')
    if args.runtimes and not args.device.startswith('cpu'):
        parser.error('--runtimes run on the CPU; use --device cpu.')
    if args.runtimes and not ('infer' in args.modes and 'fp32' in args.dtypes):
        parser.error(
            '--runtimes are timed beside eager fp32 inference; '
            'keep infer in --modes and fp32 in --dtypes.'
        )
    if args.agreement_images and args.agreement_images < 4:
        parser.error('--agreement-images must be 0 or at least 4.')
    if args.references is None:
        args.references = ['mmpretrain']
        if args.official_repo is not None:
            args.references.append('official')
    if 'official' in args.references:
        if args.official_repo is None:
            parser.error('--references official needs --official-repo PATH.')
        if not (args.official_repo / 'models' / 't2t_vit.py').is_file():
            parser.error(
                f'--official-repo {args.official_repo} is not a '
                'checkout of yitu-opensource/T2T-ViT (no '
                'models/t2t_vit.py in it).'
            )
    return args


def parse_arch(text: str) -> tuple[str, Union[str, dict]]:
    """A display name and the ``arch`` argument for ``T2TViT``."""
    if not text.lstrip().startswith('{'):
        return text, text
    try:
        arch = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(
            f'--archs entry {text!r} is neither an arch name '
            f'nor valid JSON ({error}).'
        ) from None
    if not isinstance(arch, dict):
        raise ValueError(f'--archs entry {text!r} must be a JSON object.')
    kind = arch.get('token_layer', 'performer')
    name = f'custom-{kind}-{arch.get("embed_dims")}x{arch.get("num_layers")}'
    return name, arch


def build_implementations(
    arch: Union[str, dict],
    args: argparse.Namespace,
    device: torch.device,
    console: Console,
) -> dict[str, nn.Module]:
    """This plugin's backbone and the requested references, same weights."""
    torch.manual_seed(args.seed)
    ours = T2TViT(arch, img_size=args.img_size)
    ours.init_weights()
    implementations = {OURS: ours}
    if args.with_cp and 'train' in args.modes:
        with_cp = T2TViT(arch, img_size=args.img_size, with_cp=True)
        with_cp.load_state_dict(ours.state_dict())
        implementations[OURS_CP] = with_cp
    if args.compile:
        compiled = T2TViT(arch, img_size=args.img_size)
        compiled.load_state_dict(ours.state_dict())
        implementations[OURS_COMPILED] = torch.compile(compiled)
    for name in args.references:
        try:
            if name == 'mmpretrain':
                reference = build_mmpretrain_reference(ours)
            else:
                reference = build_official_reference(ours, args.official_repo)
        except ValueError as error:
            console.print(f'[yellow]{name} skipped for arch {arch}: {error}')
            continue
        implementations[name] = reference
    return {name: model.to(device) for name, model in implementations.items()}


def measure_config(
    implementations: dict[str, nn.Module],
    images: torch.Tensor,
    mode: str,
    dtype: str,
    args: argparse.Namespace,
    progress: Progress,
    task,
    sessions: dict[str, RuntimeSession],
) -> dict[str, tuple[list[float], Optional[int]]]:
    """Images/s per round and peak memory of every implementation.

    The deployed copies join eager fp32 inference; their memory (held by
    the runtimes, not by torch) is not measured.
    """
    runners = {
        name: StepRunner(model, images, mode == 'train', dtype)
        for name, model in implementations.items()
        if not (name == OURS_CP and mode != 'train')
    }
    if mode == 'infer' and dtype == 'fp32':
        runners.update(
            {
                name: RuntimeRunner(session, images)
                for name, session in sessions.items()
            }
        )
    speeds: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(args.rounds):
        for name, runner in runners.items():
            for _ in range(args.warmup):
                runner()
            seconds = time_steps(runner, args.iters)
            speeds[name].append(args.iters * images.shape[0] / seconds)
            progress.advance(task)
    memory = {}
    for name, runner in runners.items():
        if args.no_memory or name in sessions:
            memory[name] = None
            continue
        memory[name] = peak_memory(runner)
        progress.advance(task)
    return {name: (speeds[name], memory[name]) for name in runners}


def make_records(
    arch_name: str,
    macs: int,
    mode: str,
    dtype: str,
    batch_size: int,
    args: argparse.Namespace,
    measured: dict[str, tuple[list[float], Optional[int]]],
    device: torch.device,
) -> list[Record]:
    records = []
    ours_speed = statistics.median(measured[OURS][0])
    ours_memory = measured[OURS][1]
    for name, (speeds, memory) in measured.items():
        speed = statistics.median(speeds)
        record = Record(
            arch=arch_name,
            implementation=name,
            mode=mode,
            dtype=dtype,
            batch_size=batch_size,
            img_size=args.img_size,
            device=str(device),
            threads=torch.get_num_threads(),
            images_per_s=speed,
            round_images_per_s=speeds,
            gmacs_per_image=macs / 1e9,
            gflops=2 * macs * STEP_MACS_FACTOR[mode] * speed / 1e9,
        )
        if name != OURS:
            record.speedup_of_ours = ours_speed / speed
        if memory is not None:
            record.peak_memory_mib = memory / 2**20
            if name != OURS:
                record.memory_ratio_of_ours = ours_memory / memory
        records.append(record)
    return records


def deploy(
    model: nn.Module, args: argparse.Namespace, console: Console
) -> tuple[dict[str, RuntimeSession], dict[str, float]]:
    """The deployed copies of ``model`` and their top-1 agreement."""
    if not args.runtimes:
        return {}, {}
    with (
        console.status('Exporting to ONNX'),
        tempfile.TemporaryDirectory() as folder,
    ):
        files = export_backbone(model, Path(folder), tuple(args.runtimes))
        sessions = open_sessions(files, args.threads)
    agreement: dict[str, float] = {}
    if args.agreement_images:
        with console.status(
            f'Top-1 agreement on {args.agreement_images} digits'
        ):
            agreement, accuracy = top1_agreement(
                model, sessions, args.agreement_images, max(args.batch_sizes)
            )
        console.print(
            f'Digits probe on eager fp32 features: top-1 '
            f'{accuracy:.3f} on {args.agreement_images // 2} '
            'held-out images.'
        )
    return sessions, agreement


def describe_deployed(
    records: list[Record],
    model: nn.Module,
    sessions: dict[str, RuntimeSession],
    agreement: dict[str, float],
    images: torch.Tensor,
) -> None:
    """Precision, output difference and agreement of the deployed rows."""
    for record in records:
        if record.implementation in sessions:
            session = sessions[record.implementation]
            record.dtype = session.precision
            record.max_abs_diff = output_difference(model, session, images)
            record.top1_agreement = agreement.get(record.implementation)


def _fmt(value: Optional[float], spec: str, suffix: str = '') -> str:
    return '-' if value is None else format(value, spec) + suffix


def table_cells(
    records: list[Record],
) -> tuple[list[str], list[list[str]]]:
    """Column names and formatted rows of the results table."""
    deployed = any(record.implementation in DEPLOYED for record in records)
    columns = [
        'arch',
        'mode',
        'dtype',
        'batch',
        'implementation',
        'img/s',
        'ours x',
        'peak MiB',
        'ours mem',
        'GFLOP/s',
    ]
    if deployed:
        columns += ['max diff', 'top-1 agree']
    rows = []
    # the ratios are ours over this row's: speed-up and memory fraction
    for record in records:
        cells = [
            record.arch,
            record.mode,
            record.dtype,
            str(record.batch_size),
            record.implementation,
            f'{record.images_per_s:.2f}',
            _fmt(record.speedup_of_ours, '.2f', 'x'),
            _fmt(record.peak_memory_mib, '.0f'),
            _fmt(record.memory_ratio_of_ours, '.2f'),
            f'{record.gflops:.1f}',
        ]
        if deployed:
            cells += [
                _fmt(record.max_abs_diff, '.1e'),
                _fmt(record.top1_agreement, '.3f'),
            ]
        rows.append(cells)
    return columns, rows


def measure_ceilings(
    device: torch.device, dtypes: list[str]
) -> dict[str, float]:
    return {
        dtype: matmul_gflops(device, DTYPES[dtype], size=CEILING_SIZE)
        for dtype in dtypes
    }


def ceiling_bounds(
    records: list[Record], ceilings: dict[str, float]
) -> list[str]:
    """What the matmul ceiling leaves to gain over eager inference.

    A runtime that keeps a precision does the same arithmetic as eager
    PyTorch in it; it cannot run faster than every matrix product at the
    ceiling, so ``ceiling / eager GFLOP/s`` bounds its speed-up. One line
    per measured eager inference whose dtype has a ceiling.
    """
    lines = []
    for record in records:
        ceiling = ceilings.get(record.dtype)
        eager_inference = record.implementation == OURS and (
            record.mode == 'infer'
        )
        if not (eager_inference and ceiling and record.gflops):
            continue
        lines.append(
            f'{record.arch} {record.dtype} inference, batch '
            f'{record.batch_size}: eager runs at '
            f'{100 * record.gflops / ceiling:.0f}% of the {record.dtype} '
            f'matmul ceiling, so a runtime computing in {record.dtype} is '
            f'at most {ceiling / record.gflops:.2f}x faster.'
        )
    return lines


def render_table(records: list[Record], title: str) -> Table:
    table = Table(title=title)
    columns, rows = table_cells(records)
    for column in columns:
        justify = (
            'left'
            if column in ('arch', 'mode', 'dtype', 'implementation')
            else 'right'
        )
        table.add_column(column, justify=justify)
    for cells in rows:
        table.add_row(*cells)
    return table


def append_markdown(
    records: list[Record], path: Path, title: str, footer: str
) -> None:
    """Add this run to a results page: the command that made it, the
    machine, the table and the matmul ceiling, as Markdown."""
    columns, rows = table_cells(records)
    command = ' '.join(
        ['python .dev_scripts/compare_implementations.py'] + sys.argv[1:]
    )
    lines = [
        f'## {title}',
        '',
        '```bash',
        command,
        '```',
        '',
        '| ' + ' | '.join(columns) + ' |',
        '|' + '---|' * len(columns),
        *('| ' + ' | '.join(cells) + ' |' for cells in rows),
        '',
        footer,
        '',
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    start = (
        ''
        if path.is_file() and path.stat().st_size
        else (
            '# Benchmark results\n\nWritten by '
            '`.dev_scripts/compare_implementations.py --markdown`, one '
            'section per run.\n\n'
        )
    )
    with open(path, 'a', encoding='utf-8') as file:
        file.write(start + '\n'.join(lines) + '\n')


def write_csv(records: list[Record], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [asdict(record) for record in records]
    for row in rows:
        row['round_images_per_s'] = ' '.join(
            f'{value:.3f}' for value in row['round_images_per_s']
        )
    with open(path, 'w', newline='') as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def write_plot(records: list[Record], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    modes = [mode for mode in MODES if any(r.mode == mode for r in records)]
    figure, axes = plt.subplots(
        1, len(modes), figsize=(6 * len(modes), 4.5), squeeze=False
    )
    for axis, mode in zip(axes[0], modes):
        lines: dict[tuple[str, str, str], list[Record]] = {}
        for record in records:
            if record.mode == mode:
                key = (record.arch, record.dtype, record.implementation)
                lines.setdefault(key, []).append(record)
        for (arch, dtype, name), points in lines.items():
            points.sort(key=lambda r: r.batch_size)
            axis.plot(
                [r.batch_size for r in points],
                [r.images_per_s for r in points],
                marker='o',
                linestyle='-' if name.startswith(OURS) else '--',
                label=f'{name} {arch} {dtype}',
            )
        axis.set_xscale('log', base=2)
        sizes = sorted({r.batch_size for r in records})
        axis.set_xticks(sizes, [str(size) for size in sizes])
        axis.minorticks_off()
        axis.set_xlabel('batch size')
        axis.set_ylabel('images/s')
        axis.set_title('training step' if mode == 'train' else 'inference')
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize='small')
    figure.suptitle(title)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)


def describe_machine(device: torch.device) -> str:
    if device.type == 'cuda':
        return torch.cuda.get_device_name(device)
    name = platform.processor() or platform.machine()
    if Path('/proc/cpuinfo').is_file():
        for line in Path('/proc/cpuinfo').read_text().splitlines():
            if line.startswith('model name'):
                name = line.split(':', 1)[1].strip()
                break
    return f'{name}, {os.cpu_count()} logical cores'


def _load_average() -> str:
    if not hasattr(os, 'getloadavg'):
        return 'n/a'
    return ' '.join(f'{value:.2f}' for value in os.getloadavg())


def run(args: argparse.Namespace) -> int:
    device = torch.device(args.device)
    if device.type == 'cuda' and not torch.cuda.is_available():
        raise ValueError(
            '--device cuda, but torch sees no CUDA device here; '
            'use --device cpu.'
        )
    if device.type not in ('cpu', 'cuda'):
        raise ValueError(
            f'--device {args.device}: only cpu and cuda are supported.'
        )
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    # subnormal floats slow some CPUs down by orders of magnitude; flushing
    # them keeps the comparison about the implementations, not their weights
    torch.set_flush_denormal(True)
    console = Console(stderr=True)
    archs = [parse_arch(text) for text in args.archs]
    load_before = _load_average()
    ceilings = measure_ceilings(device, args.dtypes)

    records: list[Record] = []
    configs = len(args.batch_sizes) * len(args.dtypes) * len(args.modes)
    with Progress(
        TextColumn('{task.description}'),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    ) as progress:
        for arch_name, arch in archs:
            implementations = build_implementations(
                arch, args, device, console
            )
            macs = count_complexity(
                implementations[OURS], (args.img_size, args.img_size)
            ).macs
            sessions, agreement = deploy(implementations[OURS], args, console)
            per_config = len(implementations) * (
                args.rounds + (0 if args.no_memory else 1)
            )
            # the deployed copies join the fp32 inference of each batch size
            deployed_rounds = (
                len(args.batch_sizes) * len(sessions) * (args.rounds)
            )
            task = progress.add_task(
                arch_name, total=configs * per_config + deployed_rounds
            )
            for batch_size in args.batch_sizes:
                torch.manual_seed(args.seed)
                images = torch.randn(
                    batch_size, 3, args.img_size, args.img_size, device=device
                )
                for dtype in args.dtypes:
                    for mode in args.modes:
                        progress.update(
                            task,
                            description=f'{arch_name} {mode} {dtype} '
                            f'batch {batch_size}',
                        )
                        measured = measure_config(
                            implementations,
                            images,
                            mode,
                            dtype,
                            args,
                            progress,
                            task,
                            sessions,
                        )
                        new = make_records(
                            arch_name,
                            macs,
                            mode,
                            dtype,
                            batch_size,
                            args,
                            measured,
                            device,
                        )
                        describe_deployed(
                            new,
                            implementations[OURS],
                            sessions,
                            agreement,
                            images,
                        )
                        records += new
    load_after = _load_average()
    # the machine's load drifts during a run: the faster of the two
    # measurements is the nearer to what the hardware can do
    for dtype, value in measure_ceilings(device, args.dtypes).items():
        ceilings[dtype] = max(ceilings[dtype], value)

    machine = describe_machine(device)
    title = (
        f'{machine}, {torch.get_num_threads()} thread(s), '
        f'{args.img_size}px, torch {torch.__version__}'
    )
    # a table written to a file or pipe keeps its full width
    output = Console(width=None if sys.stdout.isatty() else 140)
    output.print(render_table(records, title))
    ceiling_text = ', '.join(
        f'{dtype} {value:.1f}' for dtype, value in ceilings.items()
    )
    footer = (
        f'matmul ceiling (GFLOP/s, {CEILING_SIZE}x{CEILING_SIZE}, before and '
        f'after the run, the faster): {ceiling_text}; load average '
        f'(1, 5, 15 min) before: {load_before}, after: {load_after}'
    )
    for line in ceiling_bounds(records, ceilings):
        footer += f'\n{line}'
    output.print(footer)
    if args.markdown:
        append_markdown(records, args.markdown, title, footer)
        console.print(f'Results appended to {args.markdown}')
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                dict(
                    machine=machine,
                    device=str(device),
                    threads=torch.get_num_threads(),
                    torch=torch.__version__,
                    matmul_gflops=ceilings,
                    load_average=dict(before=load_before, after=load_after),
                    command=' '.join(sys.argv),
                    records=[asdict(record) for record in records],
                ),
                indent=2,
            )
        )
    if args.csv:
        write_csv(records, args.csv)
    if args.plot:
        write_plot(records, args.plot, title)
        console.print(f'Throughput plot: {args.plot}')
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    args = parse_args(argv)
    try:
        return run(args)
    except (ValueError, ImportError, KeyError, OSError) as error:
        print(f'compare_implementations.py: error: {error}', file=sys.stderr)
        return 2
    except torch.OutOfMemoryError as error:
        first_line = str(error).splitlines()[0]
        print(
            f'compare_implementations.py: error: out of memory '
            f'({first_line}); use smaller --batch-sizes or --img-size.',
            file=sys.stderr,
        )
        return 2


if __name__ == '__main__':
    sys.exit(main())
