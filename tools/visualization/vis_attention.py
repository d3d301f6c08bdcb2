"""Where the class token looks: attention of chosen blocks over the image.

The attention rows of the blocks (``t2t_plugin.analysis.cls_attention_maps``)
averaged over heads (``--per-head`` adds one panel per head), laid over the
image after the test pipeline. One PNG per image.

Example::

    python tools/visualization/vis_attention.py demo.jpg \\
        configs/t2t-vit-14_8xb64_in1k.py checkpoints/t2t-vit-14_in1k.pth \\
        --blocks 0 6 13 --out-dir work_dirs/vis_attention
"""

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

from t2t_plugin.analysis import cls_attention_maps
from t2t_plugin.analysis.figures import overlay, save_panel_grid
from t2t_plugin.cli.image_batches import add_image_arguments, draw_images
from t2t_plugin.cli.model_loading import preprocess_image


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
    model,
    image: Path,
    blocks: Sequence[int],
    out_dir: Path,
    args: argparse.Namespace,
) -> list[Path]:
    """Write the attention figure of ``image``; return the PNG."""
    inputs, picture = preprocess_image(model, image)
    maps = cls_attention_maps(model.backbone, inputs, blocks)
    alpha = args.alpha
    if args.per_head:
        rows = [
            [
                (
                    f'block {index}: mean',
                    overlay(picture, heads[0].mean(0), alpha),
                )
            ]
            + [
                (f'head {head}', overlay(picture, heads[0, head], alpha))
                for head in range(heads.shape[1])
            ]
            for index, heads in maps.items()
        ]
        rows.insert(0, [('input', picture)])
    else:
        rows = [
            [('input', picture)]
            + [
                (f'block {index}', overlay(picture, heads[0].mean(0), alpha))
                for index, heads in maps.items()
            ]
        ]
    title = f'{image.name}: class-token attention'
    return [
        save_panel_grid(rows, out_dir / f'{image.stem}_attention.png', title)
    ]


def main(argv: Optional[Sequence[str]] = None) -> int:
    return draw_images(parse_args(argv), draw_attention, needs_cls_token=True)


if __name__ == '__main__':
    sys.exit(main())
