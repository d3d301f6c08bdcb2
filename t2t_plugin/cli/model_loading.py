"""Models and images of the inference and visualisation tools: weights
refused if not finite and loaded strictly (``get_model`` only warns), a
token budget per image, and one bad image not stopping the others."""

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Callable, Optional, Union

import cv2
import numpy as np
import torch
from mmcv.image import imread
from mmengine.config import Config
from mmengine.dataset import Compose, pseudo_collate
from mmpretrain.apis import ModelHub, get_model
from mmpretrain.datasets import remove_transform
from mmpretrain.datasets.categories import IMAGENET_CATEGORIES
from mmpretrain.registry import TRANSFORMS
from PIL import Image
from rich.console import Console
from torch import nn

from ..analysis.token_maps import check_block_indices, default_block_indices
from ..engine.checkpoint import (
    load_state_dict_strictly,
    read_checkpoint,
)
from ..engine.config import load_config
from .input_checks import (
    IMAGE_SUFFIXES,
    add_device_argument,
    add_max_tokens_argument,
    check_arguments,
    config_num_layers,
    is_hidden,
    report_left_out,
    token_count,
)
from .reporting import LOAD_ERRORS, one_line, progress

# What a bad image file raises on decoding: OpenCV asserts (cv2.error) on
# an empty or damaged buffer, instead of returning None.
IMAGE_ERRORS = (OSError, ValueError, TypeError, cv2.error)


def load_model(
    model: Union[str, Path, Config],
    checkpoint: Optional[str] = None,
    device: str = 'cpu',
    cfg_options: Optional[dict] = None,
) -> nn.Module:
    """Build a classifier with ``get_model``, load weights strictly and
    return it in eval mode (ConfigError, CheckpointError,
    CheckpointMismatchError; ValueError for a name not in the index).

    Args:
        model (str | Path | Config): A config file, a config, or a name of
            ``mmpretrain.list_models()``.
        checkpoint (str, optional): A file or URL. None: the index entry's
            weights for a name, the random initialisation for a config.
        device (str): Where to run. Defaults to ``'cpu'``.
        cfg_options (dict, optional): Config overrides.
    """
    if isinstance(model, Config) or str(model).endswith('.py'):
        cfg = load_config(model, cfg_options)
    else:
        metainfo = ModelHub.get(str(model))
        cfg = load_config(metainfo.config, cfg_options)
        checkpoint = checkpoint or metainfo.weights
    # get_model builds without init_weights: init_cfg files are not read
    built = get_model(cfg, pretrained=False)
    if checkpoint:
        loaded = read_checkpoint(str(checkpoint))
        load_state_dict_strictly(built, loaded, str(checkpoint))
        meta = loaded.get('meta') or {}
        if (meta.get('dataset_meta') or {}).get('classes'):
            built._dataset_meta = meta['dataset_meta']
    _match_class_names(built)
    return built.to(device).eval()


def _match_class_names(model: nn.Module) -> None:
    """ImageNet's class names, or none, for a head whose number of classes
    is not that of the test dataset's names, which get_model gives."""
    num_classes = getattr(getattr(model, 'head', None), 'num_classes', None)
    classes = (model._dataset_meta or {}).get('classes')
    if num_classes is None or (classes and len(classes) == num_classes):
        return
    model._dataset_meta = (
        dict(classes=IMAGENET_CATEGORIES) if num_classes == 1000 else {}
    )


def test_pipeline(cfg: Config) -> Compose:
    """The test pipeline without file loading, as the inferencer builds
    it, with a ``ConvertImage`` first if it has none (colour files reach a
    1-channel model as grey levels)."""
    steps = remove_transform(
        cfg.test_dataloader.dataset.pipeline, 'LoadImageFromFile'
    )
    if not any(
        str(step.get('type', '')).endswith('ConvertImage') for step in steps
    ):
        channels = cfg.model.get('backbone', {}).get('in_channels', 3)
        steps = [dict(type='ConvertImage', channels=channels)] + list(steps)
    return Compose([TRANSFORMS.build(step) for step in steps])


def read_image_input(image: Union[str, Path, np.ndarray]) -> dict:
    """A pipeline sample of an image file or array, as the inferencer
    makes it (FileNotFoundError; ValueError: not an image)."""
    if isinstance(image, (str, Path)):
        read_image_size(image)
        try:
            decoded = imread(str(image))
        except cv2.error:
            decoded = None
        if decoded is None:
            raise ValueError(
                f'{image} is not an image that OpenCV can '
                'decode; give a JPEG, PNG or other image file.'
            )
        image = decoded
    return dict(
        img=image, img_shape=image.shape[:2], ori_shape=image.shape[:2]
    )


def read_image_size(image: Union[str, Path]) -> tuple[int, int]:
    """``(width, height)`` of an image file from its header alone, so that
    an image too large to decode is refused at no cost (FileNotFoundError;
    ValueError: empty, not an image, above ``Image.MAX_IMAGE_PIXELS``)."""
    path = Path(image)
    if not path.is_file():
        raise FileNotFoundError(f'Image not found: {image}.')
    if path.stat().st_size == 0:
        raise ValueError(f'{image} is empty (0 bytes); replace or remove it.')
    limit = Image.MAX_IMAGE_PIXELS
    try:
        # the size check is ours, with the tool's own message
        Image.MAX_IMAGE_PIXELS = None
        with Image.open(path) as opened:
            width, height = opened.size
    except (OSError, SyntaxError, ValueError) as error:
        raise ValueError(
            f'{image} is not an image that can be read ({error}); give a '
            'JPEG, PNG or other image file.'
        ) from None
    finally:
        Image.MAX_IMAGE_PIXELS = limit
    if limit and width * height > limit:
        raise ValueError(
            f'{image}: {width}x{height} pixels, above the {limit} that are '
            'decoded at most (PIL.Image.MAX_IMAGE_PIXELS); resize the image '
            'first.'
        )
    return width, height


def check_token_budget(
    model: nn.Module, image: Union[str, Path, np.ndarray], max_tokens: int
) -> None:
    """Refuse (ValueError) an image that the test pipeline turns into more
    than ``max_tokens`` tokens; for a pipeline that keeps the image size,
    from the size in the file's header, before the image is decoded."""
    kinds = [
        str(step.get('type', ''))
        for step in model._config.test_dataloader.dataset.pipeline
    ]
    resizes = any('Resize' in kind or 'Crop' in kind for kind in kinds)
    if isinstance(image, (str, Path)) and not resizes:
        width, height = read_image_size(image)
    else:
        packed = test_pipeline(model._config)(read_image_input(image))
        height, width = packed['inputs'].shape[-2:]
    tokens = token_count(
        height, width, model.backbone.tokens_to_token.total_stride
    )
    if tokens > max_tokens:
        raise ValueError(
            f'{image}: the test pipeline gives a {width}x{height} input, '
            f'{tokens} tokens, above the budget of {max_tokens}; resize the '
            'image, add a Resize to the test pipeline, or raise '
            '--max-tokens.'
        )


def list_images(path: Union[str, Path]) -> list[Path]:
    """An image file, or the image files of a folder and of its
    sub-folders (class folders, as a dataset's ``val/<class>/``), sorted;
    other files are named in one line on stderr, hidden ones skipped
    (FileNotFoundError if there is no image)."""
    source = Path(path)
    if source.is_dir():
        images = sorted(
            p
            for p in source.rglob('*')
            if p.suffix.lower() in IMAGE_SUFFIXES
            and p.is_file()
            and not is_hidden(p, source)
        )
        if not images:
            raise FileNotFoundError(
                f'{source} is a folder without image files (names ending in '
                f'{", ".join(IMAGE_SUFFIXES)}); give an image or a folder '
                'of images.'
            )
        report_left_out(source)
        return images
    if not source.is_file():
        raise FileNotFoundError(f'Image not found: {source}.')
    return [source]


def class_folder(image: Path, root: Union[str, Path]) -> Optional[str]:
    """The class folder of an image found by :func:`list_images` in
    ``root``: the first folder below ``root``, None for an image directly
    in it (or ``root`` itself)."""
    parts = image.relative_to(root).parts if Path(root).is_dir() else ()
    return parts[0] if len(parts) > 1 else None


@torch.no_grad()
def preprocess_image(
    model: nn.Module, image: Union[str, Path, np.ndarray]
) -> tuple[torch.Tensor, np.ndarray]:
    """The normalised batch ``(1, C, H, W)`` of an image file or BGR array
    for a model of :func:`load_model`, and the image after the test
    pipeline (not normalised) as ``(H, W, 3)`` uint8 RGB, to draw on."""
    packed = test_pipeline(model._config)(read_image_input(image))
    picture = packed['inputs'].permute(1, 2, 0).cpu().numpy()
    if picture.shape[2] == 1:
        picture = np.repeat(picture, 3, axis=2)
    else:
        picture = picture[..., ::-1]  # pipelines hold BGR, as cv2 decodes
    picture = np.ascontiguousarray(picture.clip(0, 255).astype(np.uint8))
    data = model.data_preprocessor(pseudo_collate([packed]), False)
    return data['inputs'], picture


def check_writable_folder(folder: Union[str, Path], option: str) -> None:
    """Make ``folder`` and check that files can be written into it, before
    the work whose results go there (ValueError if not)."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        reason = (
            'a file'
            if folder.exists() and not folder.is_dir()
            else error.strerror or type(error).__name__
        )
        raise ValueError(
            f'{option} {folder} cannot take files ({reason}); give a '
            'writable folder.'
        ) from None


def check_writable_file(path: Union[str, Path], option: str) -> None:
    """Check that ``path`` can be written (its folder made if needed)."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f'{option} {path} is a folder; give a file path.')
    check_writable_folder(path.parent, f'The folder of {option}')
    if path.exists() and not os.access(path, os.W_OK):
        raise ValueError(f'{option} {path} is read-only; give another path.')


def for_each_image(
    images: Sequence[Path],
    work: Callable[[Path], None],
    console: Optional[Console] = None,
) -> int:
    """Run ``work`` on every image (with a progress bar on ``console``);
    the exit code: 1 if any image failed, each failure and their count
    reported in one line on stderr."""
    failed = []
    steps = images if console is None else progress(images, 'Drawing', console)
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
    ``--device``, ``--max-tokens``."""
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


def parse_image_arguments(
    parser: argparse.ArgumentParser, argv: Optional[Sequence[str]]
) -> argparse.Namespace:
    """Parse the command line of a tool of :func:`add_image_arguments`,
    with the shared checks (:func:`check_arguments`)."""
    args = parser.parse_args(argv)
    check_arguments(parser, args)
    return args


def image_stem(image: Path, root: Union[str, Path]) -> str:
    """A name for the files drawn of ``image``, found by
    :func:`list_images` in ``root``: its stem, after its folders below
    ``root`` (``cat_001`` for ``root/cat/001.png``), so that images of one
    name in two class folders do not overwrite each other's drawings."""
    if not Path(root).is_dir():
        return image.stem
    relative = image.relative_to(root)
    return '_'.join((*relative.parent.parts, relative.stem))


def draw_images(
    args: argparse.Namespace,
    draw: Callable[..., Sequence[Path]],
    check_config: Optional[
        Callable[[Config, argparse.Namespace], None]
    ] = None,
) -> int:
    """Run ``draw(model, image, blocks, args, stem)`` on every image of
    ``args.image`` (:func:`add_image_arguments`; ``stem`` of
    :func:`image_stem`) within the token budget, and print the PNG paths.
    ``check_config(cfg, args)`` raises ValueError for a config the tool
    cannot draw, before the model is loaded. Returns the exit code."""
    console = Console(soft_wrap=True)
    try:
        images = list_images(args.image)
        check_writable_folder(args.out_dir, '--out-dir')
        cfg = load_config(args.config)
        if check_config is not None:
            check_config(cfg, args)
        # checked once here, before the weights are read
        num_layers = config_num_layers(cfg)
        blocks = check_block_indices(
            num_layers, args.blocks or default_block_indices(num_layers)
        )
        model = load_model(cfg, args.checkpoint, args.device)
    except LOAD_ERRORS as error:
        print(f'error: {error}', file=sys.stderr)
        return 1

    def work(image: Path) -> None:
        check_token_budget(model, image, args.max_tokens)
        stem = image_stem(image, args.image)
        for path in draw(model, image, blocks, args, stem):
            console.print(str(path), markup=False, highlight=False)

    return for_each_image(images, work, console)
