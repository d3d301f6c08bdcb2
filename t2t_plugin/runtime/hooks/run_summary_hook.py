import os
import os.path as osp
import shlex
from typing import Optional

from mmengine.dist import master_only
from mmengine.hooks import Hook
from mmengine.registry import HOOKS
from mmengine.runner import EpochBasedTrainLoop

from ...analysis.curves import (
    NON_METRIC_KEYS,
    find_scalar_files,
    load_scalars,
    plot_curves,
)
from ..console_log import SHOWN
from ..sample_seeded_runner import config_dump_path
from .run_checks import is_training

# The tools of this repository, when the package runs from its checkout.
_REPOSITORY = osp.dirname(osp.dirname(osp.dirname(osp.dirname(__file__))))
_TOOLS = osp.join(_REPOSITORY, 'tools')


def shown_path(path: str) -> str:
    """``path`` as a command line gives it: relative to the current folder
    when it lies below it, else absolute; quoted for a shell."""
    absolute = osp.abspath(path)
    relative = osp.relpath(absolute, os.getcwd())
    return shlex.quote(absolute if relative.startswith('..') else relative)


def saved_config(runner) -> Optional[str]:
    """The config the Runner wrote to its work dir (with the options the
    run was given), or None where it is not there."""
    path = config_dump_path(runner)
    return path if path and osp.isfile(path) else None


def image_folder(cfg) -> Optional[str]:
    """The image folder of the config's validation (else test) dataset,
    if it reads one from the disk."""
    for key in ('val_dataloader', 'test_dataloader'):
        dataset = (cfg.get(key) or {}).get('dataset') or {}
        prefix = dataset.get('data_prefix') or ''
        if isinstance(prefix, dict):
            prefix = prefix.get('img_path') or ''
        folder = osp.join(dataset.get('data_root') or '', prefix)
        if folder and osp.isdir(folder):
            return folder
    return None


@HOOKS.register_module()
class RunSummaryHook(Hook):
    """At the end of a training, its curves, what it gave and what to run
    next.

    Once training (and its last evaluation) is done, the loss, learning
    rate and metrics that ``LocalVisBackend`` logged in every start of the
    run are drawn to ``<work_dir>/<curves>``, as ``plot_curves.py`` draws
    them later. On the main process, after the run: the best and the last
    value of ``metric`` with their epochs (iterations for an
    iteration-based loop), the checkpoint to use (the best one the
    ``CheckpointHook`` kept, else the last), the curves PNG, the config
    the Runner saved in the work dir and the commands of this
    repository's test, inference and export tools on them. The
    evaluations are those ``LocalVisBackend`` recorded, as the curves read
    them (a resumed run's earlier starts included). The lines reach the
    terminal also where a tool prints the progress only.

    Args:
        metric (str): The evaluation metric to report; the first one of
            the records where they have no such entry. Defaults to
            ``'accuracy/top1'``.
        curves (str): The file name of the curves PNG in the work dir.
            Defaults to ``'curves.png'``.
    """

    priority = 'LOWEST'

    def __init__(
        self, metric: str = 'accuracy/top1', curves: str = 'curves.png'
    ) -> None:
        self.metric = metric
        self.curves = curves

    def evaluations(self, runner) -> list[tuple[int, str, float]]:
        """``(epoch or iteration, metric, value)`` of each evaluation of
        the run, oldest first."""
        _, records = load_scalars(find_scalar_files(runner.work_dir))
        found = []
        for record in records:
            names = [key for key in record if key not in NON_METRIC_KEYS]
            if self.metric in record:
                names = [self.metric]
            if names and isinstance(record[names[0]], (int, float)):
                value = float(record[names[0]])
                found.append((int(record['step']), names[0], value))
        return found

    @staticmethod
    def _by_epoch(runner) -> bool:
        return isinstance(runner.train_loop, EpochBasedTrainLoop)

    @master_only
    def after_train(self, runner) -> None:
        """Draw the curves PNG."""
        files = find_scalar_files(runner.work_dir)
        if not files:
            runner.logger.warning(
                'RunSummaryHook found no vis_data/scalars.json in '
                f'{runner.work_dir}; add LocalVisBackend to the visualizer '
                f'to get {self.curves}.'
            )
            return
        train, val = load_scalars(files)
        out_path = plot_curves(
            train,
            val,
            osp.join(runner.work_dir, self.curves),
            title=osp.basename(osp.normpath(runner.work_dir)),
        )
        runner.logger.info(f'Training curves saved to {out_path}')

    @master_only
    def after_run(self, runner) -> None:
        if is_training(runner):
            # one record: the commands stand on lines of their own
            runner.logger.info('\n'.join(self.summary(runner)), extra=SHOWN)

    def summary(self, runner) -> list[str]:
        """The lines of the summary."""
        unit = 'epoch' if self._by_epoch(runner) else 'iteration'
        done = runner.epoch if unit == 'epoch' else runner.iter
        plural = '' if done == 1 else 's'
        # every path as the commands below give them
        where = shown_path(runner.work_dir)
        lines = [f'Training done: {done} {unit}{plural}, in {where}']
        evaluations = self.evaluations(runner)
        if evaluations:
            best = max(evaluations, key=lambda entry: entry[2])
            last = evaluations[-1]
            lines.append(
                # as the log and tools/test.py print them
                f'  best {best[1]}: {best[2]:.4f} at {unit} {best[0]}; '
                f'last: {last[2]:.4f} at {unit} {last[0]}'
            )
        else:
            lines.append('  no evaluation during training (no validation)')
        checkpoint = self.checkpoint_to_use(runner)
        config = saved_config(runner)
        curves = osp.join(runner.work_dir, self.curves)
        for name, path in (
            ('checkpoint', checkpoint),
            ('curves', curves if osp.isfile(curves) else None),
            ('config', config),
        ):
            if path:
                lines.append(f'  {name + ":":<12}{shown_path(path)}')
        if checkpoint and config:
            lines += ['Next, with the config this run saved:']
            lines += [
                f'  {command}'
                for command in self.commands(runner, config, checkpoint)
            ]
        return lines

    @staticmethod
    def checkpoint_to_use(runner) -> Optional[str]:
        """The best checkpoint the CheckpointHook kept, else the last it
        saved, as it records them in the message hub."""
        for key in ('best_ckpt', 'last_ckpt'):
            path = runner.message_hub.get_info(key)
            if path and osp.isfile(path):
                return path
        return None

    @staticmethod
    def commands(runner, config: str, checkpoint: str) -> list[str]:
        """The test, inference (classifiers) and export commands on the
        run's saved config and ``checkpoint``."""

        def tool(name: str) -> str:
            path = osp.join(_TOOLS, name)
            return shown_path(path) if osp.isfile(path) else f'tools/{name}'

        images = image_folder(runner.cfg)
        onnx = osp.join(
            runner.work_dir, osp.splitext(osp.basename(config))[0] + '.onnx'
        )
        run = f'{shown_path(config)} {shown_path(checkpoint)}'
        commands = [f'python {tool("test.py")} {run}']
        if runner.cfg.get('default_scope', 'mmpretrain') == 'mmpretrain':
            commands.append(
                f'python {tool("infer.py")} '
                f'{shown_path(images) if images else "IMAGE"} {run}'
            )
        commands.append(
            f'python {tool("deployment/pytorch2onnx.py")} {run} '
            f'{shown_path(onnx)} --verify'
        )
        return commands
