"""Parameters and MACs of a T2T-ViT config, attention products counted.

Classifiers are compared with the paper's figures where it has them;
detectors and segmentors get the backbone, then the whole model. Examples:
docs/analysis.md.
"""

import argparse
import math
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Optional

from mmengine.config import Config

# The options and the config are read and checked before the model
# imports (seconds), as in tools/train.py.
from t2t_preflight.arguments import (
    add_cfg_options,
    add_max_tokens_argument,
    read_tool_config,
)
from t2t_preflight.config import dataset_configs, entry

if TYPE_CHECKING:
    import torch
    from rich.console import Console

    from t2t_plugin.analysis import ModelComplexity


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog='get_flops.py', description=__doc__.splitlines()[0]
    )
    parser.add_argument('config', nargs='?', help='model config file')
    parser.add_argument(
        '--shape',
        type=int,
        nargs='+',
        help="input size: H [W] (default: the config's test size, else the "
        'size the backbone is built for)',
    )
    parser.add_argument(
        '--all',
        action='store_true',
        help="count every arch of the paper's tables at its resolution",
    )
    add_max_tokens_argument(parser)
    add_cfg_options(parser)
    args = parser.parse_args(argv)
    if bool(args.config) == args.all:
        parser.error('give either a CONFIG or --all')
    if args.shape and len(args.shape) not in (1, 2):
        parser.error('--shape takes H or H W')
    if args.shape and min(args.shape) < 1:
        parser.error(f'--shape sides must be at least 1, got {args.shape}')
    return args


def build_classifier(arch: str, img_size: int) -> 'torch.nn.Module':
    """An ImageNet classifier of ``arch``, built for ``img_size``."""
    from mmpretrain.registry import MODELS

    from t2t_plugin.models import T2TViT

    embed_dims = T2TViT.arch_zoo[arch]['embed_dims']
    backbone = dict(type='T2TViT', arch=arch, img_size=img_size)
    head = dict(type='T2TClsHead', num_classes=1000, in_channels=embed_dims)
    return MODELS.build(
        dict(type='ImageClassifier', backbone=backbone, head=head)
    )


def _giga(value: float, unit_of: Optional[float] = None) -> str:
    """``value`` in G, or in M below 1G (of ``unit_of``: one unit a line)."""
    if (value if unit_of is None else unit_of) < 1e9:
        return f'{value / 1e6:.2f}M'
    return f'{value / 1e9:.2f}G'


def _versus_paper(result: 'ModelComplexity', paper: float) -> str:
    return f'{100 * (result.macs / paper - 1):+.1f}%'


def run_all(console: 'Console') -> None:
    from rich.table import Table

    from t2t_plugin.analysis import PAPER_MACS, count_complexity
    from t2t_plugin.cli.reporting import progress

    table = Table('arch', title='T2T-ViT complexity (1000 classes, one image)')
    ours = ('input', 'params', 'MACs', 'of which attention')
    for column in (*ours, 'paper MACs', 'ours vs paper'):
        table.add_column(column, justify='right')
    archs = list(PAPER_MACS.items())
    for (arch, side), paper in progress(archs, 'Counting', console, True):
        result = count_complexity(build_classifier(arch, side), (side, side))
        table.add_row(
            arch,
            f'{side}x{side}',
            f'{result.params / 1e6:.2f}M',
            _giga(result.macs),
            _giga(result.attention_macs, result.macs),
            _giga(paper),
            _versus_paper(result, paper),
        )
    console.print(table)


def _detector_inputs(
    model: 'torch.nn.Module', shape: tuple[int, int]
) -> Optional[dict[str, Any]]:
    """The data samples an mmdet detector needs beside the images."""
    try:
        from mmdet.models.detectors import BaseDetector
        from mmdet.structures import DetDataSample
    except ImportError:
        return None
    if not isinstance(model, BaseDetector):
        return None
    # the image sizes that the test pipeline would record
    sizes = ('img_shape', 'ori_shape', 'pad_shape', 'batch_input_shape')
    meta = dict(dict.fromkeys(sizes, shape), scale_factor=(1.0, 1.0))
    return dict(data_samples=[DetDataSample(metainfo=meta)], mode='tensor')


def _counts(result: 'ModelComplexity') -> str:
    return (
        f'{result.params / 1e6:.2f}M params ({result.params:,}), '
        f'{_giga(result.macs)} MACs (attention products '
        f'{_giga(result.attention_macs, result.macs)})'
    )


def _pair_hw(size: Any) -> Optional[tuple[int, int]]:
    """``(H, W)`` of an OpenMMLab size: an int, or ``(W, H)``."""
    if isinstance(size, int):
        return size, size
    if (
        isinstance(size, (list, tuple))
        and len(size) == 2
        and all(isinstance(side, int) for side in size)
    ):
        return size[1], size[0]
    return None


def config_test_shape(cfg: Config) -> Optional[tuple[int, int]]:
    """The input size ``(H, W)`` a config tests at, or None if unknown:
    the preprocessor's fixed ``size`` (mmseg's crop), else the test
    pipeline's last resize or crop (a keep-ratio ``Resize``: the landscape
    box it fits images into) padded to the preprocessor's size divisor."""
    preprocessor = cfg.model.get('data_preprocessor') or {}
    if fixed := _pair_hw(preprocessor.get('size')):
        return fixed
    wrapped = dataset_configs('', entry(cfg, 'test_dataloader', 'dataset'))
    # the datasets inside the wrappers, which read the images: the first
    readers = [d for _, d in wrapped if not {'dataset', 'datasets'} & set(d)]
    shape = None
    for transform in readers[0].get('pipeline', ()) if readers else ():
        kind = str(transform.get('type', '')).split('.')[-1]
        if 'Crop' in kind:
            shape = _pair_hw(transform.get('crop_size')) or shape
        elif kind == 'Resize':
            scale = _pair_hw(transform.get('scale'))
            if scale and transform.get('keep_ratio'):
                scale = (min(scale), max(scale))
            shape = scale or shape
    if shape is None:
        return None
    divisor = (
        preprocessor.get('pad_size_divisor')
        or preprocessor.get('test_cfg', {}).get('size_divisor')
        or 1
    )
    return tuple(math.ceil(side / divisor) * divisor for side in shape)


def run_config(
    args: argparse.Namespace, cfg: Config, console: 'Console'
) -> None:
    """Count the model of ``cfg`` (read by
    :func:`~t2t_preflight.arguments.read_model_config`)."""
    from mmpretrain.registry import MODELS

    from t2t_plugin.analysis import PAPER_MACS, count_complexity
    from t2t_plugin.apis import check_shape_budget, config_stride
    from t2t_plugin.cli.options import check_model_keys

    check_model_keys(cfg)
    shape = (args.shape[0], args.shape[-1]) if args.shape else None
    if shape:  # before a model is built to run at that size
        check_shape_budget(shape, config_stride(cfg), args.max_tokens)
    model = MODELS.build(cfg.model)
    backbone = getattr(model, 'backbone', model)
    t2t = getattr(backbone, 'tokens_to_token', None)
    shape = shape or config_test_shape(cfg)
    if shape is None and t2t is not None:
        shape = tuple(side * t2t.total_stride for side in t2t.init_out_size)
    shape = shape or (224, 224)
    in_channels = cfg.model.get('backbone', {}).get('in_channels', 3)
    lines = [
        f'Config      {args.config}',
        f'Input       {in_channels}x{shape[0]}x{shape[1]}',
    ]
    whole = ''
    classifier = isinstance(model, MODELS.get('ImageClassifier'))
    if classifier or backbone is model:
        result = count_complexity(model, shape, in_channels)
    else:
        # a detector or segmentor: its backbone, then the whole, from one
        # trace of the whole where it runs on images alone
        whole = f' (whole {type(model).__name__})'
        failure = []
        try:
            result = count_complexity(
                model,
                shape,
                in_channels,
                _detector_inputs(model, shape),
                parts=('backbone',),
            )
            alone = result.parts['backbone']
        except (TypeError, AttributeError, KeyError, IndexError) as error:
            result = None
            alone = count_complexity(backbone, shape, in_channels)
            failure.append(
                f'Whole model not counted: a forward pass of '
                f'{type(model).__name__} on images alone failed '
                f'({type(error).__name__}); the backbone is counted above.'
            )
        name = type(backbone).__name__
        lines += [f'Backbone    {name}: {_counts(alone)}', *failure]
    if result is not None:
        lines += [
            f'Params      {result.params / 1e6:.2f}M ({result.params:,})'
            f'{whole}',
            f'MACs        {_giga(result.macs)} (attention products '
            f'{_giga(result.attention_macs, result.macs)}){whole}',
        ]
    arch = cfg.model.get('backbone', {}).get('arch')
    # the paper counts 1000-class ImageNet classifiers of its archs only
    if (
        classifier
        and isinstance(arch, str)
        and shape[0] == shape[1]
        and getattr(getattr(model, 'head', None), 'num_classes', 0) == 1000
    ):
        paper = PAPER_MACS.get(
            (arch.lower().replace('t2t-vit-', ''), shape[0])
        )
        if paper is not None:
            lines.append(
                f'Paper MACs  {_giga(paper)} '
                f'(ours {_versus_paper(result, paper)})'
            )
    console.print('\n'.join(lines), markup=False, highlight=False)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    cfg = None
    if args.config:
        cfg = read_tool_config('error: ', args.config, args.cfg_options)
        if cfg is None:
            return 1
    from rich.console import Console

    from t2t_plugin.apis import ArgumentRefused
    from t2t_plugin.cli.options import check_arguments
    from t2t_plugin.cli.reporting import LOAD_ERRORS

    code = check_arguments('get_flops.py', args)
    if code:
        return code
    console = Console(soft_wrap=True)
    try:
        if cfg is None:
            run_all(console)
        else:
            run_config(args, cfg, console)
    except ArgumentRefused as error:
        print(f'get_flops.py: error: {error}', file=sys.stderr)
        return 2
    except (*LOAD_ERRORS, KeyError) as error:
        print(f'error: {error}', file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
