"""Convert official T2T-ViT release weights to t2t-plugin checkpoints."""

import argparse
import io
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

import torch
from mmpretrain.datasets.categories import IMAGENET_CATEGORIES
from rich.console import Console

from t2t_plugin.apis import check_writable
from t2t_plugin.cli.reporting import progress
from t2t_plugin.converters import (
    convert_official_checkpoint,
    describe_arch,
    matching_config,
)
from t2t_plugin.models.backbones import T2TViT
from t2t_plugin.runtime import AtomicLocalBackend, read_checkpoint
from t2t_plugin.runtime.sample_seeded_runner import is_intact

CHECKPOINT_SUFFIXES = ('.pth.tar', '.pth', '.pt', '.tar', '.bin')
SUFFIX = '(' + '|'.join(map(re.escape, CHECKPOINT_SUFFIXES)) + ')$'


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        'src',
        nargs='+',
        help='official checkpoint file(s), or a folder of them',
    )
    parser.add_argument(
        'dst',
        help='output file (one source) or folder (several sources, or a '
        'folder); converted files are named after their source, with .pth',
    )
    parser.add_argument(
        '--num-heads',
        type=int,
        help='encoder heads (the weights do not tell): needed for archs '
        'outside the zoo (guessed from a head width of 64 otherwise) and '
        'to tell 14 (6) from 14-resnext (32) when the file name does not',
    )
    parser.add_argument(
        '--force',
        action='store_true',
        help='replace existing files in DST that are not PyTorch checkpoints',
    )
    parser.add_argument(
        '--trust-pickle',
        action='store_true',
        help='load sources that hold arbitrary Python objects besides the '
        'weights (unsafe: only for files from a source you trust)',
    )
    return parser.parse_args(argv)


def collect_jobs(sources: Sequence[str], dst: str) -> list[tuple[Path, Path]]:
    """Pair every source file with the file to write (FileNotFoundError,
    ValueError: no checkpoint in a folder, several sources for one file).
    """
    files: list[Path] = []
    from_folder = False
    for source in map(Path, sources):
        if source.is_dir():
            found = sorted(
                p
                for p in source.iterdir()
                if p.name.endswith(CHECKPOINT_SUFFIXES)
            )
            if not found:
                raise ValueError(
                    f'{source} holds no checkpoint file (names ending in '
                    f'{", ".join(CHECKPOINT_SUFFIXES)}).'
                )
            files += found
            from_folder = True
        elif source.is_file():
            files.append(source)
        else:
            raise FileNotFoundError(f'{source} does not exist.')
    dst_path = Path(dst)
    if len(files) == 1 and not from_folder and not dst_path.is_dir():
        return [(files[0], dst_path)]
    if dst_path.is_file():
        raise ValueError(
            f'{len(files)} checkpoints cannot all be written to the file '
            f'{dst_path}; give a folder as DST.'
        )
    stems = [re.sub(SUFFIX, '', src.name, count=1) for src in files]
    return [(src, dst_path / f'{stem}.pth') for src, stem in zip(files, stems)]


def convert_file(
    src: Path,
    dst: Path,
    num_heads: Optional[int] = None,
    trust_pickle: bool = False,
) -> str:
    """Convert one official checkpoint file into a ``{'state_dict',
    'meta'}`` checkpoint (ImageNet's class names for a 1000-class release);
    return a line to print. ValueError if it is not an official one."""
    checkpoint = convert_official_checkpoint(
        read_checkpoint(src, trust_pickle, convert_official=False),
        num_heads,
        src.name,
        arch_zoo=T2TViT.arch_zoo,
    )
    meta = checkpoint['meta']
    meta['converter'] = 'tools/model_converters/t2t_vit_official_to_plugin.py'
    arch_info = meta['arch']
    if arch_info['num_classes'] == len(IMAGENET_CATEGORIES):
        meta['dataset_meta'] = dict(classes=list(IMAGENET_CATEGORIES))
    buffer = io.BytesIO()
    torch.save(checkpoint, buffer)
    AtomicLocalBackend().put(buffer.getvalue(), dst)
    config = matching_config(arch_info)
    line = f'{src}: found {describe_arch(arch_info)} -> {dst}'
    if config:
        line += f' (config: {config})'
    elif not arch_info['arch'] and not arch_info['heads_given']:
        line += '; pass --num-heads if the heads differ'
    return line


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    # soft wrapping keeps every message on one line
    console = Console(soft_wrap=True)
    try:
        jobs = collect_jobs(args.src, args.dst)
        sources = {f'the source {src}': str(src) for src, _ in jobs}
        for _, dst in jobs:  # before anything is converted
            check_writable(
                dst,
                'DST',
                file=True,
                inputs=sources,
                replaces=None if args.force else ('a checkpoint', is_intact),
            )
    except (OSError, ValueError) as error:
        print(f'error: {error}', file=sys.stderr)
        return 1
    failed = 0
    for src, dst in progress(jobs, 'Converting', console):
        try:
            line = convert_file(src, dst, args.num_heads, args.trust_pickle)
            console.print(line, markup=False, highlight=False)
        except (OSError, ValueError) as error:
            # one unreadable or unwritable file does not stop the rest
            failed += 1
            print(f'error: {error}', file=sys.stderr)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
