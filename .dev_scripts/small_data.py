"""The small-data results of docs/custom_data.md: our recipes against
mmpretrain's ResNet-18 through the same pipeline and schedule.

Three steps, each a sub-command (run from the repository root):

``folders``
    Writes the two image sets as class folders, as a user's own data would
    be: ``fashion/`` from the Fashion-MNIST subset (``--fashion FILE``, an
    ``.npz`` with ``x_train``, ``y_train``, ``x_val``, ``y_val``,
    ``classes``) and ``digits/`` from scikit-learn's bundled digits (the
    train / val split of the ``DigitsDataset``).
``train``
    Trains one config on one folder for each seed with ``tools/train.py``,
    a process per run, into ``WORK_DIR/<set>/<config>_<epochs>e/seed<N>/``;
    the number of classes, the data root, the epochs and the cosine's end
    come as ``--cfg-options``, so the config is used as the guide says.
``table``
    One markdown row per (set, config, epochs): top-1 of the last
    evaluation, mean and spread (lowest, highest) over the seeds, and the
    seeds' numbers; params and MACs of the model at its input size
    (``t2t_plugin.analysis.count_complexity``, attention products
    included); training images/s, measured here in alternating rounds of
    training steps on one thread (``--speed-rounds``), so the configs'
    figures come from the same minutes of the machine.
``levers``
    The ablation of docs/custom_data.md: the recipe and each lever of
    :data:`LEVERS` on top of it (options of the recipe, or a config of
    ``projects/small_data``), on both sets at 12 and 30 epochs, one seed.
    With ``--run`` it trains the runs whose logs are missing from
    ``--logs`` (``--project-logs`` for the project's levers) and copies
    their logs there; then it prints one row per lever from those logs,
    with params, MACs and training images/s as ``table`` measures them;
    ``--figure`` draws their curves.
``frontier``
    The speed of candidates inside the T2T-ViT family (:data:`FRONTIER`:
    widths, depth, soft-split strides and the token count they give, token
    layer, heads, MLP ratio, the T2T layers' dropout) beside the reference
    config (ResNet-18), all in alternating rounds of one process on one
    thread, batch 64, through the configs' data preprocessor
    (``t2t_plugin.analysis.speed.StepRunner``): params, MACs, training and
    inference images/s and their ratio to the reference's (the median of
    the rounds' ratios; above 1: faster than the reference).
"""

import argparse
import glob
import os
import os.path as osp
import shutil
import subprocess
import sys
import time
from collections import defaultdict

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
# the project's configs import projects.small_data.levers
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
PROJECT = osp.join(ROOT, 'projects', 'small_data')


def project_config(lever: str) -> str:
    """The project's config of a lever on top of the recipe."""
    return osp.join(
        PROJECT, 'configs', f't2t-vit-lite_1xb64_custom-32px-{lever}.py'
    )


# The levers of the ablation, each on top of the recipe: the config that
# trains it (None: the recipe given) and its options.
LEVERS = {
    'recipe': (None, []),
    'lsa': (project_config('lsa'), []),
    'conv_tokens': (None, ['model.backbone.arch.token_layer=convolution']),
    'conv_stem': (project_config('conv-stem'), []),
    'transformer_tokens': (
        None,
        ['model.backbone.arch.token_layer=transformer'],
    ),
    'mean_pool': (
        None,
        [
            'model.backbone.out_type=avg_featmap',
            'model.head.pool=token',
            'model.backbone.drop_path_rate=0.1',
        ],
    ),
    'drloc': (project_config('drloc'), []),
}
# Candidates of the speed frontier, each the recipe with these options.
_WIDE96 = [
    'model.backbone.arch.embed_dims=96',
    'model.backbone.arch.feedforward_channels=192',
    'model.head.in_channels=96',
]
_STRIDES_221 = ['model.backbone.t2t_cfg.strides=[2,2,1]']
_NO_T2T_DROP = ['model.backbone.t2t_cfg.drop_rate=0.0']
_MLP1 = ['model.backbone.arch.feedforward_channels=128']
_STRIDES_411 = [
    'model.backbone.t2t_cfg.kernel_sizes=[7,3,3]',
    'model.backbone.t2t_cfg.strides=[4,1,1]',
    'model.backbone.t2t_cfg.paddings=[2,1,1]',
]
_CONV_STEM = ['model.backbone.arch.token_layer=conv_stem']
FRONTIER = {
    'recipe': [],
    't2t_drop0': _NO_T2T_DROP,
    'strides_221': _STRIDES_221,
    'strides_411_k7': _STRIDES_411,
    'token_dims16': ['model.backbone.t2t_cfg.token_dims=16'],
    'mlp1': _MLP1,
    'depth3': ['model.backbone.arch.num_layers=3'],
    'heads2': ['model.backbone.arch.num_heads=2'],
    'wide96': _WIDE96,
    'conv_stem': _CONV_STEM,
    'strides_221_drop0': _STRIDES_221 + _NO_T2T_DROP,
    'strides_221_drop0_mlp1': _STRIDES_221 + _NO_T2T_DROP + _MLP1,
    'strides_221_drop0_wide96': _STRIDES_221 + _NO_T2T_DROP + _WIDE96,
    'strides_221_drop0_depth3': _STRIDES_221
    + _NO_T2T_DROP
    + ['model.backbone.arch.num_layers=3'],
    'strides_411_k7_drop0': _STRIDES_411 + _NO_T2T_DROP,
    'strides_411_k7_drop0_mlp1': _STRIDES_411 + _NO_T2T_DROP + _MLP1,
    'strides_411_k7_drop0_wide96': _STRIDES_411 + _NO_T2T_DROP + _WIDE96,
    'conv_stem_mlp1': _CONV_STEM + _MLP1,
    'conv_stem_wide96': _CONV_STEM + _WIDE96,
}
# handwriting is not mirrored: the train pipeline's RandomFlip off
SET_OPTIONS = {'digits': ['train_dataloader.dataset.pipeline.3.prob=0.0']}


def write_folders(out: str, fashion: str) -> None:
    import numpy as np
    from PIL import Image

    def save(root, split, images, labels, names):
        for index, (image, label) in enumerate(zip(images, labels)):
            folder = osp.join(root, split, names[int(label)])
            os.makedirs(folder, exist_ok=True)
            Image.fromarray(image).save(osp.join(folder, f'{index:05d}.png'))

    data = np.load(fashion)
    classes = [str(name) for name in data['classes']]
    for split in ('train', 'val'):
        save(
            osp.join(out, 'fashion'),
            split,
            data[f'x_{split}'],
            data[f'y_{split}'],
            classes,
        )
    # the DigitsDataset's own train / val split
    from t2t_plugin.datasets import DigitsDataset

    for split in ('train', 'val'):
        samples = DigitsDataset(split=split, lazy_init=True).load_data_list()
        save(
            osp.join(out, 'digits'),
            split,
            [sample['img'] for sample in samples],
            [sample['gt_label'] for sample in samples],
            [str(i) for i in range(10)],
        )
    print(f'Wrote {out}/fashion and {out}/digits')


def run_name(config: str, epochs: int) -> str:
    return f'{osp.splitext(osp.basename(config))[0]}_{epochs}e'


def train(args) -> int:
    data_root = osp.abspath(args.data)
    num_classes = len(os.listdir(osp.join(data_root, 'train')))
    name = osp.basename(osp.normpath(data_root))
    failed = 0
    for seed in args.seeds:
        work_dir = osp.join(
            args.work_dir,
            name,
            run_name(args.config, args.epochs),
            f'seed{seed}',
        )
        options = (
            [
                f'model.head.num_classes={num_classes}',
                f'data_preprocessor.num_classes={num_classes}',
                f'train_cfg.max_epochs={args.epochs}',
                f'param_scheduler.1.end={args.epochs}',
                f'randomness.seed={seed}',
            ]
            + [
                f'{loader}.dataset.data_root={data_root}'
                for loader in (
                    'train_dataloader',
                    'val_dataloader',
                    'test_dataloader',
                )
            ]
            + args.cfg_options
        )
        command = [
            sys.executable,
            osp.join(ROOT, 'tools', 'train.py'),
            args.config,
            '--work-dir',
            work_dir,
            '--cfg-options',
            *options,
        ]
        print(' '.join(command), flush=True)
        os.makedirs(work_dir, exist_ok=True)
        # the project's configs import projects.small_data from the root
        path = os.environ.get('PYTHONPATH')
        env = dict(
            os.environ,
            PYTHONPATH=os.pathsep.join([ROOT] + ([path] if path else [])),
        )
        with open(osp.join(work_dir, 'stdout.log'), 'w') as log:
            code = subprocess.call(command, stdout=log, stderr=log, env=env)
        failed += code != 0
        print(f'seed {seed}: exit {code}, top-1 {last_top1(work_dir)}')
    return int(failed > 0)


def top1_curve(files: list) -> list:
    """(epoch, top-1) of every evaluation in the scalar logs ``files``."""
    from t2t_plugin.analysis import load_scalars

    _, val = load_scalars(files)
    return [
        (r['step'], r['accuracy/top1']) for r in val if 'accuracy/top1' in r
    ]


def evaluations(work_dir: str) -> list:
    """(epoch, top-1) of every evaluation of the run in ``work_dir``."""
    from t2t_plugin.analysis import find_scalar_files

    return top1_curve(find_scalar_files(work_dir))


def last_top1(work_dir: str):
    points = evaluations(work_dir)
    return points[-1][1] if points else None


def model_of(config: str, options: tuple = ()):
    from mmengine.config import Config, DictAction
    from mmengine.registry import init_default_scope
    from mmpretrain.registry import MODELS

    import t2t_plugin  # noqa: F401

    cfg = Config.fromfile(config)
    if options:
        parser = argparse.ArgumentParser()
        parser.add_argument('--options', nargs='+', action=DictAction)
        cfg.merge_from_dict(parser.parse_args(['--options', *options]).options)
    init_default_scope('mmpretrain')
    cfg.model.head.num_classes = 10
    cfg.model.data_preprocessor = dict(cfg.data_preprocessor, num_classes=10)
    return MODELS.build(cfg.model), cfg.get('img_size', 32)


def speeds(models: dict, rounds: int, batch: int = 64) -> dict:
    """Training images/s of each ``name: (model, size)``, one thread, its
    losses as it trains (auxiliary ones included), measured in alternating
    rounds; the median round."""
    import torch
    from mmpretrain.structures import DataSample

    torch.set_num_threads(1)
    steps = {}
    for name, (model, size) in models.items():
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        images = torch.randn(batch, 3, size, size)
        samples = [
            DataSample().set_gt_label(int(label))
            for label in torch.randint(0, 10, (batch,))
        ]

        def step(
            model=model, optimizer=optimizer, images=images, samples=samples
        ):
            losses = model(images, samples, mode='loss')
            loss = sum(v for k, v in losses.items() if 'loss' in k)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

        step()
        steps[name] = step
    times = defaultdict(list)
    for _ in range(rounds):
        for name, step in steps.items():
            start = time.perf_counter()
            for _ in range(3):
                step()
            times[name].append((time.perf_counter() - start) / 3)
    return {
        name: batch / sorted(values)[len(values) // 2]
        for name, values in times.items()
    }


def write_assets(runs: dict, work_dir: str, out: str) -> None:
    """Each run's scalar log, and one figure per image set: top-1 after
    each evaluation, a line per run and seed."""
    import shutil

    import matplotlib

    from t2t_plugin.analysis import find_scalar_files

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    os.makedirs(out, exist_ok=True)
    by_set = defaultdict(list)
    for (data, run), seeds in sorted(runs.items()):
        by_set[data].append((run, seeds))
        for seed in seeds:
            run_dir = osp.join(work_dir, data, run, f'seed{seed}')
            (scalars,) = find_scalar_files(run_dir)[-1:]
            shutil.copy(
                scalars, osp.join(out, f'{data}_{run}_seed{seed}.json')
            )
    for data, entries in by_set.items():
        figure, axes = plt.subplots(figsize=(7, 4.5))
        for index, (run, seeds) in enumerate(entries):
            for seed in sorted(seeds):
                points = evaluations(
                    osp.join(work_dir, data, run, f'seed{seed}')
                )
                axes.plot(
                    *zip(*points),
                    color=f'C{index}',
                    alpha=0.8,
                    marker='o',
                    markersize=3,
                    label=run if seed == min(seeds) else None,
                )
        axes.set(xlabel='epoch', ylabel='val top-1 (%)', title=data)
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8)
        figure.tight_layout()
        figure.savefig(osp.join(out, f'{data}_top1.png'), dpi=90)
        plt.close(figure)
    print(f'Logs and figures in {out}')


def table(args) -> int:
    from t2t_plugin.analysis.complexity import count_complexity

    runs = defaultdict(dict)  # (set, run) -> seed -> top-1
    for work_dir in sorted(
        glob.glob(osp.join(args.work_dir, '*', '*', 'seed*'))
    ):
        key = tuple(work_dir.split(os.sep)[-3:-1])
        runs[key][int(work_dir.rsplit('seed', 1)[1])] = last_top1(work_dir)
    configs = {osp.splitext(osp.basename(c))[0]: c for c in args.configs}
    models = {name: model_of(config) for name, config in configs.items()}
    counts = {
        name: (count_complexity(model, (size, size)), size)
        for name, (model, size) in models.items()
    }
    if args.assets:
        write_assets(runs, args.work_dir, args.assets)
    speed = speeds(models, args.speed_rounds)
    print(
        '| set | config | epochs | top-1 mean | lowest - highest | seeds '
        '| params | MACs | train img/s |'
    )
    print('|---|---|---|---|---|---|---|---|---|')
    for (data, run), seeds in sorted(runs.items()):
        name, epochs = run.rsplit('_', 1)
        if name not in configs:
            continue
        values = [seeds[s] for s in sorted(seeds) if seeds[s] is not None]
        if not values:
            continue
        complexity, size = counts[name]
        print(
            f'| {data} | `{name}` | {epochs[:-1]} | '
            f'{sum(values) / len(values):.1f} | '
            f'{min(values):.1f} - {max(values):.1f} | '
            + ' / '.join(f'{v:.1f}' for v in values)
            + f' | {complexity.params / 1e6:.2f} M | '
            f'{complexity.macs / 1e6:.0f} M | '
            f'{speed[name]:.0f} |'
        )
    return 0


def lever_log(args, data: str, lever: str, epochs: int) -> str:
    """Where the ablation keeps a run's log: the recipe's runs are
    ``<set>_mimetic_<E>e_seed<N>.json``, the levers'
    ``<set>_mimetic_<lever>_<E>e_seed<N>.json``, in ``--logs``, or in
    ``--project-logs`` for a lever of the project."""
    middle = '' if lever == 'recipe' else f'_{lever}'
    logs = args.logs if LEVERS[lever][0] is None else args.project_logs
    name = f'{data}_mimetic{middle}_{epochs}e_seed{args.seed}.json'
    return osp.join(logs, name)


def draw_levers(curves: dict, names: list, budgets: list, out: str) -> None:
    """One panel per (set, epochs), top-1 after each evaluation, a line
    per lever (the recipe in black)."""
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    columns = 2 if len(budgets) > 1 else 1
    rows = -(-len(budgets) // columns)
    figure, axes = plt.subplots(
        rows, columns, figsize=(6 * columns, 4.2 * rows), squeeze=False
    )
    for ax, (data, epochs) in zip(axes.flat, budgets):
        for index, lever in enumerate(names):
            points = curves[lever, data, epochs]
            if points:
                recipe = lever == 'recipe'
                ax.plot(
                    *zip(*points),
                    color='black' if recipe else f'C{index}',
                    linewidth=2.2 if recipe else 1.3,
                    marker='o',
                    markersize=3,
                    label=lever,
                )
        ax.set(
            xlabel='epoch',
            ylabel='val top-1 (%)',
            title=f'{data}, {epochs} epochs',
        )
        ax.grid(alpha=0.3)
        ax.legend(fontsize=9)
    for ax in axes.flat[len(budgets) :]:
        ax.set_visible(False)
    figure.tight_layout()
    figure.savefig(out, dpi=100)
    plt.close(figure)
    print(f'Curves in {out}')


def levers(args) -> int:
    from t2t_plugin.analysis import find_scalar_files
    from t2t_plugin.analysis.complexity import count_complexity

    budgets = [(d, e) for d in args.sets for e in args.epochs]
    failed = 0
    for lever in args.levers:
        for data, epochs in budgets:
            log = lever_log(args, data, lever, epochs)
            if not args.run or osp.exists(log):
                continue
            work_dir = osp.join(args.work_dir, lever)
            config, options = LEVERS[lever]
            run = argparse.Namespace(
                config=config or args.config,
                data=osp.join(args.data_root, data),
                epochs=epochs,
                seeds=[args.seed],
                work_dir=work_dir,
                cfg_options=SET_OPTIONS.get(data, []) + options,
            )
            failed += train(run)
            run_dir = osp.join(
                work_dir,
                data,
                run_name(run.config, epochs),
                f'seed{args.seed}',
            )
            found = find_scalar_files(run_dir)
            if found:
                os.makedirs(osp.dirname(log), exist_ok=True)
                shutil.copy(found[-1], log)
    curves = {
        (lever, data, epochs): top1_curve([log] if osp.exists(log) else [])
        for lever in args.levers
        for data, epochs in budgets
        for log in [lever_log(args, data, lever, epochs)]
    }
    if args.figure:
        draw_levers(curves, args.levers, budgets, args.figure)
    models = {
        lever: model_of(
            LEVERS[lever][0] or args.config, tuple(LEVERS[lever][1])
        )
        for lever in args.levers
    }
    speed = speeds(models, args.speed_rounds)
    print(
        '| lever | '
        + ' | '.join(f'{d} {e}e' for d, e in budgets)
        + ' | params | MACs | train img/s |'
    )
    print('|---' * (len(budgets) + 4) + '|')
    for lever, (model, size) in models.items():
        cells = [
            f'{curve[-1][1]:.1f}' if curve else '-'
            for curve in (curves[lever, d, e] for d, e in budgets)
        ]
        complexity = count_complexity(model, (size, size))
        print(
            f'| {lever} | '
            + ' | '.join(cells)
            + f' | {complexity.params / 1e6:.2f} M | '
            f'{complexity.macs / 1e6:.0f} M | {speed[lever]:.0f} |'
        )
    return int(failed > 0)


def frontier(args) -> int:
    import statistics

    import torch
    from mmpretrain.structures import DataSample

    from t2t_plugin.analysis.complexity import count_complexity
    from t2t_plugin.analysis.speed import StepRunner, alternating_rounds

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    models = {args.reference_name: model_of(args.reference)}
    for name in args.candidates:
        models[name] = model_of(args.config, tuple(FRONTIER[name]))
    batch = 64
    samples = [DataSample().set_gt_label(i % 10) for i in range(batch)]
    rates, ratios = {}, {}
    for mode in ('train', 'infer'):
        steps = {}
        for name, (model, size) in models.items():
            images = torch.randint(0, 256, (batch, 3, size, size))
            steps[name] = StepRunner(
                model, images.byte(), mode == 'train', 'fp32', samples
            )
            steps[name]()
        seconds = alternating_rounds(steps, args.rounds, args.iters)
        reference = seconds[args.reference_name]
        for name, values in seconds.items():
            rates[name, mode] = batch * args.iters / statistics.median(values)
            ratios[name, mode] = statistics.median(
                r / v for r, v in zip(reference, values)
            )
    print(
        f'one thread, batch {batch}, {args.rounds} rounds of {args.iters} '
        f"steps; x: images/s over {args.reference_name}'s"
    )
    print(
        '| candidate | params | MACs | train img/s | train x | infer img/s '
        '| infer x |'
    )
    print('|---|---|---|---|---|---|---|')
    for name, (model, size) in models.items():
        complexity = count_complexity(model, (size, size))
        print(
            f'| {name} | {complexity.params / 1e6:.2f} M | '
            f'{complexity.macs / 1e6:.1f} M | {rates[name, "train"]:.0f} | '
            f'{ratios[name, "train"]:.2f} | {rates[name, "infer"]:.0f} | '
            f'{ratios[name, "infer"]:.2f} |',
            flush=True,
        )
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest='command', required=True)
    folders = commands.add_parser('folders', help='write the image folders')
    folders.add_argument('--out', default='data/small')
    folders.add_argument('--fashion', required=True)
    run = commands.add_parser('train', help='train a config for each seed')
    run.add_argument('config')
    run.add_argument('--data', required=True, help='a folder of class folders')
    run.add_argument('--epochs', type=int, default=12)
    run.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
    run.add_argument('--work-dir', default='work_dirs/small_data')
    run.add_argument(
        '--cfg-options', nargs='+', default=[], help='more config options'
    )
    rows = commands.add_parser('table', help='print the results table')
    rows.add_argument('configs', nargs='+')
    rows.add_argument('--work-dir', default='work_dirs/small_data')
    rows.add_argument('--speed-rounds', type=int, default=5)
    rows.add_argument(
        '--assets', help='copy the logs and draw the curves into this folder'
    )
    ablation = commands.add_parser('levers', help='the ablation of levers')
    ablation.add_argument('config', help='the recipe')
    ablation.add_argument('--logs', default='docs/assets/small_data')
    ablation.add_argument(
        '--project-logs',
        default='projects/small_data/logs',
        help="the logs of the project's levers",
    )
    ablation.add_argument('--levers', nargs='+', default=list(LEVERS))
    ablation.add_argument('--sets', nargs='+', default=['fashion', 'digits'])
    ablation.add_argument('--epochs', type=int, nargs='+', default=[12, 30])
    ablation.add_argument('--seed', type=int, default=0)
    ablation.add_argument(
        '--run', action='store_true', help='train the missing runs'
    )
    ablation.add_argument('--data-root', default='data/small')
    ablation.add_argument('--work-dir', default='work_dirs/levers')
    ablation.add_argument('--speed-rounds', type=int, default=5)
    ablation.add_argument('--figure', help='draw the curves into this file')
    speed = commands.add_parser('frontier', help='the speed of candidates')
    speed.add_argument('config', help='the recipe')
    speed.add_argument(
        '--reference',
        default='.dev_scripts/small_data/resnet-18_1xb64_custom-32px.py',
    )
    speed.add_argument('--reference-name', default='resnet-18')
    speed.add_argument(
        '--candidates',
        nargs='+',
        choices=list(FRONTIER),
        default=list(FRONTIER),
    )
    speed.add_argument('--rounds', type=int, default=5)
    speed.add_argument('--iters', type=int, default=2)
    speed.add_argument('--threads', type=int, default=1)
    args = parser.parse_args(argv)
    if args.command == 'folders':
        write_folders(args.out, args.fashion)
        return 0
    commands = dict(train=train, table=table, levers=levers, frontier=frontier)
    return commands[args.command](args)


if __name__ == '__main__':
    sys.exit(main())
