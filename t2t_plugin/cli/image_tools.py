"""The command line of the tools that read images (``tools/infer.py``,
``tools/visualization/``): their arguments, and a loop over the images in
which a bad image is one line on stderr and the others go on."""

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Callable, Optional

from mmengine.config import Config
from rich.console import Console

from t2t_preflight.config import few

from ..analysis.token_maps import check_block_indices, default_block_indices
from ..apis import (
    IMAGE_ERRORS,
    IMAGE_SUFFIXES,
    check_token_budget,
    check_writable,
    config_num_layers,
    image_stem,
    list_images,
    load_model,
    non_image_files,
)
from .options import check_arguments, check_model_keys
from .reporting import LOAD_ERRORS, one_line, progress, running_line


def find_images(path: str) -> list[Path]:
    """The images of :func:`~t2t_plugin.apis.list_images`, and one line on
    stderr naming the files of a folder left out as not images, if any: a
    count that silently skipped them would look complete."""
    images, folder = list_images(path), Path(path)
    left_out = non_image_files(folder) if folder.is_dir() else []
    if left_out:
        names = few(file.relative_to(folder) for file in left_out)
        print(
            f'warning: {len(left_out)} file(s) of {folder} left out, not of '
            f'an image kind read here ({", ".join(IMAGE_SUFFIXES)}): {names}',
            file=sys.stderr,
        )
    return images


def for_each_image(
    images: Sequence[Path],
    work: Callable[[Path], None],
    console: Optional[Console] = None,
    description: str = 'Drawing',
) -> int:
    """Run ``work`` on every image (with a progress bar on ``console``);
    the exit code: 1 if any image failed, each failure and their count
    reported in one line on stderr."""
    failed = []
    steps = (
        images if console is None else progress(images, description, console)
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


def draw_images(
    prog: str,
    args: argparse.Namespace,
    cfg: Config,
    draw: Callable[..., Sequence[Path]],
    check_config: Optional[
        Callable[[Config, argparse.Namespace], None]
    ] = None,
) -> int:
    """The tool ``prog``: run ``draw(model, image, blocks, args, stem)`` on
    every image of
    ``args.image`` (:func:`~t2t_preflight.arguments.add_image_arguments`;
    ``stem`` of :func:`~t2t_plugin.apis.image_stem`) within the token
    budget, and print the PNG paths. ``cfg``: the tool's config as
    :func:`~t2t_preflight.arguments.read_model_config` read it.
    ``check_config(cfg, args)`` raises ValueError for a config the tool
    cannot draw, before the model is loaded. Returns the exit code."""
    code = check_arguments(prog, args)
    if code:
        return code
    console = Console(soft_wrap=True)
    try:
        images = find_images(args.image)
        # the model's keys, then what the tool draws: no --out-dir is
        # left behind
        check_model_keys(cfg)
        if check_config is not None:
            check_config(cfg, args)
        # checked once here, before the weights are read
        num_layers = config_num_layers(cfg)
        blocks = check_block_indices(
            num_layers, args.blocks or default_block_indices(num_layers)
        )
        # drawn into the image folder, a PNG is an image of the next run
        # and can be replaced by that run's drawing
        kind = 'the image folder' if Path(args.image).is_dir() else 'the image'
        check_writable(args.out_dir, '--out-dir', inputs={kind: args.image})
        model = load_model(cfg, args.checkpoint, args.device)
    except LOAD_ERRORS as error:
        line = running_line(error, args.config, args.checkpoint)
        print(f'error: {line}', file=sys.stderr)
        return 1

    def work(image: Path) -> None:
        check_token_budget(model, image, args.max_tokens)
        stem = image_stem(image, args.image)
        for path in draw(model, image, blocks, args, stem):
            console.print(str(path), markup=False, highlight=False)

    return for_each_image(images, work, console)
