"""The mistakes of a first run, each timed as a new user meets it: a fresh
process of ``tools/train.py``, ``tools/test.py`` or a tool that only runs a
model (infer, export, drawing, counting, benchmark) on ten generated class
folders. Prints, per mistake, the exit code, the number of lines, whether a
work dir was left, the median wall time of ``--repeat`` runs and the line
itself. The pre-flight answers them before ``import t2t_plugin``; the
misspelt keys of a class (optimizer, scheduler, dataset), from the class
the registry builds, and the data and class folders, which the dataset's
class resolves, after it, before the Runner; this is the benchmark of
that promise (the tests check the lines, not the time). A ``NAME=value``
word of a command line is an environment variable of its process (the
recipe's ``DATA_ROOT``, ``NUM_CLASSES``, ``MAX_EPOCHS``).
The run-only tools write into the work dir, so that the column says
whether they left an output folder.

    python .dev_scripts/first_second.py --repeat 5
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
RECIPE = 'configs/t2t-vit-lite_1xb64_custom-32px.py'
# a name one letter off the recipe's
MISTYPED = 'configs/t2t-vit-lite_1xb64_custom-32.py'


def class_folders(root: Path, classes: int = 10) -> Path:
    """``train/`` and ``val/`` with ``classes`` folders of two 32x32
    images each."""
    rng = np.random.default_rng(0)
    for split in ('train', 'val'):
        for index in range(classes):
            folder = root / split / f'c{index}'
            folder.mkdir(parents=True)
            for image in range(2):
                pixels = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
                Image.fromarray(pixels).save(folder / f'{image}.png')
    return root


def mistakes(data: Path, work: Path) -> dict[str, list[str]]:
    """The command line of each mistake, by name."""
    train = ['tools/train.py', RECIPE, '--work-dir', str(work)]
    test = ['tools/test.py', RECIPE, str(work / 'epoch_1.pth')]
    test += ['--work-dir', str(work)]
    data_root = f'DATA_ROOT={data}'
    given = [data_root, 'NUM_CLASSES=10', '--cfg-options']
    missing = str(data / 'missing.pth')
    return {
        'arch name': [*train, *given, 'model.backbone.arch=t-15'],
        'optimizer key': [*train, *given, 'optim_wrapper.optimizer.lrr=0.1'],
        'scheduler key': [*train, *given, 'param_scheduler.0.start_factr=0.1'],
        'dataset key': [
            *train,
            *given,
            'train_dataloader.dataset.data_prefx=x',
        ],
        '--resume of a missing file': [
            *train,
            '--resume',
            missing,
            *given[:2],
        ],
        'load_from of a missing file': [
            *train,
            *given,
            f'load_from={missing}',
        ],
        'config path typo': [
            'tools/train.py',
            MISTYPED,
            '--work-dir',
            str(work),
        ],
        'class folders against num_classes': [*train, data_root],
        'warm-up longer than training': [*train, *given[:2], 'MAX_EPOCHS=1'],
        'top-level lr=': [*train, *given, 'lr=0.1'],
        'top-level batch_size=': [*train, *given, 'batch_size=32'],
        'test.py: arch name': [*test, *given, 'model.backbone.arch=t-15'],
        'test.py: missing checkpoint': [*test, *given[:2]],
        'test.py: config path typo': ['tools/test.py', MISTYPED, missing],
        **run_only_mistakes(data, work),
    }


def run_only_mistakes(data: Path, work: Path) -> dict[str, list[str]]:
    """An unknown arch of each tool that only runs a model, and a
    checkpoint that is not there of those that read one (the checkpoint
    is otherwise an empty file: it is never read)."""
    image = str(data / 'val' / 'c0' / '0.png')
    empty = data / 'empty.pth'
    empty.touch()
    tools = {
        'infer.py': ['tools/infer.py', image, RECIPE, '{ckpt}'],
        'pytorch2onnx.py': [
            'tools/deployment/pytorch2onnx.py',
            RECIPE,
            '{ckpt}',
            str(work / 'model.onnx'),
        ],
        'vis_attention.py': [
            'tools/visualization/vis_attention.py',
            image,
            RECIPE,
            '{ckpt}',
            '--out-dir',
            str(work),
        ],
        'vis_features.py': [
            'tools/visualization/vis_features.py',
            image,
            RECIPE,
            '{ckpt}',
            '--out-dir',
            str(work),
        ],
        'get_flops.py': ['tools/analysis_tools/get_flops.py', RECIPE],
        'benchmark.py': [
            'tools/analysis_tools/benchmark.py',
            RECIPE,
            '--json',
            str(work / 'rows.json'),
        ],
    }
    cases = {}
    for tool, command in tools.items():
        given = [arg.replace('{ckpt}', str(empty)) for arg in command]
        cases[f'{tool}: arch name'] = [
            *given,
            '--cfg-options',
            'model.backbone.arch=t-15',
        ]
        if '{ckpt}' in command:
            missing = str(data / 'missing.pth')
            cases[f'{tool}: missing checkpoint'] = [
                arg.replace('{ckpt}', missing) for arg in command
            ]
    return cases


def measure(
    argv: list[str], work: Path, repeat: int
) -> tuple[int, list[str], bool, float]:
    """Exit code, the lines printed, whether ``work`` was left, and the
    median wall seconds of ``repeat`` fresh processes (the ``NAME=value``
    words of ``argv``: environment variables)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    assigned = [word for word in argv if re.match(r'^[A-Z_]+=', word)]
    env.update(word.split('=', 1) for word in assigned)
    argv = [word for word in argv if word not in assigned]
    seconds = []
    for _ in range(repeat):
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, *argv],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
        )
        seconds.append(time.perf_counter() - start)
    lines = [
        line
        for line in (done.stdout + done.stderr).strip().splitlines()
        # mmengine's log of the environment variables it used
        if ' - mmengine - INFO - Using env variable ' not in line
    ]
    return done.returncode, lines, work.exists(), statistics.median(seconds)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        '--repeat', type=int, default=5, help='runs per mistake (median)'
    )
    parser.add_argument('--only', nargs='+', help='names of mistakes to run')
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f'--repeat must be at least 1, got {args.repeat}')
    with tempfile.TemporaryDirectory() as folder:
        data = class_folders(Path(folder) / 'data')
        work = Path(folder) / 'work'
        cases = mistakes(data, work)
        unknown = sorted(set(args.only or ()) - set(cases))
        if unknown:
            parser.error(f'no mistake named {", ".join(unknown)}')
        print('| mistake | exit | lines | work dir left | median s | line |')
        print('|---|---|---|---|---|---|')
        for name, command in cases.items():
            if args.only and name not in args.only:
                continue
            code, lines, left, seconds = measure(command, work, args.repeat)
            line = lines[-1] if lines else ''
            print(
                f'| {name} | {code} | {len(lines)} | {"yes" if left else "no"}'
                f' | {seconds:.2f} | `{line}` |'
            )
    return 0


if __name__ == '__main__':
    sys.exit(main())
