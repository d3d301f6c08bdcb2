"""The image loop of ``tools/infer.py`` and the visualisation tools: one
bad image does not stop the others, and each mistake is one line. The
visualisation tools also share their arguments and the checks made once
before the first image (model, chosen blocks, output folder).
"""

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Callable, Optional

from rich.console import Console
from rich.progress import track

from ..analysis.token_maps import default_block_indices, resolve_block_indices
from .model_loading import (
    IMAGE_ERRORS,
    check_writable_folder,
    list_images,
    load_model,
)
from .reporting import LOAD_ERRORS, one_line

# draw(model, image, blocks, out_dir, args) -> the PNG files written
DrawFunction = Callable[..., Sequence[Path]]


def for_each_image(
    images: Sequence[Path],
    work: Callable[[Path], None],
    console: Optional[Console] = None,
) -> int:
    """Run ``work`` on every image (with a progress bar on ``console``);
    the exit code: 1 if any image failed, each failure and their count
    reported in one line on stderr."""
    failed = []
    steps = images
    if console is not None:
        steps = track(
            images,
            description='Drawing',
            console=console,
            transient=True,
            disable=len(images) == 1 or not console.is_terminal,
        )
    for image in steps:
        try:
            work(image)
        except IMAGE_ERRORS as error:
            failed.append(image)
            message = one_line(error)
            if str(image) not in message:
                message = f'{image}: {message}'
            print(f'error: {message}', file=sys.stderr)
    if failed and len(images) > 1:
        print(
            f'error: {len(failed)} of {len(images)} images failed: '
            + ', '.join(path.name for path in failed),
            file=sys.stderr,
        )
    return 1 if failed else 0


def add_image_arguments(parser: argparse.ArgumentParser, out_dir: str) -> None:
    """Positional image/config/checkpoint, ``--blocks``, ``--out-dir``,
    ``--device``."""
    parser.add_argument('image', help='image file, or a folder of images')
    parser.add_argument('config', help='model config file')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument(
        '--blocks',
        type=int,
        nargs='+',
        help='encoder blocks, from 0 (default: first, middle, last)',
    )
    parser.add_argument('--out-dir', default=out_dir, help='PNG folder')
    parser.add_argument('--device', default='cpu', help="e.g. 'cuda:0'")


def draw_images(
    args: argparse.Namespace, draw: DrawFunction, needs_cls_token: bool = False
) -> int:
    """Run ``draw(model, image, blocks, out_dir, args)`` on every image of
    ``args.image`` (:func:`add_image_arguments`) and print the PNG paths;
    ``needs_cls_token`` refuses backbones without a class token. Returns
    the exit code."""
    console = Console(soft_wrap=True)
    out_dir = Path(args.out_dir)
    try:
        images = list_images(args.image)
        check_writable_folder(out_dir, '--out-dir')
        model = load_model(args.config, args.checkpoint, args.device)
        if needs_cls_token and not model.backbone.with_cls_token:
            raise ValueError(
                'The class-token attention needs a backbone '
                'with with_cls_token=True.'
            )
        # checked once here, rather than failing on every image
        blocks = resolve_block_indices(
            model.backbone,
            args.blocks or default_block_indices(len(model.backbone.encoder)),
        )
    except LOAD_ERRORS as error:
        print(f'error: {error}', file=sys.stderr)
        return 1

    def work(image: Path) -> None:
        for path in draw(model, image, blocks, out_dir, args):
            console.print(str(path), markup=False, highlight=False)

    return for_each_image(images, work, console)
