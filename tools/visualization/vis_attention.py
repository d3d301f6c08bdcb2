"""Where the class token looks: attention of chosen blocks over the image.

The attention rows come from the blocks' own q, k and scale through the
same fused kernel the model runs (``t2t_plugin.analysis.cls_attention_maps``),
averaged over heads (``--per-head`` adds one panel per head), smoothly
resized and laid over the image as the network sees it (after the test
pipeline). One PNG per image.

Example::

    python tools/visualization/vis_attention.py demo.jpg \\
        configs/t2t-vit-14_8xb64_in1k.py checkpoints/t2t-vit-14_in1k.pth \\
        --blocks 0 6 13 --out-dir work_dirs/vis_attention
"""
import argparse
import sys
from pathlib import Path
from typing import List, Optional, Sequence

from rich.console import Console
from rich.progress import track

from t2t_plugin.analysis import (
    cls_attention_maps,
    default_block_indices,
    resolve_block_indices,
)
from t2t_plugin.analysis.figures import overlay, save_panel_grid
from t2t_plugin.apis import init_model, list_images, preprocess_image


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Overlay the class token's attention of chosen encoder "
        'blocks on the image.')
    parser.add_argument('image', help='image file, or a folder of images')
    parser.add_argument('config', help='model config file')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument(
        '--blocks',
        type=int,
        nargs='+',
        help='encoder blocks, from 0 (default: first, middle, last)')
    parser.add_argument(
        '--per-head',
        action='store_true',
        help='one row per block: the head average, then each head')
    parser.add_argument(
        '--alpha',
        type=float,
        default=0.5,
        help='opacity of the attention map (default 0.5)')
    parser.add_argument(
        '--out-dir', default='work_dirs/vis_attention', help='PNG folder')
    parser.add_argument('--device', default='cpu', help="e.g. 'cuda:0'")
    args = parser.parse_args(argv)
    if not 0 <= args.alpha <= 1:
        parser.error('--alpha must be between 0 and 1')
    return args


def draw_attention(model, image: Path, blocks: Sequence[int], per_head: bool,
                   alpha: float, out_dir: Path) -> Path:
    """Write the attention figure of ``image``; return the PNG."""
    inputs, picture = preprocess_image(model, image)
    maps = cls_attention_maps(model.backbone, inputs, blocks)
    if per_head:
        rows = [[(f'block {index}: mean', overlay(
            picture, heads[0].mean(0), alpha))] + [
                (f'head {head}', overlay(picture, heads[0, head], alpha))
                for head in range(heads.shape[1])
            ] for index, heads in maps.items()]
        rows.insert(0, [('input', picture)])
    else:
        rows = [[('input', picture)] + [
            (f'block {index}', overlay(picture, heads[0].mean(0), alpha))
            for index, heads in maps.items()
        ]]
    title = f'{image.name}: class-token attention'
    return save_panel_grid(rows, out_dir / f'{image.stem}_attention.png',
                           title)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    console = Console(soft_wrap=True)
    out_dir = Path(args.out_dir)
    try:
        images: List[Path] = list_images(args.image)
        model = init_model(args.config, args.checkpoint, args.device)
        if not model.backbone.with_cls_token:
            raise ValueError('The class-token attention needs a backbone '
                             'with with_cls_token=True.')
        # checked once here, rather than failing on every image
        blocks = resolve_block_indices(
            model.backbone, args.blocks
            or default_block_indices(len(model.backbone.encoder)))
    except (FileNotFoundError, ValueError, TypeError) as error:
        print(f'error: {error}', file=sys.stderr)
        return 1
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        print(f'error: cannot make the --out-dir folder {out_dir} '
              f'({error.strerror}); give a folder path.', file=sys.stderr)
        return 1
    failed = 0
    for image in track(images, description='Drawing', console=console,
                       transient=True,
                       disable=len(images) == 1 or not console.is_terminal):
        try:
            path = draw_attention(model, image, blocks, args.per_head,
                                  args.alpha, out_dir)
        except (OSError, ValueError) as error:
            # one bad image (unreadable, of a size the model cannot take)
            # does not stop the others
            failed += 1
            message = str(error)
            if str(image) not in message:
                message = f'{image}: {message}'
            print(f'error: {message}', file=sys.stderr)
            continue
        console.print(str(path), markup=False, highlight=False)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
