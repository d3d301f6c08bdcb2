"""Classify images and print the top classes with their scores.

A thin wrapper of mmpretrain's ``ImageClassificationInferencer``; the model
is a config file or a model name (``mmpretrain.list_models('*_t2tp')``).
"""

import argparse
import contextlib
import io
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

import numpy as np
from mmpretrain.apis import ImageClassificationInferencer

from t2t_plugin.cli.arguments import add_cfg_options
from t2t_plugin.cli.model_loading import (
    DEFAULT_MAX_TOKENS,
    check_token_budget,
    for_each_image,
    list_images,
    load_model,
    test_pipeline,
)
from t2t_plugin.cli.reporting import LOAD_ERRORS, one_line


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
    add_cfg_options(parser)
    args = parser.parse_args(argv)
    if args.topk < 1:
        parser.error(f'--topk must be at least 1, got {args.topk}')
    if args.max_tokens < 1:
        parser.error(f'--max-tokens must be at least 1, got {args.max_tokens}')
    return args


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
    except LOAD_ERRORS as error:
        print(f'error: {one_line(error)}', file=sys.stderr)
        return 1
    inferencer = ImageClassificationInferencer(model, device=args.device)
    # the same pipeline as the other tools: 1-channel models get grey levels
    inferencer.pipeline = test_pipeline(model._config)

    def classify(image: Path) -> None:
        check_token_budget(model, image, args.max_tokens)
        # the inferencer draws a progress bar per call on stdout, where the
        # results go
        with contextlib.redirect_stdout(io.StringIO()):
            result = inferencer(str(image))[0]
        scores = np.asarray(result['pred_scores'])
        if not np.isfinite(scores).all():
            raise ValueError(
                f'{image}: the model gives NaN or infinite scores; '
                'the checkpoint or the input is broken.'
            )
        print(f'{image}:')
        classes = inferencer.classes
        for rank, label in enumerate(
            np.argsort(-scores, kind='stable')[: args.topk], 1
        ):
            name = classes[label] if classes else f'class {label}'
            print(f'{rank:>3}. {scores[label]:7.2%}  {name} (class {label})')

    return for_each_image(images, classify)


if __name__ == '__main__':
    sys.exit(main())
