"""GPU acceptance check: the project's GPU paths, run once, one table.

Runs, as a user would, on one CUDA device (about 5 minutes on a recent
GPU; each stage has its own time limit):

1. ``.dev_scripts/compare_implementations.py --device cuda``: t-14 and 14,
   batch 64, fp32 / bf16 / fp16, inference and training step, beside
   mmpretrain's ``T2T_ViT`` (and the official code with
   ``--official-repo``); its ``--with-cp`` rows give the peak memory with
   activation checkpointing.
2. ``torch.compile`` of the backbone against eager: outputs and speed.
3. ``train.py --amp`` (fp16 with loss scaling) for 100 iterations of 14
   and t-14 on synthetic ImageNet-shaped images: how many losses are
   finite.
4. ``dist_train.sh CONFIG 1`` (NCCL) on the digits demo config.

``--dry-run`` runs the same stages on the CPU with tiny models, images and
iteration counts (and a part of the digits), to check the script's own
wiring where there is no GPU.
Use it through ``.dev_scripts/gpu_check.sh`` or ``make gpu-check``.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

DEV_SCRIPTS = Path(__file__).resolve().parent
ROOT = DEV_SCRIPTS.parent
TOOLS = ROOT / 'tools'
DIGITS_CONFIG = ROOT / 'configs/t2t-vit-mini_1xb64_digits.py'
TIME_LIMIT_S = 8 * 60

# Dry run: two-layer models on 32x32 images.
TINY_ARCHS = {
    't-14': dict(
        token_layer='transformer',
        embed_dims=64,
        num_layers=2,
        num_heads=2,
        feedforward_channels=128,
    ),
    '14': dict(
        token_layer='performer',
        embed_dims=64,
        num_layers=2,
        num_heads=2,
        feedforward_channels=128,
    ),
}
AMP_CONFIGS = {
    't-14': ROOT / 'configs/t2t-vit-t-14_8xb64_in1k.py',
    '14': ROOT / 'configs/t2t-vit-14_8xb64_in1k.py',
}

AMP_CONFIG = """_base_ = [{base!r}]
# the two class folders of write_images
model = dict(
    backbone=dict(img_size={img_size}{arch}), head=dict(num_classes=2{head}))
data_preprocessor = dict(num_classes=2)
train_dataloader = dict(
    batch_size={batch_size},
    num_workers={workers},
    persistent_workers=False,
    # repeated to one pass for the whole run: mmengine's loop sleeps 2 s
    # each time it restarts the loader
    dataset=dict(
        _delete_=True,
        type='RepeatDataset',
        times={times},
        dataset=dict(
            type='CustomDataset',
            data_root={data_root!r},
            with_label=True,
            pipeline=[
                dict(type='LoadImageFromFile'),
                dict(type='RandomResizedCrop', scale={img_size}),
                dict(type='RandomFlip', prob=0.5, direction='horizontal'),
                dict(type='PackInputs'),
            ])))
train_cfg = dict(_delete_=True, type='IterBasedTrainLoop', max_iters={iters})
val_dataloader = None
val_cfg = None
val_evaluator = None
test_dataloader = None
test_cfg = None
test_evaluator = None
param_scheduler = [dict(type='ConstantLR', factor=1.0, by_epoch=False)]
log_processor = dict(by_epoch=False, window_size=1)
default_hooks = dict(
    logger=dict(interval=1),
    checkpoint=dict(by_epoch=False, interval={iters}, save_best=None))
"""


@dataclass
class Settings:
    """Sizes of one run: the real check or the dry run."""

    device: str
    archs: dict[str, object]
    img_size: int
    batch_size: int
    dtypes: list[str]
    bench_args: list[str]
    amp_iters: int
    dist_epochs: int
    compile_backend: str
    workers: int
    # synthetic images of the --amp runs
    amp_images: int
    # more --cfg-options of the dist_train.sh run
    dist_options: list[str]
    dry_run: bool = False


def settings_for(dry_run: bool) -> Settings:
    if dry_run:
        return Settings(
            'cpu',
            dict(TINY_ARCHS),
            32,
            2,
            ['fp32'],
            ['--warmup', '0', '--iters', '1', '--rounds', '1'],
            3,
            1,
            'eager',
            0,
            6,
            # 2 training batches of 64 and one of validation
            [
                'train_dataloader.dataset.indices=128',
                'val_dataloader.dataset.indices=64',
            ],
            dry_run=True,
        )
    return Settings(
        'cuda',
        {name: name for name in TINY_ARCHS},
        224,
        64,
        ['fp32', 'bf16', 'fp16'],
        ['--warmup', '2', '--iters', '5', '--rounds', '3'],
        100,
        2,
        'inductor',
        8,
        64,
        [],
    )


@dataclass
class Row:
    """One line of the summary table."""

    check: str
    result: str
    ok: Optional[bool]  # None: informational


@dataclass
class Stage:
    name: str
    seconds: float = 0.0
    rows: list[Row] = field(default_factory=list)


def run_logged(
    command: list[str], log: Path, timeout: float, env: Optional[dict] = None
) -> Optional[int]:
    """Run ``command`` with its output in ``log``; None on time-out."""
    with open(log, 'w') as out:
        try:
            return subprocess.run(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
                env=env,
                timeout=timeout,
            ).returncode
        except subprocess.TimeoutExpired:
            return None


def failure(stage: str, code: Optional[int], log: Path) -> Row:
    what = 'timed out' if code is None else f'exit {code}'
    tail = log.read_text(errors='replace').strip().splitlines()[-1:] or ['']
    return Row(stage, f'{what}: {tail[0][:100]} (log: {log})', False)


def tool_env() -> dict:
    return dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(
            filter(None, [str(ROOT), os.environ.get('PYTHONPATH')])
        ),
    )


def benchmark_stage(
    s: Settings, work: Path, official: Optional[Path], stage: Stage
) -> None:
    log, result = work / 'benchmark.log', work / 'benchmark.json'
    command = [
        sys.executable,
        str(DEV_SCRIPTS / 'compare_implementations.py'),
        '--device',
        s.device,
        '--archs',
        *[
            a if isinstance(a, str) else json.dumps(a)
            for a in s.archs.values()
        ],
        '--batch-sizes',
        str(s.batch_size),
        '--img-size',
        str(s.img_size),
        '--dtypes',
        *s.dtypes,
        '--with-cp',
        '--json',
        str(result),
        *s.bench_args,
    ]
    if official is not None:
        command += ['--official-repo', str(official)]
    code = run_logged(command, log, 240, tool_env())
    if code != 0:
        stage.rows.append(failure('benchmark', code, log))
        return
    records = json.loads(result.read_text())['records']
    # the records name archs in the order given (JSON ones 'custom-...')
    arch_names = list(dict.fromkeys(record['arch'] for record in records))
    for arch_name, label in zip(arch_names, s.archs):
        mine = [r for r in records if r['arch'] == arch_name]
        for mode in ('infer', 'train'):
            for dtype in s.dtypes:
                rows = {
                    r['implementation']: r
                    for r in mine
                    if r['mode'] == mode and r['dtype'] == dtype
                }
                ours = rows.get('t2t-plugin')
                if ours is None:
                    continue
                parts = [f'{ours["images_per_s"]:.0f} img/s']
                for name, record in rows.items():
                    # references only: with_cp rows are ours too
                    if name in ('mmpretrain', 'official') and record.get(
                        'speedup_of_ours'
                    ):
                        parts.append(
                            f'{record["speedup_of_ours"]:.2f}x {name}'
                        )
                stage.rows.append(
                    Row(
                        f'benchmark {label} {mode} {dtype} b{s.batch_size}',
                        ', '.join(parts),
                        ours['images_per_s'] > 0,
                    )
                )
        fp32_train = {
            r['implementation']: r
            for r in mine
            if r['mode'] == 'train' and r['dtype'] == 'fp32'
        }
        plain = fp32_train.get('t2t-plugin', {}).get('peak_memory_mib')
        cp = next(
            (
                r.get('peak_memory_mib')
                for name, r in fp32_train.items()
                if 'with_cp' in name
            ),
            None,
        )
        if plain is not None and cp is not None:
            stage.rows.append(
                Row(
                    f'peak memory {label} train fp32 b{s.batch_size}',
                    f'{plain:.0f} MiB, with_cp {cp:.0f} MiB',
                    None if s.dry_run else cp < plain,
                )
            )


def compile_stage(s: Settings, stage: Stage) -> None:
    import torch

    from t2t_plugin.models import T2TViT

    device = torch.device(s.device)
    torch.manual_seed(0)
    model = T2TViT(s.archs['t-14'], img_size=s.img_size).to(device).eval()
    compiled = torch.compile(model, backend=s.compile_backend)
    images = torch.randn(
        s.batch_size, 3, s.img_size, s.img_size, device=device
    )

    def timed(fn, repeats):
        if device.type == 'cuda':
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(repeats):
            out = fn(images)
        if device.type == 'cuda':
            torch.cuda.synchronize()
        return out, (time.perf_counter() - start) / repeats

    with torch.no_grad():
        eager_out, _ = timed(model, 1)
        compiled_out, compile_s = timed(compiled, 1)
        repeats = 1 if device.type == 'cpu' else 20
        _, eager_s = timed(model, repeats)
        _, compiled_s = timed(compiled, repeats)
    # relative to the output's scale: kernels may sum in another order
    diff = (
        (eager_out[0] - compiled_out[0]).abs().max() / eager_out[0].abs().max()
    ).item()
    stage.rows.append(
        Row(
            f'torch.compile ({s.compile_backend}) t-14 infer fp32 '
            f'b{s.batch_size}',
            f'max rel. diff {diff:.1e}, {eager_s / compiled_s:.2f}x eager '
            f'speed, first call {compile_s:.0f} s',
            diff < 1e-3,
        )
    )


def write_images(folder: Path, count: int, size: int) -> None:
    """Random images in two class folders, ImageNet's folder layout."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    for index in range(count):
        target = folder / f'class_{index % 2}' / f'{index:04d}.png'
        target.parent.mkdir(parents=True, exist_ok=True)
        pixels = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(target)


def read_losses(work_dir: Path) -> list[float]:
    losses = []
    for scalars in sorted(work_dir.glob('*/vis_data/scalars.json')):
        for line in scalars.read_text().splitlines():
            entry = json.loads(line)
            if 'loss' in entry:
                losses.append(float(entry['loss']))
    return losses


def amp_stage(s: Settings, work: Path, stage: Stage) -> None:
    data = work / 'synthetic-imagenet'
    write_images(data, s.amp_images, s.img_size + s.img_size // 8)
    for label, arch in s.archs.items():
        config = work / f'amp_{label}.py'
        tiny = not isinstance(arch, str)
        config.write_text(
            AMP_CONFIG.format(
                base=str(AMP_CONFIGS[label]),
                img_size=s.img_size,
                arch=f', arch=dict(_delete_=True, **{arch!r})' if tiny else '',
                head=f', in_channels={arch["embed_dims"]}' if tiny else '',
                batch_size=s.batch_size,
                workers=s.workers,
                data_root=str(data),
                iters=s.amp_iters,
                times=math.ceil(s.batch_size * s.amp_iters / s.amp_images),
            )
        )
        run_dir, log = work / f'amp_{label}', work / f'amp_{label}.log'
        code = run_logged(
            [
                sys.executable,
                str(TOOLS / 'train.py'),
                str(config),
                '--amp',
                '--work-dir',
                str(run_dir),
            ],
            log,
            150,
            tool_env(),
        )
        check = f'train --amp {label}, {s.amp_iters} iters b{s.batch_size}'
        if code != 0:
            stage.rows.append(failure(check, code, log))
            continue
        losses = read_losses(run_dir)
        finite = sum(math.isfinite(loss) for loss in losses)
        stage.rows.append(
            Row(
                check,
                f'{finite}/{s.amp_iters} finite losses'
                + (f', last {losses[-1]:.3f}' if losses else ''),
                finite == s.amp_iters == len(losses),
            )
        )


def dist_stage(s: Settings, work: Path, stage: Stage) -> None:
    backend = 'nccl' if s.device == 'cuda' else 'gloo'
    log = work / 'dist_train.log'
    env = dict(
        tool_env(), PYTHON=sys.executable, PORT=os.environ.get('PORT', '29517')
    )
    code = run_logged(
        [
            'bash',
            str(TOOLS / 'dist_train.sh'),
            str(DIGITS_CONFIG),
            '1',
            '--work-dir',
            str(work / 'dist_train'),
            # the environment (the backend) on the terminal too
            '--verbose',
            '--cfg-options',
            f'env_cfg.dist_cfg.backend={backend}',
            f'train_cfg.max_epochs={s.dist_epochs}',
            f'train_cfg.val_interval={s.dist_epochs}',
            *s.dist_options,
        ],
        log,
        150,
        env,
    )
    check = f'dist_train.sh digits 1 ({backend})'
    if code != 0:
        stage.rows.append(failure(check, code, log))
        return
    text = log.read_text(errors='replace')
    used = f"'backend': '{backend}'" in text or f'backend={backend}' in text
    top1 = [line for line in text.splitlines() if 'accuracy/top1:' in line]
    result = top1[-1].split('accuracy/top1:')[-1].split()[0] if top1 else '?'
    stage.rows.append(
        Row(
            check,
            f'{backend} in log: {used}, top-1 {result}',
            used and bool(top1),
        )
    )


def render(stages: list[Stage], total_s: float, header: str) -> str:
    lines = [header, '', '| check | result | status |', '|---|---|---|']
    for stage in stages:
        for row in stage.rows:
            status = {True: 'ok', False: 'FAIL', None: '-'}[row.ok]
            lines.append(f'| {row.check} | {row.result} | {status} |')
    timing = ', '.join(
        f'{stage.name} {stage.seconds:.0f} s' for stage in stages
    )
    lines += ['', f'total {total_s:.0f} s ({timing})']
    return '\n'.join(lines)


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        '--dry-run',
        action='store_true',
        help='tiny sizes on the CPU: checks the wiring only',
    )
    parser.add_argument(
        '--work-dir', type=Path, default=ROOT / 'work_dirs' / 'gpu_check'
    )
    parser.add_argument(
        '--official-repo',
        type=Path,
        help='a checkout of the official T2T-ViT code, benchmarked too',
    )
    parser.add_argument(
        '--only',
        nargs='+',
        choices=('benchmark', 'compile', 'amp', 'dist'),
        help='run these stages only',
    )
    return parser.parse_args(argv)


def main(argv: Optional[list[str]] = None) -> int:
    args = parse_args(argv)
    for package in ('mmengine', 'mmpretrain', 'mmcv'):
        try:
            __import__(package)
        except ImportError as error:
            # a package that is there but misses one of its own needs
            missing = (
                'is not installed'
                if error.name in (None, package)
                else f'cannot be imported ({error})'
            )
            print(
                f'gpu_check: {package} {missing} for {sys.executable}; '
                'install the project first (make install, or make '
                'gpu-wheels for an offline machine: docs/install.md).',
                file=sys.stderr,
            )
            return 2
    import torch

    if not args.dry_run and not torch.cuda.is_available():
        print(
            'gpu_check: torch sees no CUDA device here; run it on a GPU '
            'machine, or use --dry-run to check the script on the CPU.',
            file=sys.stderr,
        )
        return 2
    s = settings_for(args.dry_run)
    work = args.work_dir
    work.mkdir(parents=True, exist_ok=True)
    device = (
        torch.cuda.get_device_name(0)
        if s.device == 'cuda'
        else 'CPU (dry run: tiny models, wiring only)'
    )
    header = (
        f'GPU check on {device}, torch {torch.__version__}, '
        f'Python {sys.version.split()[0]}'
    )
    stages = {
        'benchmark': lambda st: benchmark_stage(
            s, work, args.official_repo, st
        ),
        'compile': lambda st: compile_stage(s, st),
        'amp': lambda st: amp_stage(s, work, st),
        'dist': lambda st: dist_stage(s, work, st),
    }
    done: list[Stage] = []
    start = time.perf_counter()
    for name, run in stages.items():
        if args.only and name not in args.only:
            continue
        stage = Stage(name)
        began = time.perf_counter()
        try:
            run(stage)
        except Exception as error:  # one stage's crash must not hide others
            stage.rows.append(
                Row(name, f'{type(error).__name__}: {str(error)[:100]}', False)
            )
        stage.seconds = time.perf_counter() - began
        done.append(stage)
    total = time.perf_counter() - start
    if not args.dry_run:
        done.append(
            Stage(
                'limit',
                rows=[
                    Row(
                        'whole check within 8 min',
                        f'{total:.0f} s',
                        total <= TIME_LIMIT_S,
                    )
                ],
            )
        )
    table = render(done, total, header)
    (work / 'summary.md').write_text(table + '\n')
    print(table)
    failed = any(row.ok is False for stage in done for row in stage.rows)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
