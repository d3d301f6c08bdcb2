"""Classify one image and print the top classes with their scores.

Example::

    python tools/infer.py demo.jpg configs/t2t-vit-14_8xb64_in1k.py \\
        checkpoints/t2t-vit-14_in1k.pth --topk 5
"""
import argparse
import sys
from typing import Optional, Sequence

from mmengine.config import DictAction

from t2t_plugin.apis import inference_model, init_model


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description='Classify an image with a config and a checkpoint.')
    parser.add_argument('image', help='image file')
    parser.add_argument('config', help='model config file')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument(
        '--topk', type=int, default=5, help='classes to print (default 5)')
    parser.add_argument(
        '--device', default='cpu', help="e.g. 'cpu' (default) or 'cuda:0'")
    parser.add_argument(
        '--cfg-options',
        nargs='+',
        action=DictAction,
        help='override config settings, as in mmpretrain tools')
    args = parser.parse_args(argv)
    if args.topk < 1:
        parser.error('--topk must be at least 1')
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    try:
        model = init_model(args.config, args.checkpoint, args.device,
                           args.cfg_options)
        result = inference_model(model, args.image, args.topk)
    except (OSError, ValueError, TypeError) as error:
        print(f'error: {error}', file=sys.stderr)
        return 1
    print(f'{args.image}:')
    for rank, entry in enumerate(result['topk'], 1):
        print(f"{rank:>3}. {entry['score']:7.2%}  {entry['class_name']} "
              f"(class {entry['label']})")
    return 0


if __name__ == '__main__':
    sys.exit(main())
