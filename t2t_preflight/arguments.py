"""Command-line options of ``tools/train.py`` and ``tools/test.py`` and
how they change a config, as in mmpretrain's tools, and the start of
those tools: the config read, changed by the options and checked
(:func:`load_checked`) before ``import t2t_plugin``. The command-line
layer of the light package: it prints the line of what stops a run and
picks the exit code, as ``t2t_plugin.cli`` does after the import."""

import argparse
import copy
import os
import os.path as osp
import re
import sys
from collections.abc import Callable, Sequence
from typing import Optional

from mmengine.config import Config, ConfigDict, DictAction

from . import checks
from .archs import arch_problem
from .config import import_custom_modules, load_config, warn_stale_variables
from .errors import ConfigError
from .inputs import (
    DEFAULT_MAX_TOKENS,
    built_datasets,
    class_folder_problem,
    find_missing_data,
    missing_checkpoint,
)

# a space mmengine's DictAction deletes that is not beside a bracket or a
# comma (where deleting it changes nothing: [1, 2])
_ALTERING_SPACE = re.compile(r'(?<![\[\](),]) +(?![\[\](),])')


class CfgOptionsAction(DictAction):
    """mmengine's ``DictAction``, refusing a value it would alter: it
    deletes every space, so ``data_root='data/my set'`` would become
    ``data/myset``. Refused in one line, exit code 2, as argparse refuses
    an option; a value it cannot parse (``x=[1,2``) is argparse's usage
    error, not a traceback."""

    def __call__(self, parser, namespace, values, option_string=None):
        try:
            for item in values:
                key, _, value = item.partition('=')
                if _ALTERING_SPACE.search(value):
                    # what mmengine's own parsing makes of it
                    parsed = argparse.Namespace()
                    DictAction([], 'parsed')(parser, parsed, [item])
                    altered = parsed.parsed[key]
                    parser.exit(
                        2,
                        f'{parser.prog}: error: --cfg-options {key}: mmengine '
                        f'deletes the spaces of {value!r}, which would become '
                        f'{altered!r}; set such a value in the config file, '
                        'or in the environment variable the config reads it '
                        'from.\n',
                    )
            super().__call__(parser, namespace, values, option_string)
        except (AssertionError, RecursionError, ValueError, SyntaxError):
            # how mmengine's DictAction fails on values it cannot parse
            parser.error(
                'cannot parse the --cfg-options values; write lists '
                'as key=[a,b] and give dicts in a config file'
            )


def add_cfg_options(
    parser: argparse.ArgumentParser, example: str = 'model.head.num_classes=10'
) -> None:
    """Add ``--cfg-options``, with ``example`` in its help."""
    parser.add_argument(
        '--cfg-options',
        nargs='+',
        action=CfgOptionsAction,
        help=f'override config entries, e.g. {example}',
    )


def add_device_argument(parser: argparse.ArgumentParser) -> None:
    """``--device`` (default ``cpu``), checked by
    ``t2t_plugin.cli.options.check_arguments``."""
    parser.add_argument(
        '--device', default='cpu', help="'cpu' (default), 'cuda' or 'cuda:N'"
    )


def positive_int(text: str) -> int:
    """A whole number of at least 1, as argparse's ``type=``: argparse
    refuses anything else in its own line, exit code 2."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f'invalid int value: {text!r}'
        ) from None
    if value < 1:
        raise argparse.ArgumentTypeError(f'must be at least 1, got {value}')
    return value


def add_max_tokens_argument(parser: argparse.ArgumentParser) -> None:
    """``--max-tokens``, the largest input a tool feeds the model."""
    parser.add_argument(
        '--max-tokens',
        type=positive_int,
        default=DEFAULT_MAX_TOKENS,
        help='refuse inputs of more tokens (default '
        f'{DEFAULT_MAX_TOKENS}, a 1024x1024 input at stride 16)',
    )


def add_image_arguments(parser: argparse.ArgumentParser, out_dir: str) -> None:
    """Positional image/config/checkpoint, ``--blocks``, ``--out-dir``,
    ``--device``, ``--max-tokens``, ``--cfg-options`` of the drawing
    tools."""
    parser.add_argument(
        'image', help='image file, or a folder of images (or class folders)'
    )
    parser.add_argument('config', help='model config file')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument(
        '--blocks',
        type=int,
        nargs='+',
        help='encoder blocks, from 0 (default: first, middle, last)',
    )
    parser.add_argument('--out-dir', default=out_dir, help='PNG folder')
    add_device_argument(parser)
    add_max_tokens_argument(parser)
    add_cfg_options(parser)


def read_model_config(
    config: str,
    cfg_options: Optional[dict] = None,
    checkpoint: Optional[str] = None,
) -> Config:
    """The config of a tool that only runs a model (inference, export,
    drawing, counting) with its ``--cfg-options``, checked before
    ``import t2t_plugin`` and before anything is written: the file and
    its options, an unknown arch, then a ``checkpoint`` file that is not
    there. Its ``custom_imports`` are not imported: the model's keys are
    checked after the import (``t2t_plugin.cli.options.check_model_keys``).
    Raises :class:`~t2t_preflight.errors.ConfigError` with one line.

    Args:
        config (str): The config file: a recipe, or the one a run saved in
            its work dir.
        cfg_options (dict, optional): ``--cfg-options``, merged as
            mmengine merges them.
        checkpoint (str, optional): The weights the tool reads.
    """
    cfg = load_config(config, cfg_options, import_custom_modules=False)
    problem = arch_problem(cfg) or (
        checkpoint is not None and missing_checkpoint(checkpoint)
    )
    if problem:
        raise ConfigError(problem)
    return cfg


def read_tool_config(
    line_start: str,
    config: str,
    cfg_options: Optional[dict] = None,
    checkpoint: Optional[str] = None,
) -> Optional[Config]:
    """:func:`read_model_config`, or None after its one line on stderr,
    begun with ``line_start`` (the tool's ``error: ``)."""
    try:
        return read_model_config(config, cfg_options, checkpoint)
    except ConfigError as error:
        print(f'{line_start}{error}', file=sys.stderr)
        return None


def parse_launch_args(
    parser: argparse.ArgumentParser,
    cfg_example: str,
    argv: Optional[Sequence[str]] = None,
) -> argparse.Namespace:
    """Add ``--cfg-options`` (``cfg_example`` in its help), ``--launcher``
    and ``--local_rank``, then parse the command line."""
    add_cfg_options(parser, cfg_example)
    parser.add_argument(
        '--launcher',
        choices=['none', 'pytorch', 'slurm', 'mpi'],
        default='none',
        help='how the processes were started (none: a single process)',
    )
    # torch.distributed.launch passes --local_rank (or --local-rank).
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    args = parser.parse_args(argv)
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    return args


def set_default_work_dir(
    cfg: Config, config_path: str, work_dir: Optional[str]
) -> None:
    """Set ``cfg.work_dir``: ``work_dir`` if given, else the config's own,
    else ``./work_dirs/<config name>`` as in every OpenMMLab toolbox."""
    if work_dir:
        cfg.work_dir = work_dir
    elif cfg.get('work_dir') is None:
        cfg.work_dir = osp.join(
            './work_dirs', osp.splitext(osp.basename(config_path))[0]
        )


def set_amp(cfg: Config) -> None:
    """Turn on mixed precision in ``cfg.optim_wrapper``: fp16 with dynamic
    loss scaling on CUDA, bf16 autocast on CPU."""
    optim_wrapper = cfg.optim_wrapper
    kind = optim_wrapper.get('type', 'OptimWrapper')
    if kind not in ('OptimWrapper', 'AmpOptimWrapper', 'AutocastOptimWrapper'):
        raise ValueError(
            f'--amp supports OptimWrapper configs, but this one uses {kind}; '
            'set mixed precision in the config instead.'
        )
    import torch

    if torch.cuda.is_available():
        optim_wrapper.type = 'AmpOptimWrapper'
        optim_wrapper.pop('device_type', None)  # AutocastOptimWrapper's
        optim_wrapper.setdefault('loss_scale', 'dynamic')
    else:
        # mmengine's AmpOptimWrapper asserts on CPU; CPU autocast is bf16.
        optim_wrapper.type = 'AutocastOptimWrapper'
        optim_wrapper.pop('loss_scale', None)
        optim_wrapper.dtype = 'bfloat16'


def enable_show(
    cfg: Config,
    show_dir: Optional[str],
    show: bool = False,
    interval: int = 1,
    wait_time: float = 2,
) -> None:
    """Switch on the visualization hook of any OpenMMLab toolbox; a
    relative ``show_dir`` is inside the work dir."""
    hook = cfg.get('default_hooks', {}).get('visualization')
    if hook is None:
        raise ValueError(
            '--show / --show-dir need a visualization hook in default_hooks.'
        )
    scope = cfg.get('default_scope')
    # An absolute folder: mmpretrain's hook would take a relative out_dir
    # from the current folder, and mmdet's joins test_out_dir to
    # <work_dir>/<timestamp>/ again on every test batch.
    out_dir = (
        osp.abspath(osp.join(cfg.work_dir, show_dir)) if show_dir else None
    )
    common = dict(interval=interval, show=show, wait_time=wait_time)
    if scope == 'mmpretrain':
        hook.update(enable=True, out_dir=out_dir, **common)
        if str(hook.get('type')).split('.')[-1] == 'VisualizationHook':
            # the same hook, drawing small images at a readable size
            hook.type = 'ReadableVisualizationHook'
        return
    hook.update(draw=True, **common)
    if out_dir and scope == 'mmseg':
        cfg.visualizer.save_dir = out_dir  # mmseg's hook writes there
    elif out_dir:
        hook.test_out_dir = out_dir


def enable_tta(cfg: Config) -> None:
    """Test with test-time augmentation, as mmpretrain's ``--tta`` does:
    the config's ``tta_model`` and ``tta_pipeline``, else (classification
    only) the average of the scores of the image and its horizontal flip.
    """
    if 'tta_model' not in cfg or 'tta_pipeline' not in cfg:
        if cfg.get('default_scope', 'mmpretrain') != 'mmpretrain':
            raise ValueError(
                '--tta needs tta_model and tta_pipeline in a '
                'detection or segmentation config.'
            )
        cfg.setdefault('tta_model', dict(type='mmpretrain.AverageClsScoreTTA'))
        if 'tta_pipeline' not in cfg:
            pipeline = copy.deepcopy(cfg.test_dataloader.dataset.pipeline)
            flips = [dict(type='RandomFlip', prob=p) for p in (1.0, 0.0)]
            pipeline[-1] = dict(
                type='TestTimeAug', transforms=[flips, [pipeline[-1]]]
            )
            cfg.tta_pipeline = pipeline
    cfg.model = ConfigDict(**cfg.tta_model, module=cfg.model)
    cfg.test_dataloader.dataset.pipeline = cfg.tta_pipeline


def load_checked(
    args: argparse.Namespace,
    merge_args: Callable[[Config, argparse.Namespace], Config],
    dataloaders: list[str],
) -> tuple[Optional[Config], int]:
    """The config of ``args.config`` with its ``--cfg-options`` merged and
    the tool's other options applied (``merge_args``), checked by the
    pre-flight (:func:`~t2t_preflight.checks.config_problem`) for the
    ``dataloaders`` the tool reads, then its ``custom_imports`` imported,
    its datasets built once, found and their class folders counted
    (``find_missing_data``,
    ``class_folder_problem`` of :mod:`t2t_preflight.inputs`); with exit
    code 0. Else None and the exit code, after the lines saying why: a
    missing or broken file, an option that does not apply (2), a mistake
    of the config or its inputs (1). A variable given as an option that
    does not reach its keys is warned of by the Runner's check
    (:func:`~t2t_preflight.check_config`), here only for a refused run."""
    try:
        cfg = load_config(
            args.config, args.cfg_options, import_custom_modules=False,
            warn=False,
        )  # fmt: skip
        cfg = merge_args(cfg, args)
    except ConfigError as error:
        print(error, file=sys.stderr)
        return None, 2
    except (ValueError, KeyError) as error:
        print(f'Invalid options for {args.config}: {error}', file=sys.stderr)
        return None, 2
    # what the config and the disk answer alone, before the imports
    problem = checks.config_problem(cfg, 'train_dataloader' in dataloaders)
    problems, code = ([problem] if problem else []), 1
    if not problems:
        try:
            import_custom_modules(cfg)
        except ConfigError as error:
            problems, code = [str(error)], 2
    if not problems:
        built = built_datasets(cfg, dataloaders)
        problems = find_missing_data(cfg, built)
        problem = not problems and class_folder_problem(cfg, built)
        problems = problems or ([problem] if problem else [])
    if not problems:
        return cfg, 0
    warn_stale_variables(cfg)
    print('\n'.join(problems), file=sys.stderr)
    return None, code
