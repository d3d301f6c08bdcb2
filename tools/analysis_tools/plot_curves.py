"""Draw training curves (loss, lr, evaluation metrics) of a run as a PNG.

Give a work dir (all starts of its latest run, resumed ones included) or
one or more json-lines logs (``<timestamp>/vis_data/scalars.json`` or
``<timestamp>.json``). The figure is the one ``RunSummaryHook`` writes
at the end of training.
"""

import argparse
import os.path as osp
import sys

from t2t_plugin.analysis import find_scalar_files, load_scalars, plot_curves
from t2t_preflight.outputs import output_problem


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        'logs', nargs='+', help='a work dir or json-lines log files'
    )
    parser.add_argument(
        '--out',
        help='PNG to write (default: curves.png in the work dir, or beside '
        'the first log)',
    )
    parser.add_argument('--title', default='', help='figure title')
    args = parser.parse_args()

    if len(args.logs) == 1 and osp.isdir(args.logs[0]):
        work_dir = args.logs[0]
        files = find_scalar_files(work_dir)
        default_out = osp.join(work_dir, 'curves.png')
        title = args.title or osp.basename(osp.normpath(work_dir))
    else:
        files = args.logs
        default_out = osp.join(osp.dirname(args.logs[0]), 'curves.png')
        title = args.title
    missing = [path for path in files if not osp.isfile(path)]
    if not files or missing:
        print(
            f'No training log found: expected a work dir with '
            f'<timestamp>/vis_data/scalars.json or json log files, got '
            f'{" ".join(missing or args.logs)}',
            file=sys.stderr,
        )
        return 1
    out = args.out or default_out
    problem = output_problem(
        out,
        '--out',
        file=True,
        inputs={f'the log {path}': path for path in files},
    )
    if problem:
        print(problem, file=sys.stderr)
        return 1
    train, val = load_scalars(files)
    if not train and not val:
        print(f'No scalars in {" ".join(files)}', file=sys.stderr)
        return 1
    out = plot_curves(train, val, out, title=title)
    print(
        f'Curves of {len(train)} training and {len(val)} evaluation '
        f'records saved to {out}'
    )
    return 0


if __name__ == '__main__':
    sys.exit(main())
