"""Classify images and print the top classes with their scores.

A thin wrapper of mmpretrain's ``ImageClassificationInferencer``; the model
is a config file or a model name (``mmpretrain.list_models('*_t2tp')``),
the checkpoint a file or URL (official releases work as they are).

Example::

    python tools/infer.py demo.jpg configs/t2t-vit-14_8xb64_in1k.py \\
        81.5_T2T_ViT_14.pth.tar --topk 5
"""

import argparse
import contextlib
import io
import sys
from collections.abc import Sequence
from typing import Optional

import numpy as np
from mmengine.config import DictAction
from mmpretrain.apis import ImageClassificationInferencer

from t2t_plugin.cli.model_loading import (
    DEFAULT_MAX_TOKENS,
    IMAGE_ERRORS,
    check_token_budget,
    list_images,
    load_model,
    test_pipeline,
)
from t2t_plugin.engine import (
    CheckpointError,
    CheckpointMismatchError,
    ConfigError,
)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog='infer.py', description=__doc__.splitlines()[0]
    )
    parser.add_argument('image', help='image file, or a folder of images')
    parser.add_argument(
        'model', help='config file, or a model name of list_models()'
    )
    parser.add_argument(
        'checkpoint',
        nargs='?',
        help="checkpoint file or URL (default: a model name's weights)",
    )
    parser.add_argument(
        '--topk', type=int, default=5, help='classes to print (default 5)'
    )
    parser.add_argument(
        '--device', default='cpu', help="e.g. 'cpu' (default) or 'cuda:0'"
    )
    parser.add_argument(
        '--max-tokens',
        type=int,
        default=DEFAULT_MAX_TOKENS,
        help='refuse images that the test pipeline turns into more tokens '
        f'(default {DEFAULT_MAX_TOKENS}, a 1024x1024 input at stride 16)',
    )
    parser.add_argument(
        '--cfg-options',
        nargs='+',
        action=DictAction,
        help='override config settings, as in mmpretrain tools',
    )
    args = parser.parse_args(argv)
    if args.topk < 1:
        parser.error(f'--topk must be at least 1, got {args.topk}')
    if args.max_tokens < 1:
        parser.error(f'--max-tokens must be at least 1, got {args.max_tokens}')
    return args


def one_line(error: BaseException) -> str:
    """The first line of an error's message (its type when it has none)."""
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def main(argv: Optional[Sequence[str]] = None) -> int:
    try:
        args = parse_args(argv)
    except SystemExit as stop:  # argparse: --help, or a usage error
        return int(stop.code or 0)
    try:
        images = list_images(args.image)
        model = load_model(
            args.model, args.checkpoint, args.device, args.cfg_options
        )
    except (
        OSError,
        ValueError,
        TypeError,
        ConfigError,
        CheckpointError,
        CheckpointMismatchError,
    ) as error:
        print(f'error: {one_line(error)}', file=sys.stderr)
        return 1
    inferencer = ImageClassificationInferencer(model, device=args.device)
    # the same pipeline as the other tools: 1-channel models get grey levels
    inferencer.pipeline = test_pipeline(model._config)
    failed = []
    for image in images:
        try:
            check_token_budget(model, image, args.max_tokens)
            # the inferencer draws a progress bar per call on stdout, where
            # the results go
            with contextlib.redirect_stdout(io.StringIO()):
                result = inferencer(str(image))[0]
        except IMAGE_ERRORS as error:
            # one bad file does not stop the others
            failed.append(image)
            message = one_line(error)
            if str(image) not in message:
                message = f'{image}: {message}'
            print(f'error: {message}', file=sys.stderr)
            continue
        scores = np.asarray(result['pred_scores'])
        if not np.isfinite(scores).all():
            failed.append(image)
            print(
                f'error: {image}: the model gives NaN or infinite scores; '
                'the checkpoint or the input is broken.',
                file=sys.stderr,
            )
            continue
        print(f'{image}:')
        classes = inferencer.classes
        for rank, label in enumerate(
            np.argsort(-scores, kind='stable')[: args.topk], 1
        ):
            name = classes[label] if classes else f'class {label}'
            print(f'{rank:>3}. {scores[label]:7.2%}  {name} (class {label})')
    if failed and len(images) > 1:
        print(
            f'error: {len(failed)} of {len(images)} images failed: '
            + ', '.join(path.name for path in failed),
            file=sys.stderr,
        )
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
