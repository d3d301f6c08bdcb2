"""What the visualisation tools share: their arguments and their loop.

Each tool draws one kind of figure per image; reading the model, checking
the chosen blocks once, making the output folder, the progress bar and the
rule that one bad image does not stop the others are the same for all.
"""

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Callable

from rich.console import Console
from rich.progress import track

from ..analysis.token_maps import default_block_indices, resolve_block_indices
from ..engine import CheckpointError, CheckpointMismatchError, ConfigError
from .model_loading import (
    IMAGE_ERRORS,
    check_writable_folder,
    list_images,
    load_model,
)

# draw(model, image, blocks, out_dir) -> the PNG files written
DrawFunction = Callable[..., Sequence[Path]]


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
    """Run ``draw`` on every image of ``args.image``; print the PNG paths.

    Args:
        args: Parsed :func:`add_image_arguments` arguments.
        draw: ``draw(model, image, blocks, out_dir)`` returning the PNGs.
        needs_cls_token: Refuse backbones without a class token.

    Returns:
        int: The exit code: 0, or 1 after a user mistake or a failed image
        (each reported in one line on stderr).
    """
    console = Console(soft_wrap=True)
    out_dir = Path(args.out_dir)
    try:
        images: list[Path] = list_images(args.image)
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
    # SyntaxError, ImportError: a broken config or a missing toolbox
    except (
        FileNotFoundError,
        ValueError,
        TypeError,
        SyntaxError,
        ImportError,
        CheckpointError,
        CheckpointMismatchError,
        ConfigError,
    ) as error:
        print(f'error: {error}', file=sys.stderr)
        return 1
    failed = []
    for image in track(
        images,
        description='Drawing',
        console=console,
        transient=True,
        disable=len(images) == 1 or not console.is_terminal,
    ):
        try:
            paths = draw(model, image, blocks, out_dir)
        except IMAGE_ERRORS as error:
            # one bad image (unreadable, of a size the model cannot take)
            # does not stop the others
            failed.append(image)
            message = str(error)
            if str(image) not in message:
                message = f'{image}: {message}'
            print(f'error: {message}', file=sys.stderr)
            continue
        for path in paths:
            console.print(str(path), markup=False, highlight=False)
    if failed and len(images) > 1:
        print(
            f'error: {len(failed)} of {len(images)} images failed: '
            + ', '.join(path.name for path in failed),
            file=sys.stderr,
        )
    return 1 if failed else 0
