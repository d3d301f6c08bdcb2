"""Where the model looks: the class token's attention of chosen blocks, or,
for a model without a class token, the weights its attention-pooling head
gives the tokens.

Averaged over heads (``--per-head`` adds one panel per head), laid over the
image after the test pipeline (small images scaled up); one PNG per image.
Examples: docs/analysis.md.
"""

import argparse
import inspect
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

from mmengine.config import Config

# The options and the config are read and checked before the model
# imports (seconds), as in tools/train.py.
from t2t_preflight.arguments import (
    add_image_arguments,
    read_tool_config,
)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog='vis_attention.py',
        description="Overlay the class token's attention of chosen encoder "
        "blocks (or an attention-pooling head's token weights) on the image.",
    )
    add_image_arguments(parser, 'work_dirs/vis_attention')
    parser.add_argument(
        '--per-head',
        action='store_true',
        help='one row per block: the head average, then each head',
    )
    parser.add_argument(
        '--alpha',
        type=float,
        default=0.5,
        help='opacity of the attention map (default 0.5)',
    )
    args = parser.parse_args(argv)
    if not 0 <= args.alpha <= 1:
        parser.error('--alpha must be between 0 and 1')
    return args


def uses_class_token(cfg: Config) -> bool:
    from t2t_plugin.models import T2TViT

    backbone = cfg.model.get('backbone') or {}
    default = inspect.signature(T2TViT).parameters['with_cls_token'].default
    return backbone.get('with_cls_token', default)


def check_config(cfg: Config, args: argparse.Namespace) -> None:
    """A model with a class token, or with an attention-pooling head (and
    then no block options), read from the config before the weights."""
    if uses_class_token(cfg):
        return
    head = cfg.model.get('head') or {}
    if head.get('pool') != 'attention':
        raise ValueError(
            f'{args.config}: the backbone has no class token '
            '(with_cls_token=False) and the head does not pool with '
            "attention (pool='attention'): there is no attention to draw."
        )
    if args.blocks or args.per_head:
        raise ValueError(
            f'{args.config}: --blocks and --per-head draw the class token, '
            'which this backbone does not have; leave them out to draw the '
            "weights of the head's attention pooling."
        )


def draw_attention(
    model,
    image: Path,
    blocks: Sequence[int],
    args: argparse.Namespace,
    stem: str,
) -> list[Path]:
    from t2t_plugin.analysis import attention_pool_maps, cls_attention_maps
    from t2t_plugin.analysis.figures import overlay, save_panel_grid, upscale
    from t2t_plugin.apis import preprocess_image

    inputs, picture = preprocess_image(model, image)
    picture = upscale(picture)

    def laid(attention):
        return overlay(picture, attention, args.alpha)

    if not model.backbone.with_cls_token:
        weights = attention_pool_maps(model, inputs)[0]
        rows = [[('input', picture), ('pooling weights', laid(weights))]]
        title = f'{image.name}: weights of the attention-pooling head'
    else:
        maps = cls_attention_maps(model.backbone, inputs, blocks)
        means = [
            (f'block {i}', laid(heads[0].mean(0))) for i, heads in maps.items()
        ]
        if args.per_head:
            rows = [[('input', picture)]] + [
                [(f'{name}: mean', mean)]
                + [
                    (f'head {h}', laid(heads[0, h]))
                    for h in range(heads.shape[1])
                ]
                for (name, mean), heads in zip(means, maps.values())
            ]
        else:
            rows = [[('input', picture)] + means]
        title = f'{image.name}: class-token attention'
    return [
        save_panel_grid(
            rows, Path(args.out_dir) / f'{stem}_attention.png', title
        )
    ]


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    cfg = read_tool_config(
        'error: ', args.config, args.cfg_options, args.checkpoint
    )
    if cfg is None:
        return 1
    from t2t_plugin.cli.image_tools import draw_images

    return draw_images(
        'vis_attention.py', args, cfg, draw_attention, check_config
    )


if __name__ == '__main__':
    sys.exit(main())
