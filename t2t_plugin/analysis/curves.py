"""Training curves as a PNG, from the json-lines records that mmengine's
``LocalVisBackend`` writes to ``<timestamp>/vis_data/scalars.json``."""

import ast
import glob
import json
import os.path as osp
from collections.abc import Sequence

# Bookkeeping fields of mmengine's log records that are not curves.
NON_METRIC_KEYS = {'step', 'epoch', 'iter', 'time', 'data_time', 'memory'}


def find_scalar_files(work_dir: str) -> list[str]:
    """Scalar files of the latest run in ``work_dir``, oldest first: the
    latest ``<timestamp>/`` folder, and earlier ones as long as the later
    start resumed (its config says ``resume = True``), so that the curves
    of an interrupted run are whole and an unrelated earlier run stays out.
    """
    # Timestamp folders (YYYYmmdd_HHMMSS) sort chronologically.
    runs = sorted(
        glob.glob(osp.join(work_dir, '*', 'vis_data', 'scalars.json'))
    )
    files: list[str] = []
    for path in reversed(runs):
        files.insert(0, path)
        if not resumed(osp.join(osp.dirname(path), 'config.py')):
            break
    return files


def resumed(config: str) -> bool:
    """Whether the config a run saved sets ``resume = True`` at its top
    level, however it is laid out; read with ``ast``, never run."""
    try:
        with open(config, encoding='utf-8') as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return False
    return any(
        isinstance(node, ast.Assign)
        and any(
            getattr(target, 'id', None) == 'resume' for target in node.targets
        )
        and isinstance(node.value, ast.Constant)
        and node.value.value is True
        for node in tree.body
    )


def load_scalars(files: Sequence[str]) -> tuple[list[dict], list[dict]]:
    """Training records (those with ``lr``) and evaluation records of
    json-lines log files (oldest first), each sorted by ``step``; a later
    file's record (a resumed run logs again) replaces one at the same step.
    """
    train: dict[int, dict] = {}
    val: dict[int, dict] = {}
    for path in files:
        with open(path, encoding='utf-8') as f:
            records = [json.loads(line) for line in f if line.strip()]
        for record in records:
            if 'step' in record:
                target = train if 'lr' in record else val
                target[record['step']] = record
    return ([train[k] for k in sorted(train)], [val[k] for k in sorted(val)])


def plot_curves(
    train: Sequence[dict], val: Sequence[dict], out_file: str, title: str = ''
) -> str:
    """Draw losses and learning rate per iteration and metrics per eval step
    of :func:`load_scalars`'s records into the PNG ``out_file`` (returned)."""
    from matplotlib.figure import Figure

    loss_keys = sorted({k for r in train for k in r if 'loss' in k})
    metric_keys = sorted(
        {
            k
            for r in val
            for k, v in r.items()
            if k not in NON_METRIC_KEYS and isinstance(v, (int, float))
        }
    )
    fig = Figure(figsize=(15, 4))
    ax_loss, ax_lr, ax_metric = axes = fig.subplots(1, 3)
    for key in loss_keys:
        points = [(r['step'], r[key]) for r in train if key in r]
        ax_loss.plot(*zip(*points), label=key)
    ax_loss.set(xlabel='iteration', ylabel='loss', title='training loss')
    points = [(r['step'], r['lr']) for r in train]
    if points:
        ax_lr.plot(*zip(*points))
    ax_lr.set(xlabel='iteration', ylabel='lr', title='learning rate')
    ax_lr.ticklabel_format(axis='y', style='sci', scilimits=(-3, 3))
    for key in metric_keys:
        points = [(r['step'], r[key]) for r in val if key in r]
        ax_metric.plot(*zip(*points), marker='o', label=key)
    ax_metric.set(
        xlabel='epoch (or iteration)', ylabel='metric', title='evaluation'
    )
    for ax, keys in ((ax_loss, loss_keys), (ax_metric, metric_keys)):
        if keys:
            ax.legend()
    for ax in axes:
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out_file, dpi=100)
    return out_file
