"""Classify images and print the top classes with their scores.

A thin wrapper of mmpretrain's ``ImageClassificationInferencer``; the model
is a config file or a model name (``mmpretrain.list_models('*_t2tp')``).
A folder is read with its class folders (``val/<class>/*.png``, as a
dataset's); when their names are the model's classes, the tool prints the
top-1 accuracy of each class and a few misclassified images, from as
many classes as it can (``--per-image``: every image's top classes too).
"""

import argparse
import contextlib
import io
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

# The options and a config are read and checked before the model imports
# (seconds), as in tools/train.py.
from t2t_preflight.arguments import (
    add_cfg_options,
    add_device_argument,
    add_max_tokens_argument,
    positive_int,
    read_tool_config,
)

# Misclassified images a folder's report names.
MISCLASSIFIED_SHOWN = 5


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog='infer.py', description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        'image', help='image file, or a folder of images (or class folders)'
    )
    parser.add_argument(
        'model', help='config file, or a model name of list_models()'
    )
    parser.add_argument(
        'checkpoint',
        nargs='?',
        help="checkpoint file or URL (default: a model name's weights)",
    )
    parser.add_argument(
        '--topk',
        type=positive_int,
        default=5,
        help='classes to print (default 5)',
    )
    add_device_argument(parser)
    add_max_tokens_argument(parser)
    parser.add_argument(
        '--per-image',
        action='store_true',
        help='print the top classes of every image (default for a folder '
        'of class folders the model knows: the accuracy of each class and '
        'a few misclassified images)',
    )
    add_cfg_options(parser)
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    try:
        args = parse_args(argv)
    except SystemExit as stop:  # argparse: --help, or a usage error
        return int(stop.code or 0)
    config = None
    if args.model.endswith('.py'):
        config = read_tool_config(
            'error: ', args.model, args.cfg_options, args.checkpoint
        )
        if config is None:
            return 1
    import numpy as np
    from mmpretrain.apis import ImageClassificationInferencer
    from rich.console import Console

    from t2t_plugin.apis import check_token_budget, load_model, test_pipeline
    from t2t_plugin.cli.image_tools import find_images, for_each_image
    from t2t_plugin.cli.options import check_arguments, check_model_keys
    from t2t_plugin.cli.reporting import LOAD_ERRORS, running_line
    from t2t_plugin.compat import model_config

    code = check_arguments('infer.py', args)
    if code:
        return code
    try:
        images = find_images(args.image)
        if config is not None:
            model = load_model(
                check_model_keys(config), args.checkpoint, args.device
            )
        else:  # a model name of the index
            model = load_model(
                args.model, args.checkpoint, args.device, args.cfg_options
            )
    except LOAD_ERRORS as error:
        line = running_line(error, args.model, args.checkpoint or '')
        print(f'error: {line}', file=sys.stderr)
        return 1
    inferencer = ImageClassificationInferencer(model, device=args.device)
    # the same pipeline as the other tools: 1-channel models get grey levels
    inferencer.pipeline = test_pipeline(model_config(model))
    classes = inferencer.classes
    truth = class_truth(images, args.image)
    # a folder scored by class: the table, not a line per image
    each = args.per_image or not truth or bool(unknown(truth, classes))

    top1: dict[Path, int] = {}

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
        ranked = np.argsort(-scores, kind='stable')
        top1[image] = int(ranked[0])
        if not each:
            return
        print(f'{image}:')
        for rank, label in enumerate(ranked[: args.topk], 1):
            print(f'{rank:>3}. {scores[label]:7.2%}  {_name(classes, label)}')

    console = None if each else Console(stderr=True)
    code = for_each_image(images, classify, console, 'Classifying')
    report_class_accuracy(truth, args.image, top1, classes)
    return code


def _name(classes: Optional[Sequence[str]], label: int) -> str:
    return f'{classes[label]} (class {label})' if classes else f'class {label}'


def class_truth(images: Sequence[Path], root: str) -> dict[Path, str]:
    """The class folder of each image of ``root`` that lies in one."""
    from t2t_plugin.apis import class_folder

    return {
        image: folder
        for image in images
        if (folder := class_folder(image, root)) is not None
    }


def unknown(
    truth: dict[Path, str], classes: Optional[Sequence[str]]
) -> list[str]:
    """The class folders that are not among the model's classes."""
    folders = sorted(set(truth.values()))
    return [name for name in folders if name not in (classes or ())]


def report_class_accuracy(
    truth: dict[Path, str],
    root: str,
    top1: dict[Path, int],
    classes: Optional[Sequence[str]],
) -> None:
    """The top-1 accuracy of each class folder of ``root`` and of them all
    when the folders are named after the model's classes, then a few of
    the images it got wrong; else, if there are class folders, one line
    saying why there is none."""
    if not truth:
        return
    missing = unknown(truth, classes)
    if missing:
        why = (
            f'{", ".join(missing[:5])} are not among its '
            f'{len(classes)} class names'
            if classes
            else 'it has no class names (the checkpoint meta gives them)'
        )
        print(
            f'No accuracy: {root} has class folders, but the model does '
            f'not know them: {why}.'
        )
        return
    print(f'Top-1 accuracy by class folder of {root}:')
    total = correct = 0
    for name in sorted(set(truth.values())):
        judged = [
            top1[image] == classes.index(name)
            for image, folder in truth.items()
            if folder == name and image in top1
        ]
        total, correct = total + len(judged), correct + sum(judged)
        print(f'  {name}: {_share(sum(judged), len(judged))}')
    print(f'  all: {_share(correct, total)}')
    wrong = [
        image
        for image, folder in sorted(truth.items())
        if image in top1 and top1[image] != classes.index(folder)
    ]
    if wrong:
        shown = spread_over_classes(wrong, truth)[:MISCLASSIFIED_SHOWN]
        print(
            f'Misclassified: {len(wrong)} image(s), {len(shown)} shown '
            '(--per-image lists every prediction):'
        )
        for image in shown:
            print(f'  {image}: {_name(classes, top1[image])}')


def spread_over_classes(
    images: Sequence[Path], truth: dict[Path, str]
) -> list[Path]:
    """``images`` (sorted) taken in turn from each class folder: the first
    of every class, then the second of every class, ..., so that a few
    shown name several classes."""
    turn: dict[str, int] = {}
    places = {}
    for image in images:
        folder = truth[image]
        places[image] = (turn.get(folder, 0), folder)
        turn[folder] = turn.get(folder, 0) + 1
    return sorted(images, key=lambda image: (*places[image], image))


def _share(correct: int, total: int) -> str:
    if total == 0:
        return 'no image read'
    return f'{correct} of {total} ({correct / total:.2%})'


if __name__ == '__main__':
    sys.exit(main())
