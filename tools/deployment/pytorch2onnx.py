"""Export a T2T-ViT config and checkpoint to ONNX, and check the file.

Classifiers export images to logits (or scores), dense configs their
backbone and ``T2TFeaturePyramid``. Examples: docs/deployment.md.
"""

import argparse
import contextlib
import io
import sys
from pathlib import Path
from typing import Optional

# The options and the config are read and checked before the model
# imports (seconds), as in tools/train.py.
from t2t_preflight.arguments import (
    add_cfg_options,
    add_max_tokens_argument,
    read_tool_config,
)


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog='pytorch2onnx.py', description=__doc__.splitlines()[0]
    )
    parser.add_argument('config', help='model config file')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument('out', type=Path, help='the .onnx file to write')
    parser.add_argument(
        '--output',
        choices=('logits', 'scores'),
        default='logits',
        help='classifiers: raw logits or softmax scores',
    )
    parser.add_argument(
        '--opset',
        type=int,
        help='ONNX opset version (default: t2t_plugin.deployment.OPSET)',
    )
    parser.add_argument(
        '--shape',
        type=int,
        nargs=2,
        metavar=('H', 'W'),
        help='input size to verify with (and to fix, with --static-size); '
        "default: the config's img_size",
    )
    for flag, text in (
        ('--static-batch', 'fix the batch size'),
        ('--static-size', 'fix height and width'),
        ('--verify', 'check the file in onnxruntime against PyTorch'),
        ('--openvino', 'run the same checks in OpenVINO (fp32)'),
        ('--force', 'replace an existing OUT that is not an ONNX model'),
    ):
        parser.add_argument(flag, action='store_true', help=text)
    parser.add_argument(
        '--batch-size',
        type=int,
        default=2,
        help='batch of the checks (and of the file with --static-batch)',
    )
    parser.add_argument(
        '--atol',
        type=float,
        default=1e-4,
        help='largest accepted difference to PyTorch',
    )
    add_max_tokens_argument(parser)
    add_cfg_options(parser)
    args = parser.parse_args(argv)
    if args.batch_size < 1:
        parser.error(f'--batch-size must be positive, got {args.batch_size}.')
    if args.opset is not None and not 7 <= args.opset <= 23:
        parser.error(f'--opset must be between 7 and 23, got {args.opset}.')
    if not args.atol > 0:
        parser.error(f'--atol must be positive, got {args.atol:g}.')
    return args


def check_inputs(model, args) -> dict:
    """Random and real images at the checked size, and at a second batch
    and size where those axes are dynamic."""
    import torch

    from t2t_plugin.deployment import sample_images

    size = tuple(args.shape or model.input_size)
    batch = args.batch_size
    generator = torch.Generator().manual_seed(0)
    norm = (model.in_channels, model.mean, model.std)
    inputs = {
        f'random {batch}x{size[0]}x{size[1]}': torch.randn(
            batch, model.in_channels, *size, generator=generator
        )
    }
    other_size = (
        size
        if args.static_size
        else (size[0] + model.stride, size[1] + 2 * model.stride)
    )
    other = (batch if args.static_batch else batch + 1, other_size)
    for count, (height, width) in dict.fromkeys([(batch, size), other]):
        inputs[f'real {count}x{height}x{width}'] = sample_images(
            count, (height, width), *norm
        )
    return inputs


def run(args: argparse.Namespace, cfg, console) -> int:
    """Export the model of ``cfg`` (read by
    :func:`~t2t_preflight.arguments.read_model_config`), then check it."""
    from t2t_plugin.apis import (
        check_shape_budget,
        check_writable,
        config_stride,
    )
    from t2t_plugin.cli.options import check_model_keys
    from t2t_plugin.deployment import (
        OPSET,
        RuntimeSession,
        build_exportable,
        check_input_size,
        compare,
        export_onnx,
        external_data_file,
        is_onnx_model,
    )

    args.opset = args.opset or OPSET
    # the model's keys: no folder of OUT is left behind
    check_model_keys(cfg)
    if args.shape:  # before the model is built and run at that size
        check_shape_budget(args.shape, config_stride(cfg), args.max_tokens)
    # before the model is built: never over an input, nor over a file
    # that is not an earlier export unless asked
    check_writable(
        args.out,
        'The output',
        file=True,
        inputs={'the checkpoint': args.checkpoint, 'the config': args.config},
        replaces=None if args.force else ('an ONNX model', is_onnx_model),
    )
    model = build_exportable(cfg, args.checkpoint, args.output)
    if args.shape:
        check_input_size(model, args.shape)
        if args.static_size:
            model.input_size = tuple(args.shape)
    # torch.onnx reports its steps on stdout; the tool reports its own
    with (
        console.status(f'Exporting to {args.out} (opset {args.opset})'),
        contextlib.redirect_stdout(io.StringIO()),
    ):
        export_onnx(
            model,
            args.out,
            args.opset,
            dynamic_batch=not args.static_batch,
            dynamic_size=not args.static_size,
            batch_size=args.batch_size,
        )
    dynamic = [] if args.static_batch else ['batch']
    multiples = ''
    if not args.static_size:
        dynamic += ['height', 'width']
        multiples = f' (H, W multiples of {model.stride})'
    weights = external_data_file(args.out)
    # too large for protobuf's 2 GB, the weights cannot be inside the .onnx
    beside = (
        f' and its weights {weights} (too large for one file: keep the two '
        'together)'
        if weights
        else ''
    )
    print(
        f'Wrote {args.out}{beside}: opset {args.opset}, input images '
        f'(B, {model.in_channels}, H, W), outputs '
        f'{", ".join(model.output_names)}; dynamic axes: '
        f'{", ".join(dynamic) or "none"}{multiples}'
    )
    runtimes = ['onnxruntime'] * args.verify + ['openvino'] * args.openvino
    worst = 0.0
    inputs = check_inputs(model, args) if runtimes else {}
    for runtime in runtimes:
        session = RuntimeSession(args.out, runtime)
        with console.status(f'Checking with {runtime}'):
            diffs = compare(model.module, session, inputs)
        for name, diff in diffs.items():
            print(f'{runtime} vs PyTorch, {name}: max abs diff {diff:.2e}')
            worst = max(worst, diff)
    if worst > args.atol:
        print(
            f'pytorch2onnx.py: error: the exported file differs from PyTorch '
            f'by {worst:.2e} (more than --atol {args.atol:g}).',
            file=sys.stderr,
        )
        return 1
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    try:
        args = parse_args(argv)
    except SystemExit as stop:  # argparse: --help, or a usage error
        return int(stop.code or 0)
    cfg = read_tool_config(
        'pytorch2onnx.py: error: ',
        args.config,
        args.cfg_options,
        args.checkpoint,
    )
    if cfg is None:
        return 2
    from rich.console import Console

    from t2t_plugin.cli.options import check_arguments
    from t2t_plugin.cli.reporting import running_line

    code = check_arguments('pytorch2onnx.py', args)
    if code:
        return code
    try:
        return run(args, cfg, Console(stderr=True))
    except (ValueError, ImportError, KeyError, OSError) as error:
        line = running_line(error, args.config, args.checkpoint)
        print(f'pytorch2onnx.py: error: {line}', file=sys.stderr)
        return 2


if __name__ == '__main__':
    sys.exit(main())
