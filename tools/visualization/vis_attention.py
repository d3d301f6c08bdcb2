"""Where the class token looks: attention of chosen blocks over the image.

Averaged over heads (``--per-head`` adds one panel per head), laid over the
image after the test pipeline; one PNG per image. Examples: docs/analysis.md.
"""

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

from t2t_plugin.analysis import cls_attention_maps
from t2t_plugin.analysis.figures import overlay, save_panel_grid
from t2t_plugin.cli.model_loading import (
    add_image_arguments,
    draw_images,
    preprocess_image,
)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Overlay the class token's attention of chosen encoder "
        'blocks on the image.'
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


def draw_attention(
    model, image: Path, blocks: Sequence[int], args: argparse.Namespace
) -> list[Path]:
    inputs, picture = preprocess_image(model, image)
    maps = cls_attention_maps(model.backbone, inputs, blocks)

    def laid(attention):
        return overlay(picture, attention, args.alpha)

    means = [
        (f'block {i}', laid(heads[0].mean(0))) for i, heads in maps.items()
    ]
    if args.per_head:
        rows = [[('input', picture)]] + [
            [(f'{name}: mean', mean)]
            + [(f'head {h}', laid(heads[0, h])) for h in range(heads.shape[1])]
            for (name, mean), heads in zip(means, maps.values())
        ]
    else:
        rows = [[('input', picture)] + means]
    title = f'{image.name}: class-token attention'
    return [
        save_panel_grid(
            rows, Path(args.out_dir) / f'{image.stem}_attention.png', title
        )
    ]


def main(argv: Optional[Sequence[str]] = None) -> int:
    return draw_images(parse_args(argv), draw_attention, needs_cls_token=True)


if __name__ == '__main__':
    sys.exit(main())
