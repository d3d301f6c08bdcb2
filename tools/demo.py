"""The embedded demo: train a small T2T-ViT on scikit-learn's digits.

Runs ``tools/train.py`` and ``tools/test.py`` on the digits config as a user
would, on the CPU, showing the training's progress lines, then prints the
validation top-1, the work dir, the checkpoint and the training-curve PNG
(``make demo``); the rest of what the tools log is in the log files.
"""

import argparse
import glob
import json
import os
import os.path as osp
import shutil
import subprocess
import sys
import time

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
CONFIG = osp.join('configs', 't2t-vit-mini_1xb64_digits.py')
# Files that mark the work dir of an earlier training run.
DEMO_MARKERS = ('last_checkpoint', osp.basename(CONFIG))


def can_clear(work_dir: str) -> bool:
    """Whether the demo may empty ``work_dir``: a new or empty folder or
    the work dir of an earlier run, never the repository, the home folder
    or a folder above them."""
    real = osp.realpath(work_dir)
    for kept in (ROOT, osp.expanduser('~')):
        kept = osp.realpath(kept)
        if osp.commonpath([real, kept]) == real:
            return False
    if not osp.lexists(real):
        return True
    if not osp.isdir(real):
        return False
    names = os.listdir(real)
    return not names or any(name in names for name in DEMO_MARKERS)


def run(args: list, env: dict, show: bool = True) -> None:
    """Run a tool of this repository, stopping the demo if it fails. What
    it prints is shown if ``show``, else only when it fails (its log file
    in the work dir keeps everything)."""
    command = [sys.executable, *args]
    print('$', ' '.join(command), flush=True)
    result = subprocess.run(
        command,
        cwd=ROOT,
        env=env,
        stdout=None if show else subprocess.PIPE,
        stderr=None if show else subprocess.STDOUT,
        text=True,
    )
    if result.returncode != 0:
        if result.stdout:
            print(result.stdout, end='', file=sys.stderr)
        sys.exit(f'Demo stopped: {args[0]} exited with {result.returncode}.')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        '--work-dir',
        default=osp.join('work_dirs', 't2t-vit-mini_1xb64_digits'),
        help='output folder (relative to the repository): a new or empty '
        'folder, or the work dir of an earlier demo, which is emptied first',
    )
    parser.add_argument(
        '--epochs',
        type=int,
        help="train this many epochs instead of the config's 40 (a quick "
        'check of the whole demo)',
    )
    args = parser.parse_args()

    work_dir = osp.join(ROOT, args.work_dir)
    if not can_clear(work_dir):
        sys.exit(
            f'Demo stopped: {args.work_dir} exists and is not a demo '
            'work dir; pass an empty or new folder.'
        )
    shutil.rmtree(work_dir, ignore_errors=True)
    env = dict(os.environ)
    # The checkout's package, also where it is not installed (make demo in
    # an environment it did not create).
    env['PYTHONPATH'] = os.pathsep.join(
        [ROOT, *filter(None, [env.get('PYTHONPATH')])]
    )
    # The model is tiny: more threads only add synchronisation on a CPU.
    env.setdefault('OMP_NUM_THREADS', '1')
    env['CUDA_VISIBLE_DEVICES'] = ''  # the demo is a CPU demo everywhere

    start = time.time()
    # The progress lines on the screen, everything in the log file.
    train = ['tools/train.py', CONFIG, '--work-dir', work_dir]
    if args.epochs:
        train += ['--cfg-options', f'train_cfg.max_epochs={args.epochs}']
    run(train, env)
    train_seconds = time.time() - start
    with open(osp.join(work_dir, 'last_checkpoint')) as f:
        checkpoint = f.read().strip()
    metrics_file = osp.join(work_dir, 'test_metrics.json')
    test = ['tools/test.py', CONFIG, checkpoint, '--work-dir', work_dir]
    run(test + ['--out', metrics_file, '--out-item', 'metrics'], env, False)
    with open(metrics_file) as f:
        metrics = json.load(f)

    curves = osp.join(work_dir, 'curves.png')
    # mmengine logs each run to <work_dir>/<timestamp>/<timestamp>.log; the
    # earliest is the training run, the next the evaluation
    logs = sorted(glob.glob(osp.join(work_dir, '*', '*.log')))
    print('\nT2T-ViT digits demo')
    print(
        f'  val top-1:  {metrics["accuracy/top1"]:.2f}% '
        f'(top-5 {metrics["accuracy/top5"]:.2f}%, 359 images)'
    )
    print(
        f'  train time: {train_seconds:.0f} s on the CPU '
        f'({time.time() - start:.0f} s with evaluation)'
    )
    print(f'  work dir:   {osp.relpath(work_dir, ROOT)}')
    if logs:
        print(f'  train log:  {osp.relpath(logs[0], ROOT)}')
    print(f'  checkpoint: {osp.relpath(checkpoint, ROOT)}')
    print(f'  curves:     {osp.relpath(curves, ROOT)}')


if __name__ == '__main__':
    main()
