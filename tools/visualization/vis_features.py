"""Channel grids of T2T-ViT token maps, as in Fig. 2 of the paper.

The maps after the T2T layers, the projected tokens and chosen encoder
blocks, one PNG each, every channel min-max scaled on its own. Examples:
docs/analysis.md.
"""

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

# The options and the config are read and checked before the model
# imports (seconds), as in tools/train.py.
from t2t_preflight.arguments import (
    add_image_arguments,
    read_tool_config,
)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog='vis_features.py',
        description='Draw the token maps of a T2T-ViT (after the T2T '
        'module and after chosen encoder blocks) as channel grids.',
    )
    add_image_arguments(parser, 'work_dirs/vis_features')
    parser.add_argument(
        '--channels',
        type=int,
        default=36,
        help='channels per map, the first ones (default 36)',
    )
    parser.add_argument(
        '--panel-size',
        type=int,
        default=64,
        help='side of one channel in pixels (default 64)',
    )
    args = parser.parse_args(argv)
    if args.channels < 1 or args.panel_size < 1:
        parser.error('--channels and --panel-size must be positive')
    return args


def draw_features(
    model,
    image: Path,
    blocks: Sequence[int],
    args: argparse.Namespace,
    stem: str,
) -> list[Path]:
    from t2t_plugin.analysis import collect_token_maps
    from t2t_plugin.analysis.figures import (
        colorize,
        resize_map,
        save_panel_grid,
    )
    from t2t_plugin.apis import preprocess_image

    inputs, picture = preprocess_image(model, image)
    maps = collect_token_maps(model.backbone, inputs, blocks)
    written = []
    for name, feature_map in maps.items():
        feature_map = feature_map[0]
        count = min(args.channels, feature_map.shape[0])
        cols = math.ceil(math.sqrt(count))
        size = (args.panel_size, args.panel_size)
        panels = [
            (f'ch {i}', colorize(resize_map(feature_map[i], size, 'nearest')))
            for i in range(count)
        ]
        rows = [
            panels[start : start + cols] for start in range(0, count, cols)
        ]
        height, width = feature_map.shape[1:]
        stride = picture.shape[0] // height
        title = (
            f'{image.name} {name}: {height}x{width}, stride {stride}, '
            f'{count}/{feature_map.shape[0]} channels'
        )
        written.append(
            save_panel_grid(
                rows, Path(args.out_dir) / f'{stem}_{name}.png', title
            )
        )
    return written


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    cfg = read_tool_config(
        'error: ', args.config, args.cfg_options, args.checkpoint
    )
    if cfg is None:
        return 1
    from t2t_plugin.cli.image_tools import draw_images

    return draw_images('vis_features.py', args, cfg, draw_features)


if __name__ == '__main__':
    sys.exit(main())
