"""The compatibility corpus: configs a user could write, each resolved
through this project's tools and through mmpretrain's, and what may
differ between the two (docs/compatibility.md).

A case is a config file written into a temporary folder (mmpretrain's
own recipes as ``_base_`` with the backbone swapped for a tiny
``T2TViT``, this project's recipes, new-style configs, user modules) and
the command line a user types after it. Its placeholders:

- ``{mm}``: mmpretrain's installed ``.mim/configs`` folder;
- ``{repo}``: this repository;
- ``{data}``: the tiny image sets of :func:`write_data`;
- ``{here}``: the case's own folder;
- ``{work}``: the case's work dir;
- ``{ckpt}``: a checkpoint file (weights of no particular model);
- ``{tiny}`` / ``{tiny224}``: the tiny backbone at 32 or 224 pixels;
- ``{small}``: the lines that point a recipe at the tiny data and load
  in the main process.
"""

import contextlib
import io
import json
import logging
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional
from unittest import mock

import pytest
import torch
from mmengine.config import Config

from ..helpers import (
    MMPRETRAIN_TOOLS,
    ROOT,
    forget_visualizers_and_loggers,
    load_tool,
    write_class_folders,
    write_image,
)

MM_CONFIGS = MMPRETRAIN_TOOLS.parent / 'configs'

# A one-layer T2T-ViT, 32 wide, with 8-wide soft splits: a Runner with it
# builds in a fraction of a second.
TINY_ARCH = (
    "dict(token_layer='transformer', embed_dims=32, num_layers=1, "
    'num_heads=2, feedforward_channels=64)'
)


def tiny_backbone(img_size: int) -> str:
    return (
        f"dict(_delete_=True, type='T2TViT', arch={TINY_ARCH}, "
        f'img_size={img_size}, t2t_cfg=dict(token_dims=8))'
    )


# What a user adds to an ImageNet recipe of mmpretrain to train T2T-ViT on
# two classes of their own ImageNet-style folder, in the main process.
SMALL = """
custom_imports = dict(imports=['t2t_plugin'], allow_failed_imports=False)
model = dict(
    backbone={tiny224}, neck=None,
    head=dict(num_classes=2, in_channels=32, topk=(1,)))
data_root = '{data}/imagenet'
loader = dict(batch_size=2, num_workers=0, persistent_workers=False,
              dataset=dict(data_root=data_root))
train_dataloader = loader
val_dataloader = loader
test_dataloader = loader
val_evaluator = dict(type='Accuracy', topk=(1,))
test_evaluator = val_evaluator
"""

# A complete small config of the user's own: two class folders, 32 px.
OWN = """
_base_ = ['{repo}/configs/_base_/default_runtime.py']
data_root = '{data}/folders'
num_classes = 2
model = dict(
    type='ImageClassifier',
    backbone=dict(type='T2TViT', arch={arch}, img_size=32,
                  t2t_cfg=dict(token_dims=8)),
    neck=None,
    head=dict(type='T2TClsHead', num_classes=num_classes, in_channels=32,
              loss=dict(type='CrossEntropyLoss'), topk=(1,)))
data_preprocessor = dict(num_classes=num_classes, mean=[127.5] * 3,
                         std=[127.5] * 3, to_rgb=True)
pipeline = [dict(type='LoadImageFromFile'),
            dict(type='Resize', scale=(32, 32)),
            dict(type='PackInputs')]
train_dataloader = dict(
    batch_size=2, num_workers=0, persistent_workers=False,
    dataset=dict(type='CustomDataset', data_root=data_root,
                 data_prefix='train', pipeline=pipeline),
    sampler=dict(type='DefaultSampler', shuffle=True))
val_dataloader = dict(
    batch_size=2, num_workers=0, persistent_workers=False,
    dataset=dict(type='CustomDataset', data_root=data_root,
                 data_prefix='val', pipeline=pipeline),
    sampler=dict(type='DefaultSampler', shuffle=False))
val_evaluator = dict(type='Accuracy', topk=(1,))
test_dataloader = val_dataloader
test_evaluator = val_evaluator
optim_wrapper = dict(optimizer=dict(type='SGD', lr=0.1, momentum=0.9))
param_scheduler = [dict(type='MultiStepLR', milestones=[1], by_epoch=True)]
max_epochs = 2
train_cfg = dict(by_epoch=True, max_epochs=max_epochs, val_interval=1)
val_cfg = dict()
test_cfg = dict()
default_hooks = dict(logger=dict(interval=1))
randomness = dict(seed=0)
"""

# The same with mmengine's own Runner (no ``runner_type``), as a config
# built from mmpretrain's recipes has it.
PLAIN = "\nrunner_type = 'Runner'\n"


class Refused(Exception):
    """A tool refused the case: its exit code and what it printed."""


@dataclass(frozen=True)
class Case:
    """A config a user could write and the command line after it.

    Args:
        name: The test id.
        covers: What it covers, in a few words.
        config: The config's text (its placeholders in the module
            docstring), or a path of this repository (``configs/...``).
        args: The options after the config (after the checkpoint for
            ``tool='test'``), both tools; ``{work}`` etc. formatted.
        files: More files of the case's folder: (name, text) pairs.
        tool: ``'train'`` or ``'test'``.
        work_dir_checkpoints: Checkpoints written into the work dir first.
        loads: What the run must start from, judged on the Runner built
            from our tool's config: ``('resume', path)``, ``('load',
            path)`` or ``None`` (nothing), the paths formatted; ``...``:
            the same as the Runner of mmpretrain's tool's config.
        host: The toolbox whose tools are the reference: ``'mmpretrain'``,
            ``'mmdet'`` or ``'mmseg'``.
        load: Load the checkpoint the run starts from, for real.
        env: Environment variables set for both tools: (name, value)
            pairs, the values formatted.
        holds: (key path, value) pairs the resolved configs hold (the
            values formatted where strings).
        stale: The keys that keep the value a file variable set by
            ``--cfg-options`` had when the file was read: our tool names
            them all in one warning line (none: no such line).
        warns: The start of another warning line our tool gives once.
        refused: Our tool refuses the case in one line starting with
            this, exit code 2, where mmpretrain's alters it.
        xfail: The difference found on today's code, for a known defect.
        raises: How that difference fails the case: our tool refuses it
            (:class:`Refused`) or a check fails (``AssertionError``).
        then: A check of the Runner once built (:func:`prove_runner`).
        expected_warning: The start of a warning the case gives on
            purpose, kept out of the summary.
    """

    name: str
    covers: str
    config: str
    args: tuple = ()
    files: tuple = ()
    tool: str = 'train'
    work_dir_checkpoints: tuple = ()
    loads: Any = ...
    host: str = 'mmpretrain'
    load: bool = False
    env: tuple = ()
    holds: tuple = ()
    stale: tuple = ()
    warns: str = ''
    refused: str = ''
    xfail: str = ''
    raises: tuple = (Refused, AssertionError)
    then: Optional[Callable] = None
    expected_warning: str = ''

    def param(self):
        marks = (
            [
                pytest.mark.xfail(
                    strict=True, reason=self.xfail, raises=self.raises
                )
            ]
            if self.xfail
            else []
        )
        if self.host != 'mmpretrain':
            marks.append(pytest.mark.dense)
        if self.expected_warning:
            marks.append(
                pytest.mark.filterwarnings(f'ignore:{self.expected_warning}')
            )
        return pytest.param(self, id=self.name, marks=marks)


@dataclass
class Written:
    """A case written into its folder: the paths its command line and
    checks use."""

    config: str
    argv: list
    fields: dict = field(default_factory=dict)


def fields(folder: Path, data: Path) -> dict:
    return dict(
        mm=str(MM_CONFIGS),
        repo=str(ROOT),
        data=str(data),
        here=str(folder),
        work=str(folder / 'work'),
        ckpt=str(data / 'weights.pth'),
        tiny=tiny_backbone(32),
        tiny224=tiny_backbone(224),
        arch=TINY_ARCH,
    )


def fill(text: str, values: dict) -> str:
    """``text`` with the placeholders of ``values`` replaced (other
    braces, as in ``dict()`` or ``{{ fileDirname }}``, kept)."""
    for key, value in values.items():
        text = text.replace('{' + key + '}', value)
    return text


def write_case(case: Case, folder: Path, data: Path) -> Written:
    folder.mkdir(parents=True, exist_ok=True)
    values = fields(folder, data)
    values['small'] = fill(SMALL, values)
    values['own'] = fill(OWN, values)
    for name, text in case.files:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(fill(text, values))
    if case.config.startswith(('configs/', 'projects/')):
        config = str(ROOT / case.config)
    else:
        config = str(folder / f'{case.name}.py')
        Path(config).write_text(fill(case.config, values))
    (folder / 'data').symlink_to(data)
    for name in case.work_dir_checkpoints:
        path = folder / 'work' / name
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(fake_checkpoint(epoch=1), path)
        (folder / 'work' / 'last_checkpoint').write_text(str(path))
    argv = [config]
    if case.tool == 'test':
        argv.append(values['ckpt'])
    argv += [fill(arg, values) for arg in case.args]
    return Written(config, argv, values)


def fake_checkpoint(epoch: int = 0) -> dict:
    return dict(
        meta=dict(epoch=epoch, iter=epoch, dataset_meta={}),
        state_dict={},
    )


def write_data(root: Path) -> Path:
    """Tiny image sets under ``root``:

    - ``folders/{train,val}/{c0,c1}/{0,1}.png`` (32 px), and
      ``folders/meta/{train,val}.txt`` listing them;
    - ``imagenet``: ImageNet's layout (``train/<wnid>/*.JPEG``, a flat
      ``val/``, ``meta/{train,val}.txt``);
    - ``own_imagenet/images/{train,val}/<wnid>/*.JPEG``: ImageNet's folders
      somewhere else than ``<data_root>/<split>``;
    - ``my set``: ``folders`` again, under a name with a space;
    - ``weights.pth``: a checkpoint file; ``tiny3.pth`` /
      ``tiny3_linear.pth``: weights of the tiny classifier for three
      classes with a ``T2TClsHead`` / ``LinearClsHead``.
    """
    folders = write_class_folders(
        root / 'folders', classes=2, suffix='.png', content='smooth'
    )
    (folders / 'meta').mkdir()
    for split in ('train', 'val'):
        (folders / 'meta' / f'{split}.txt').write_text(
            ''.join(f'c{c}/{i}.png {c}\n' for c in range(2) for i in range(2))
        )
    wnids = ['n01440764', 'n01443537']
    imagenet = root / 'imagenet'
    (imagenet / 'meta').mkdir(parents=True)
    lines = {'train': [], 'val': []}
    for label, wnid in enumerate(wnids):
        for index in range(2):
            name = f'{wnid}/{wnid}_{index}.JPEG'
            write_image(
                imagenet / 'train' / name, (40, 36), 10 * label + index
            )
            write_image(
                root / 'own_imagenet' / 'images' / 'train' / name,
                (40, 36),
                10 * label + index,
            )
            write_image(
                root / 'own_imagenet' / 'images' / 'val' / name,
                (40, 36),
                10 * label + index,
            )
            lines['train'].append(f'{name} {label}\n')
            val = f'ILSVRC2012_val_{2 * label + index:08d}.JPEG'
            write_image(imagenet / 'val' / val, (40, 36), 50 + 2 * label)
            lines['val'].append(f'{val} {label}\n')
    for split, text in lines.items():
        (imagenet / 'meta' / f'{split}.txt').write_text(''.join(text))
    # the same images as a multi-label set (OpenMMLab's annotation format)
    (folders / 'meta' / 'multi_label.json').write_text(
        json.dumps(
            dict(
                metainfo=dict(classes=['c0', 'c1']),
                data_list=[
                    dict(img_path=f'train/c{c}/{i}.png', gt_label=[c])
                    for c in range(2)
                    for i in range(2)
                ],
            )
        )
    )
    # a data_root with a space in its name
    (root / 'my set').symlink_to(folders, target_is_directory=True)
    torch.save(fake_checkpoint(), root / 'weights.pth')
    write_dense_data(root)
    write_named_sets(root)
    for name, head in (
        ('tiny3', 'T2TClsHead'),
        ('tiny3_linear', 'LinearClsHead'),
    ):
        torch.save(
            dict(state_dict=tiny_classifier(head, 3).state_dict(), meta={}),
            root / f'{name}.pth',
        )
    return root


def write_named_sets(root: Path) -> None:
    """Two images of the first two classes in the layouts of
    mmpretrain's OxfordIIITPet (``pet/``), Food101 (``food/``) and CUB
    (``cub/``)."""
    pet = root / 'pet'
    (pet / 'annotations').mkdir(parents=True)
    food = root / 'food'
    (food / 'meta').mkdir(parents=True)
    cub = root / 'cub'
    cub.mkdir()
    pets, foods, birds = [], [], []
    for label, (pet_name, food_name, bird) in enumerate(
        (
            ('Abyssinian', 'apple_pie', '001.Black_footed_Albatross'),
            ('american_bulldog', 'baby_back_ribs', '002.Laysan_Albatross'),
        )
    ):
        for index in range(2):
            seed = 10 * label + index
            write_image(pet / 'images' / f'{pet_name}_{index}.jpg', seed=seed)
            pets.append(f'{pet_name}_{index} {label + 1} 1 1\n')
            write_image(
                food / 'images' / food_name / f'{index}.jpg', seed=seed
            )
            foods.append(f'{food_name}/{index}\n')
            write_image(cub / 'images' / bird / f'{index}.jpg', seed=seed)
            birds.append(f'{bird}/{index}.jpg')
    for split in ('trainval', 'test'):
        (pet / 'annotations' / f'{split}.txt').write_text(''.join(pets))
    for split in ('train', 'test'):
        (food / 'meta' / f'{split}.txt').write_text(''.join(foods))
    ids = range(1, len(birds) + 1)
    (cub / 'images.txt').write_text(
        ''.join(f'{i} {name}\n' for i, name in zip(ids, birds))
    )
    (cub / 'image_class_labels.txt').write_text(
        ''.join(f'{i} {(i - 1) // 2 + 1}\n' for i in ids)
    )
    (cub / 'train_test_split.txt').write_text(
        ''.join(f'{i} {i % 2}\n' for i in ids)
    )


def write_dense_data(root: Path) -> None:
    """``coco/`` (two images a split, :func:`write_coco`) and ``seg/``:
    ``images/{train,val}/*.jpg`` with ``annotations/{train,val}/*.png`` of
    three classes."""
    import numpy as np
    from PIL import Image

    from ..helpers import write_coco

    write_coco(root / 'coco', size=64)
    for split in ('train', 'val'):
        for index in range(2):
            write_image(
                root / 'seg' / 'images' / split / f'{index}.jpg',
                (64, 64),
                index,
            )
            labels = np.zeros((64, 64), np.uint8)
            labels[16:48, :32] = 1
            labels[16:48, 32:] = 2
            path = root / 'seg' / 'annotations' / split / f'{index}.png'
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(labels).save(path)


def tiny_classifier(head: str, num_classes: int):
    """The tiny T2T-ViT classifier with ``head``."""
    from mmpretrain.registry import MODELS

    backbone = Config.fromstring(
        f'backbone = {tiny_backbone(32)}', '.py'
    ).backbone
    backbone.pop('_delete_')
    return MODELS.build(
        dict(
            type='ImageClassifier',
            backbone=backbone,
            head=dict(
                type=head,
                num_classes=num_classes,
                in_channels=32,
                loss=dict(type='CrossEntropyLoss'),
            ),
        )
    )


# Resolving a config through each tool.


class _Built(BaseException):
    """Raised where a tool builds its Runner: the config it built it from
    (not an ``Exception``: our tools report those in one line)."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg


def _stop(cfg, *args, **kwargs):
    raise _Built(cfg)


def resolve_ours(tool: str, argv: list) -> tuple:
    """The config our ``tools/<tool>.py`` would run for ``argv`` and the
    warning lines it logged: its ``main`` run up to where the Runner class
    gets the config (its ``from_cfg``, after ``build_runner`` set it up
    for that class); :class:`Refused` with the exit code and what it
    printed if it stops before."""
    from mmengine.logging import MMLogger
    from mmengine.runner import Runner

    module = load_tool(f'tools/{tool}.py')
    out, err = io.StringIO(), io.StringIO()
    warned = []
    handle = MMLogger.callHandlers

    def record(logger, entry):
        if entry.levelno >= logging.WARNING:
            warned.append(entry.getMessage())
        handle(logger, entry)

    with (
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
        mock.patch.dict(os.environ),
        mock.patch.object(MMLogger, 'callHandlers', record),
        # SampleSeededRunner.from_cfg checks the config (its warnings
        # counted), then calls mmengine's
        mock.patch.object(Runner, 'from_cfg', _stop),
    ):
        try:
            code = module.main(argv)
        except _Built as built:
            return built.cfg, warned
        except SystemExit as exit_info:  # argparse
            code = exit_info.code
    raise Refused(f'exit {code}: {err.getvalue().strip()}')


HOST_TOOLS = {
    'mmpretrain': MMPRETRAIN_TOOLS,
    'mmdet': MMPRETRAIN_TOOLS.parents[2] / 'mmdet' / '.mim' / 'tools',
    'mmseg': MMPRETRAIN_TOOLS.parents[2] / 'mmseg' / '.mim' / 'tools',
}


def resolve_host(tool: str, argv: list, host: str = 'mmpretrain') -> Config:
    """The config the host's ``tools/<tool>.py`` (mmpretrain's, mmdet's or
    mmseg's) would run for ``argv``: its ``main`` run up to where it
    builds the Runner, which gets the config."""
    module = load_tool(str(HOST_TOOLS[host] / f'{tool}.py'))
    with contextlib.ExitStack() as stack:
        stack.enter_context(
            mock.patch.object(sys, 'argv', [f'{tool}.py', *argv])
        )
        stack.enter_context(mock.patch.dict(os.environ))
        stack.enter_context(
            mock.patch.object(module.Runner, 'from_cfg', _stop)
        )
        if hasattr(module, 'RUNNERS'):  # mmseg's test.py builds a Runner
            stack.enter_context(
                mock.patch.object(module.RUNNERS, 'build', _stop)
            )
        try:
            module.main()
        except _Built as built:
            return built.cfg
    raise AssertionError(f"{host}'s tools/{tool}.py built no Runner")


# The differences between the two, and the deliberate ones.


def differences(ours: Any, theirs: Any, path: str = '') -> list:
    """Every (key path, ours, theirs) where the two configs differ."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        found = []
        for key in sorted(set(ours) | set(theirs), key=str):
            missing = '<not set>'
            found += differences(
                ours.get(key, missing),
                theirs.get(key, missing),
                f'{path}.{key}' if path else str(key),
            )
        return found
    if (
        isinstance(ours, (list, tuple))
        and isinstance(theirs, (list, tuple))
        and len(ours) == len(theirs)
    ):
        found = []
        for index, (mine, other) in enumerate(zip(ours, theirs)):
            found += differences(mine, other, f'{path}.{index}')
        return found
    return [] if ours == theirs else [(path, ours, theirs)]


@dataclass(frozen=True)
class Deliberate:
    """A difference our tools make on purpose (docs/compatibility.md):
    keys matching ``key`` where ours and theirs hold these values, for a
    command line ``when`` accepts and, with ``runner``, where our config's
    ``runner_type`` is that; ``row``: how its row of the page's table
    begins."""

    key: str
    ours: Callable[[Any], bool]
    theirs: Callable[[Any], bool]
    reason: str
    when: Callable[[list], bool] = lambda argv: True
    row: str = ''
    runner: str = ''

    def covers(self, difference: tuple, argv: list, runner: str) -> bool:
        key, mine, other = difference
        return bool(
            re.fullmatch(self.key, key)
            and self.ours(mine)
            and self.theirs(other)
            and self.when(argv)
            and self.runner in ('', runner)
        )


def resume_without_path(argv: list) -> bool:
    """``--resume`` or ``--resume auto``: no checkpoint named."""
    if '--resume' not in argv:
        return False
    after = argv[argv.index('--resume') + 1 :]
    return not after or after[0] == 'auto' or after[0].startswith('--')


def amp_on_cpu(argv: list) -> bool:
    return '--amp' in argv and not torch.cuda.is_available()


NOT_SET = '<not set>'
LOADERS = r'(train|val|test)_dataloader'
LOADER_NAMES = ('train_dataloader', 'val_dataloader', 'test_dataloader')

DELIBERATE = [
    Deliberate(
        LOADERS + r'\.pin_memory',
        lambda v: v == NOT_SET,
        lambda v: v is True,
        "mmpretrain's tools turn pin_memory on in every loader the config "
        "leaves it out of; ours leave mmengine's default (off): pinned "
        'memory is for copies to a GPU and warns on a CPU-only machine.',
        row='`*_dataloader.pin_memory`',
    ),
    Deliberate(
        LOADERS + r'\.persistent_workers',
        lambda v: v == NOT_SET,
        lambda v: v is True,
        "mmpretrain's tools/train.py turns persistent_workers on in every "
        'loader the config leaves it out of; ours leave the default: '
        'torch refuses persistent workers with num_workers=0.',
        row='`*_dataloader.persistent_workers`',
    ),
    Deliberate(
        LOADERS + r'\.collate_fn',
        lambda v: v == NOT_SET,
        lambda v: v == {'type': 'default_collate'},
        "mmpretrain's tools set collate_fn=default_collate where the "
        "config sets none; ours leave mmengine's default (pseudo_collate). "
        "mmpretrain's data preprocessor stacks the batch either way: the "
        'same inputs, the same numbers.',
        row='`*_dataloader.collate_fn`',
    ),
    Deliberate(
        'resume',
        lambda v: v == 'auto',
        lambda v: v is True,
        "--resume without a path: mmpretrain's tool sets resume=True and "
        'load_from=None (a fresh work dir then starts from nothing, the '
        "config's load_from dropped); ours, with SampleSeededRunner, "
        "resume='auto': the newest intact checkpoint of the work dir, else "
        "the config's load_from as weights (docs/training.md). With "
        "another runner ours give mmpretrain's.",
        resume_without_path,
        row='`resume`, `load_from` with `--resume`',
        runner='SampleSeededRunner',
    ),
    Deliberate(
        'load_from',
        lambda v: True,
        lambda v: v is None,
        "--resume without a path keeps the config's load_from (see resume).",
        resume_without_path,
        row='`resume`, `load_from` with `--resume`',
        runner='SampleSeededRunner',
    ),
    Deliberate(
        r'default_hooks\.visualization\.out_dir',
        lambda v: isinstance(v, str) and os.path.isabs(v),
        lambda v: isinstance(v, str) and not os.path.isabs(v),
        'tools/test.py --show-dir DIR: ours give the hook DIR inside the '
        "work dir, as an absolute path; mmpretrain's tool passes DIR as "
        'written, and its hook writes there from the current folder.',
        lambda argv: '--show-dir' in argv,
        row='`default_hooks.visualization` with `tools/test.py --show-dir',
    ),
    Deliberate(
        r'default_hooks\.visualization\.type',
        lambda v: v == 'ReadableVisualizationHook',
        lambda v: v == 'VisualizationHook',
        "tools/test.py --show-dir / --show: mmpretrain's VisualizationHook "
        'becomes ours, which draws small images at a readable size and '
        'names them after their class folder.',
        lambda argv: '--show-dir' in argv or '--show' in argv,
        row='`default_hooks.visualization` with `tools/test.py --show-dir',
    ),
    Deliberate(
        r'optim_wrapper\.type',
        lambda v: v == 'AutocastOptimWrapper',
        lambda v: v == 'AmpOptimWrapper',
        "--amp on a machine without CUDA: mmpretrain's tool sets "
        "mmengine's AmpOptimWrapper, which refuses to run there; ours "
        'bf16 autocast (AutocastOptimWrapper).',
        amp_on_cpu,
        row='`optim_wrapper` with `--amp`',
    ),
    Deliberate(
        r'optim_wrapper\.(dtype|loss_scale)',
        lambda v: v in ('bfloat16', NOT_SET),
        lambda v: v in ('dynamic', NOT_SET),
        '--amp without CUDA: bf16 needs no loss scale (see above).',
        amp_on_cpu,
        row='`optim_wrapper` with `--amp`',
    ),
]


def unexplained(ours: Config, theirs: Config, argv: list) -> list:
    """The differences between the two resolved configs that no
    :data:`DELIBERATE` entry explains."""
    found = differences(ours.to_dict(), theirs.to_dict())
    runner = ours.get('runner_type', 'Runner')
    return [
        d
        for d in found
        if not any(x.covers(d, argv, runner) for x in DELIBERATE)
    ]


# Building the Runner as the config says.


def build_runner(cfg: Config):
    """The Runner of ``cfg`` as mmpretrain's tools build it: the config's
    ``runner_type`` from the registry, else mmengine's Runner."""
    from mmengine.registry import RUNNERS
    from mmengine.runner import Runner

    forget_visualizers_and_loggers()
    if 'runner_type' not in cfg:
        return Runner.from_cfg(cfg)
    return RUNNERS.build(cfg)


def start_point(runner) -> Optional[tuple]:
    """What the runner starts from: ``('resume', path)``, ``('load',
    path)`` or None, with the loading itself stubbed out."""
    calls = []
    with (
        mock.patch.object(
            runner,
            'resume',
            lambda path, *a, **k: calls.append(('resume', path)),
        ),
        mock.patch.object(
            runner,
            'load_checkpoint',
            lambda path, *a, **k: calls.append(('load', path)),
        ),
    ):
        runner.load_or_resume()
    assert len(calls) <= 1, calls
    return calls[0] if calls else None


def prove_runner(runner, tool: str, load: bool = False) -> None:
    """Build what the run would build first (the loops with their
    datasets, the optimizer wrapper and the schedulers, as
    ``Runner.train`` / ``Runner.test`` do), and with ``load`` load the
    checkpoint it starts from."""
    if tool == 'test':
        runner.test_loop  # noqa: B018  the properties build the loops
    else:
        runner.train_loop  # noqa: B018
        if runner._val_loop is not None:
            runner.val_loop  # noqa: B018
        wrapper = runner.optim_wrapper
        amp = isinstance(wrapper, dict) and wrapper.get('type') in (
            'AmpOptimWrapper',
            'mmengine.AmpOptimWrapper',
        )
        if not (amp and not torch.cuda.is_available()):
            runner.optim_wrapper = runner.build_optim_wrapper(wrapper)
            if runner.param_schedulers is not None:
                runner.param_schedulers = runner.build_param_scheduler(
                    runner.param_schedulers
                )
    if load:
        runner.load_or_resume()


# The cases.

W = ('--work-dir', '{work}')
# mmpretrain's ImageNet recipes: one with the tiny backbone and data.
RECIPE = "_base_ = '{mm}/%s'\n{small}"
# Our runtime's own config (:data:`OWN`), based on by the cases below.
OWN_BASE = (('own_base.py', '{own}'),)
ON_OWN = "_base_ = ['{here}/own_base.py']\n"


def own(text: str = '') -> str:
    return ON_OWN + text


def plain(text: str = '') -> str:
    """:func:`own` with mmengine's own Runner."""
    return ON_OWN + PLAIN + text


USER_DATASET = """
from mmpretrain.datasets import CustomDataset
from mmpretrain.registry import DATASETS


@DATASETS.register_module()
class NotedFolders(CustomDataset):
    def __init__(self, note='', **kwargs):
        self.note = note
        super().__init__(**kwargs)
"""
USER_HOOK = """
from mmengine.hooks import Hook
from mmpretrain.registry import HOOKS


@HOOKS.register_module()
class EveryNHook(Hook):
    def __init__(self, every=1, **kwargs):
        self.every = every
        self.extra = kwargs
"""
# A class registered over a stock name, with a key of its own.
STOCK_OVERRIDE = """
from mmpretrain.datasets import CustomDataset as Stock
from mmpretrain.registry import DATASETS


@DATASETS.register_module(name='CustomDataset', force=True)
class CustomDataset(Stock):
    def __init__(self, tag='', **kwargs):
        self.tag = tag
        super().__init__(**kwargs)
"""
NEW_STYLE_BASE = """
default_scope = 'mmpretrain'
custom_imports = dict(imports=['t2t_plugin'], allow_failed_imports=False)
data_root = '{data}/folders'
model = dict(
    type='ImageClassifier',
    backbone=dict(type='T2TViT', arch={arch}, img_size=32,
                  t2t_cfg=dict(token_dims=8)),
    head=dict(type='LinearClsHead', num_classes=2, in_channels=32,
              loss=dict(type='CrossEntropyLoss')))
data_preprocessor = dict(num_classes=2, mean=[127.5] * 3, std=[127.5] * 3)
pipeline = [dict(type='LoadImageFromFile'),
            dict(type='Resize', scale=(32, 32)),
            dict(type='PackInputs')]
train_dataloader = dict(
    batch_size=2, num_workers=0,
    dataset=dict(type='CustomDataset', data_root=data_root,
                 data_prefix='train', pipeline=pipeline),
    sampler=dict(type='DefaultSampler', shuffle=True))
val_dataloader = dict(
    batch_size=2, num_workers=0,
    dataset=dict(type='CustomDataset', data_root=data_root,
                 data_prefix='val', pipeline=pipeline),
    sampler=dict(type='DefaultSampler', shuffle=False))
val_evaluator = dict(type='Accuracy', topk=(1,))
optim_wrapper = dict(optimizer=dict(type='SGD', lr=0.1))
train_cfg = dict(by_epoch=True, max_epochs=1, val_interval=1)
val_cfg = dict()
"""
PIPELINE = (
    "[dict(type='LoadImageFromFile'), dict(type='Resize', scale=(32, 32)), "
    "dict(type='PackInputs')]"
)
FOLDER_SET = (
    "dict(type='CustomDataset', data_root='{data}/folders', "
    "data_prefix='%s', pipeline=" + PIPELINE + ')'
)
TTA = """
tta_model = dict(type='AverageClsScoreTTA')
tta_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='TestTimeAug', transforms=[
        [dict(type='Resize', scale=(32, 32))],
        [dict(type='RandomFlip', prob=1.0), dict(type='RandomFlip', prob=0.0)],
        [dict(type='PackInputs')]])]
"""
ITER_BASED = """
train_cfg = dict(_delete_=True, type='IterBasedTrainLoop', max_iters=4,
                 val_interval=2)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.1, by_epoch=False, begin=0, end=2),
    dict(type='CosineAnnealingLR', by_epoch=False, begin=2, end=4)]
train_dataloader = dict(sampler=dict(type='InfiniteSampler', shuffle=True))
default_hooks = dict(checkpoint=dict(by_epoch=False, interval=2))
log_processor = dict(by_epoch=False)
"""
DATA = '{data}/folders'
CUSTOM_RECIPE = 'configs/t2t-vit-7_1xb64_custom-64px.py'
LITE_RECIPE = 'configs/t2t-vit-lite_1xb64_custom-32px.py'
LSA_RECIPE = (
    'projects/small_data/configs/t2t-vit-lite_1xb64_custom-32px-lsa.py'
)
IN1K_RECIPE = 'configs/t2t-vit-7_8xb64_in1k.py'


def loaders_at(root: str, *extra: str) -> tuple:
    """``--cfg-options`` pointing our recipes' loaders at ``root``, read in
    the main process."""
    options = []
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        options += [
            f'{loader}.dataset.data_root={root}',
            f'{loader}.num_workers=0',
            f'{loader}.persistent_workers=False',
        ]
    return (*W, '--cfg-options', *options, *extra)


def layer_scales(runner) -> list:
    """The lr scales of the optimizer's parameter groups, once each."""
    groups = runner.optim_wrapper.optimizer.param_groups
    return sorted({group['lr_scale'] for group in groups})


def get(cfg: dict, key: str) -> Any:
    for part in key.split('.'):
        cfg = cfg[int(part)] if isinstance(cfg, list) else cfg[part]
    return cfg


def named_set(kind: str, folder: str, train: str, test: str, classes: int):
    """Our runtime's config on one of mmpretrain's named datasets, in
    the layout :func:`write_named_sets` writes."""
    sets = [
        f"dict(_delete_=True, type='{kind}', data_root='{{data}}/{folder}', "
        f"split='{split}', pipeline=[dict(type='LoadImageFromFile'), "
        "dict(type='Resize', scale=(32, 32)), dict(type='PackInputs')])"
        for split in (train, test)
    ]
    return own(
        f'model = dict(head=dict(num_classes={classes}))\n'
        f'data_preprocessor = dict(num_classes={classes})\n'
        f'train_dataloader = dict(dataset={sets[0]})\n'
        f'val_dataloader = dict(dataset={sets[1]})\n'
        'test_dataloader = val_dataloader\n'
    )


def dense_options(root: str, *evaluators: str) -> tuple:
    """``--cfg-options`` pointing a dense recipe at ``root``, the loaders
    in the main process, the backbone from scratch."""
    options = ['model.backbone.init_cfg=None']
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        options += [
            f'{loader}.dataset.data_root={root}',
            f'{loader}.num_workers=0',
            f'{loader}.persistent_workers=False',
            f'{loader}.batch_size=1',
        ]
    options += [f'{key}={root}/annotations/val.json' for key in evaluators]
    return (*W, '--cfg-options', *options)


DET = 'configs/det/retinanet_t2t-vit-7_fpn_24e_custom-coco.py'
SEG = 'configs/seg/upernet_t2t-vit-7_1xb4-4k_custom-256x256.py'
COCO_EVALUATORS = ('val_evaluator.ann_file', 'test_evaluator.ann_file')

# The environment variables our recipes read (docs/training.md), and the
# keys each reaches.
ENVIRONMENT = (('DATA_ROOT', DATA), ('NUM_CLASSES', '2'), ('MAX_EPOCHS', '3'))
FOLLOWS_ENVIRONMENT = (
    ('data_root', DATA),
    *((f'{loader}.dataset.data_root', DATA) for loader in LOADER_NAMES),
    ('num_classes', 2),
    ('model.head.num_classes', 2),
    ('data_preprocessor.num_classes', 2),
    ('max_epochs', 3),
    ('train_cfg.max_epochs', 3),
    ('param_scheduler.1.end', 3),
)

CASES = [
    # mmpretrain's recipes with the backbone swapped
    Case(
        'resnet18_in1k',
        "mmpretrain's ResNet-18 recipe: ImageNet split=, SGD, MultiStepLR",
        RECIPE % 'resnet/resnet18_8xb32_in1k.py',
        W,
    ),
    Case(
        'resnet50_rsb_lamb',
        "mmpretrain's RSB-A1 recipe: LAMB, Mixup/CutMix, cosine by epoch",
        RECIPE % 'resnet/resnet50_8xb256-rsb-a1-600e_in1k.py',
        W,
    ),
    Case(
        't2t_vit_t14_in1k',
        "mmpretrain's own T2T-ViT recipe: AdamW, EMAHook, iter warm-up",
        RECIPE % 't2t_vit/t2t-vit-t-14_8xb64_in1k.py',
        W,
    ),
    Case(
        'deit_tiny_in1k',
        "mmpretrain's DeiT recipe: VisionTransformerClsHead, AdamW",
        RECIPE % 'deit/deit-tiny_4xb256_in1k.py',
        W,
    ),
    Case(
        'swin_tiny_clip_grad',
        "mmpretrain's Swin recipe: AdamW with clip_grad, warm-up by iter",
        RECIPE % 'swin_transformer/swin-tiny_16xb64_in1k.py',
        W,
    ),
    Case(
        'vit_base_in1k',
        "mmpretrain's ViT recipe: AdamW, warm-up by iteration, clip_grad",
        RECIPE % 'vision_transformer/vit-base-p16_64xb64_in1k.py',
        W,
    ),
    Case(
        'convnext_tiny_in1k',
        "mmpretrain's ConvNeXt recipe: AdamW, EMAHook, RandAugment, "
        'Mixup/CutMix',
        RECIPE % 'convnext/convnext-tiny_32xb128_in1k.py',
        W,
    ),
    Case(
        'efficientnet_b0_in1k',
        "mmpretrain's EfficientNet recipe: EfficientNet crops",
        RECIPE % 'efficientnet/efficientnet-b0_8xb32_in1k.py',
        W,
    ),
    Case(
        'mobilenet_v2_in1k',
        "mmpretrain's MobileNetV2 recipe: SGD, StepLR",
        RECIPE % 'mobilenet_v2/mobilenet-v2_8xb32_in1k.py',
        W,
    ),
    Case(
        'resnet50_lbs_coslr',
        "mmpretrain's label-smoothing recipe: LabelSmoothLoss",
        RECIPE % 'resnet/resnet50_8xb32-lbs_in1k.py',
        W,
    ),
    Case(
        'resnet50_coslr',
        "mmpretrain's cosine recipe: CosineAnnealingLR by epoch",
        RECIPE % 'resnet/resnet50_8xb32-coslr_in1k.py',
        W,
    ),
    Case(
        'layer_decay',
        'layer decay (LearningRateDecayOptimWrapperConstructor, as the '
        "fine-tunes of mmpretrain's MAE/BEiT/MaskFeat) on the DeiT recipe",
        RECIPE
        % 'deit/deit-tiny_4xb256_in1k.py'
        + "optim_wrapper = dict(constructor='LearningRateDecayOptimWrapper"
        "Constructor', paramwise_cfg=dict(layer_decay_rate=0.65, "
        "custom_keys={'.cls_token': dict(decay_mult=0.0)}))\n",
        W,
        then=lambda runner: layer_scales(runner) == [0.65**2, 0.65, 1.0],
    ),
    Case(
        'lars',
        'LARS (the schedule of the self-supervised linear probes)',
        RECIPE
        % 'resnet/resnet18_8xb32_in1k.py'
        + "optim_wrapper = dict(_delete_=True, optimizer=dict(type='LARS', "
        'lr=0.1, momentum=0.9, weight_decay=1e-6), paramwise_cfg=dict('
        'bias_decay_mult=0.0, norm_decay_mult=0.0))\n',
        W,
    ),
    Case(
        'amp_recipe',
        "mmpretrain's fp16 recipe: AmpOptimWrapper, loss_scale=512 "
        '(built, not stepped, without CUDA)',
        RECIPE % 'resnet/resnet50_8xb32-fp16_in1k.py',
        W,
    ),
    Case(
        'amp_options',
        'AmpOptimWrapper with dtype and a loss_scale dict',
        RECIPE
        % 'resnet/resnet18_8xb32_in1k.py'
        + "optim_wrapper = dict(type='AmpOptimWrapper', dtype='float16', "
        'loss_scale=dict(init_scale=256.0, growth_interval=100))\n',
        W,
    ),
    Case(
        'amp_flag',
        '--amp on an SGD recipe',
        RECIPE % 'resnet/resnet18_8xb32_in1k.py',
        (*W, '--amp'),
    ),
    Case(
        'autocast_wrapper',
        'AutocastOptimWrapper with bf16 (the CPU mixed precision)',
        RECIPE
        % 'resnet/resnet18_8xb32_in1k.py'
        + "optim_wrapper = dict(type='AutocastOptimWrapper', "
        "dtype='bfloat16')\n",
        W,
    ),
    Case(
        'accumulate_and_clip',
        'accumulative_counts and clip_grad on an SGD recipe',
        RECIPE
        % 'resnet/resnet18_8xb32_in1k.py'
        + 'optim_wrapper = dict(accumulative_counts=4, '
        'clip_grad=dict(max_norm=1.0, norm_type=2))\n',
        W,
    ),
    Case(
        'no_persistent_workers_flag',
        '--no-persistent-workers / --no-pin-memory / --no-validate on a '
        'recipe',
        RECIPE % 'resnet/resnet18_8xb32_in1k.py',
        (*W, '--no-persistent-workers', '--no-pin-memory', '--no-validate'),
    ),
    Case(
        'auto_scale_lr',
        "--auto-scale-lr on a recipe's auto_scale_lr",
        RECIPE % 'resnet/resnet18_8xb32_in1k.py',
        (*W, '--auto-scale-lr'),
    ),
    # datasets
    Case(
        'imagenet_own_prefix',
        'ImageNet with split= and its own data_prefix (class folders: '
        'the classes given, as ImageNet asks for its 1000 otherwise)',
        RECIPE
        % 'resnet/resnet18_8xb32_in1k.py'
        + "metainfo = dict(classes=('n01440764', 'n01443537'))\n"
        "train_dataloader = dict(loader, dataset=dict(data_root='{data}/"
        "own_imagenet', ann_file='', data_prefix='images/train', "
        'metainfo=metainfo))\n'
        "val_dataloader = dict(loader, dataset=dict(data_root='{data}/"
        "own_imagenet', ann_file='', data_prefix='images/val', "
        'metainfo=metainfo))\n'
        'test_dataloader = val_dataloader\n',
        W,
    ),
    Case(
        'oxford_pet',
        "mmpretrain's OxfordIIITPet (split='trainval' / 'test')",
        named_set('OxfordIIITPet', 'pet', 'trainval', 'test', 37),
        W,
        OWN_BASE,
    ),
    Case(
        'food101',
        "mmpretrain's Food101 (split='train' / 'test')",
        named_set('Food101', 'food', 'train', 'test', 101),
        W,
        OWN_BASE,
    ),
    Case(
        'cub',
        "mmpretrain's CUB (split='train' / 'test')",
        named_set('CUB', 'cub', 'train', 'test', 200),
        W,
        OWN_BASE,
    ),
    Case(
        'custom_ann_file',
        'CustomDataset with ann_file and data_prefix',
        own(
            "train_dataloader = dict(dataset=dict(ann_file='meta/train.txt'))"
            "\nval_dataloader = dict(dataset=dict(ann_file='meta/val.txt'))\n"
        ),
        W,
        OWN_BASE,
    ),
    Case(
        'custom_prefix_dict',
        "CustomDataset with data_prefix=dict(img_path='train')",
        own(
            'train_dataloader = dict(dataset=dict('
            "data_prefix=dict(_delete_=True, img_path='train')))\n"
        ),
        W,
        OWN_BASE,
    ),
    Case(
        'custom_absolute_prefix',
        'CustomDataset with an absolute data_prefix and no data_root',
        own(
            "train_dataloader = dict(dataset=dict(data_root='', "
            f"data_prefix='{DATA}/train'))\n"
        ),
        W,
        OWN_BASE,
    ),
    Case(
        'metainfo_classes',
        'metainfo classes on CustomDataset',
        own(
            "metainfo = dict(classes=('c0', 'c1'))\n"
            'train_dataloader = dict(dataset=dict(metainfo=metainfo))\n'
            'val_dataloader = dict(dataset=dict(metainfo=metainfo))\n'
        ),
        W,
        OWN_BASE,
    ),
    Case(
        'dataset_wrappers',
        'RepeatDataset around a CustomDataset, ClassBalancedDataset',
        own(
            'train_dataloader = dict(dataset=dict(_delete_=True, '
            "type='RepeatDataset', times=2, dataset=dict("
            "type='ClassBalancedDataset', oversample_thr=0.5, "
            "dataset=dict(type='CustomDataset', data_root='{data}/folders', "
            "data_prefix='train', pipeline=[dict(type='LoadImageFromFile'), "
            "dict(type='Resize', scale=32), dict(type='PackInputs')]))))\n"
        ),
        W,
        OWN_BASE,
    ),
    Case(
        'dataset_concat_kfold',
        'ConcatDataset of two sets, KFoldDataset for validation',
        own(
            'train_dataloader = dict(dataset=dict(_delete_=True, '
            "type='ConcatDataset', datasets=["
            + ', '.join([FOLDER_SET % 'train', FOLDER_SET % 'val'])
            + ']))\n'
            'val_dataloader = dict(dataset=dict(_delete_=True, '
            "type='KFoldDataset', fold=0, num_splits=2, test_mode=True, "
            f'dataset={FOLDER_SET % "train"}))\n'
        ),
        W,
        OWN_BASE,
    ),
    Case(
        'multi_label',
        'MultiLabelDataset from an annotation file, a multi-label head and '
        'metric',
        own(
            'model = dict(head=dict(_delete_=True, '
            "type='MultiLabelLinearClsHead', num_classes=2, in_channels=32))\n"
            'train_dataloader = dict(dataset=dict(_delete_=True, '
            "type='MultiLabelDataset', data_root='{data}/folders', "
            "ann_file='meta/multi_label.json', pipeline=PIPELINE))\n"
            'val_dataloader = train_dataloader\n'
            "val_evaluator = dict(_delete_=True, type='MultiLabelMetric')\n"
            'test_dataloader = val_dataloader\n'
            'test_evaluator = val_evaluator\n'
        ).replace('PIPELINE', PIPELINE),
        W,
        OWN_BASE,
    ),
    Case(
        'user_dataset',
        'a dataset of the user registered in their module, **kwargs',
        own(
            "custom_imports = dict(imports=['t2t_plugin', 'user_dataset_mod'],"
            ' allow_failed_imports=False)\n'
            "train_dataloader = dict(dataset=dict(type='NotedFolders', "
            "note='mine'))\n"
        ),
        W,
        (*OWN_BASE, ('user_dataset_mod.py', USER_DATASET)),
    ),
    Case(
        'user_hook',
        'a hook of the user in custom_hooks, **kwargs',
        own(
            "custom_imports = dict(imports=['t2t_plugin', 'user_hook_mod'],"
            ' allow_failed_imports=False)\n'
            "custom_hooks = [dict(type='EveryNHook', every=2, label='x')]\n"
        ),
        W,
        (*OWN_BASE, ('user_hook_mod.py', USER_HOOK)),
    ),
    Case(
        'user_stock_name',
        'a class registered over a stock name (force=True), a key of its own',
        own(
            "custom_imports = dict(imports=['t2t_plugin', 'user_stock_mod'],"
            ' allow_failed_imports=False)\n'
            "train_dataloader = dict(dataset=dict(tag='mine'))\n"
        ),
        W,
        (*OWN_BASE, ('user_stock_mod.py', STOCK_OVERRIDE)),
    ),
    # schedules, loops and hooks
    Case(
        'iter_based',
        'IterBasedTrainLoop, schedulers by iteration, InfiniteSampler',
        own(ITER_BASED),
        W,
        OWN_BASE,
    ),
    Case(
        'iter_based_plain',
        "IterBasedTrainLoop with mmengine's Runner",
        plain(ITER_BASED),
        W,
        OWN_BASE,
    ),
    Case(
        'epoch_schedulers_by_iter',
        'an epoch loop with schedulers by iteration and convert_to_iter',
        own(
            'param_scheduler = ['
            "dict(type='LinearLR', start_factor=0.1, by_epoch=False, "
            'begin=0, end=2), '
            "dict(type='CosineAnnealingLR', by_epoch=True, begin=0, end=2, "
            'convert_to_iter_based=True)]\n'
            "optim_wrapper = dict(optimizer=dict(_delete_=True, type='AdamW',"
            ' lr=1e-3, weight_decay=0.05))\n'
        ),
        W,
        OWN_BASE,
    ),
    Case(
        'ema_early_stopping',
        'EMAHook and EarlyStoppingHook in custom_hooks',
        own(
            "custom_hooks = [dict(type='EMAHook', momentum=1e-4, "
            "priority='ABOVE_NORMAL'), dict(type='EarlyStoppingHook', "
            "monitor='accuracy/top1', patience=2, rule='greater')]\n"
        ),
        W,
        OWN_BASE,
    ),
    Case(
        'checkpoint_options',
        'CheckpointHook max_keep_ckpts=1, save_best, rule, out_dir, '
        'save_last=False',
        plain(
            'default_hooks = dict(checkpoint=dict(max_keep_ckpts=1, '
            "save_best='accuracy/top1', rule='greater', "
            "out_dir='{here}/ckpts', save_last=False))\n"
        ),
        W,
        OWN_BASE,
    ),
    Case(
        'no_val_no_test',
        'no val and no test loop',
        own(
            'val_dataloader = None\nval_cfg = None\nval_evaluator = None\n'
            'test_dataloader = None\ntest_cfg = None\ntest_evaluator = None\n'
        ),
        W,
        OWN_BASE,
    ),
    Case(
        'val_each_two_epochs',
        'val_interval=2 and a logger interval',
        own(
            'train_cfg = dict(val_interval=2)\n'
            'default_hooks = dict(logger=dict(interval=5))\n'
        ),
        W,
        OWN_BASE,
    ),
    # config files: variables, bases, new style
    Case(
        'file_dirname',
        '{{ fileDirname }} for the data and the work dir',
        own(
            "data_root = '{{ fileDirname }}/data/folders'\n"
            "work_dir = '{{ fileDirname }}/work'\n"
            'train_dataloader = dict(dataset=dict(data_root=data_root))\n'
            'val_dataloader = dict(dataset=dict(data_root=data_root))\n'
        ),
        (),
        OWN_BASE,
    ),
    Case(
        'file_dirname_options',
        '{{ fileDirname }} with --cfg-options naming a file variable',
        own(
            "data_root = '{{ fileDirname }}/data/folders'\n"
            "work_dir = '{{ fileDirname }}/work'\n"
            'max_epochs = 2\n'
            'train_cfg = dict(max_epochs=max_epochs)\n'
            'train_dataloader = dict(dataset=dict(data_root=data_root))\n'
            'val_dataloader = dict(dataset=dict(data_root=data_root))\n'
        ),
        ('--cfg-options', 'max_epochs=1'),
        OWN_BASE,
        stale=('train_cfg.max_epochs',),
    ),
    Case(
        'file_dirname_nested_options',
        '{{ fileDirname }} with nested --cfg-options',
        own(
            "data_root = '{{ fileDirname }}/data/folders'\n"
            'train_dataloader = dict(dataset=dict(data_root=data_root))\n'
            'val_dataloader = dict(dataset=dict(data_root=data_root))\n'
        ),
        (*W, '--cfg-options', 'train_cfg.max_epochs=1'),
        OWN_BASE,
    ),
    Case(
        'file_basename',
        '{{ fileBasename }} / {{ fileBasenameNoExtension }}, default work dir',
        own(
            "experiment_name = '{{ fileBasename }}'\n"
            "work_dir = './work_dirs/{{ fileBasenameNoExtension }}'\n"
        ),
        (),
        OWN_BASE,
    ),
    Case(
        'file_basename_options',
        '{{ fileBasenameNoExtension }} with nested --cfg-options',
        own("work_dir = './work_dirs/{{ fileBasenameNoExtension }}'\n"),
        ('--cfg-options', 'train_cfg.max_epochs=1', 'randomness.seed=1'),
        OWN_BASE,
    ),
    Case(
        'base_variable',
        '{{ _base_.x }} and _base_ lists of several files',
        "_base_ = ['{here}/own_base.py', '{here}/epochs.py']\n"
        'train_cfg = dict(max_epochs={{ _base_.epochs }})\n'
        'model = dict(head=dict(num_classes={{ _base_.num_classes }}))\n',
        W,
        (*OWN_BASE, ('epochs.py', 'epochs = 3\n')),
    ),
    Case(
        'base_variable_options',
        '{{ _base_.x }} with --cfg-options of nested keys',
        "_base_ = ['{here}/own_base.py', '{here}/epochs.py']\n"
        'train_cfg = dict(max_epochs={{ _base_.epochs }})\n',
        (*W, '--cfg-options', 'train_cfg.max_epochs=1'),
        (*OWN_BASE, ('epochs.py', 'epochs = 3\n')),
    ),
    Case(
        'read_base',
        'a new-style config: read_base() and changes of its dicts',
        'from mmengine.config import read_base\n\n'
        'with read_base():\n'
        '    from .new_base import *\n\n'
        'train_cfg.update(max_epochs=2)\n'
        'model.head.update(num_classes=2)\n',
        W,
        (('new_base.py', NEW_STYLE_BASE), ('__init__.py', '')),
    ),
    Case(
        'read_base_options',
        'a new-style config with --cfg-options',
        'from mmengine.config import read_base\n\n'
        'with read_base():\n'
        '    from .new_base import *\n',
        (
            *W,
            '--cfg-options',
            'train_cfg.max_epochs=2',
            'optim_wrapper.optimizer.lr=0.01',
        ),
        (('new_base.py', NEW_STYLE_BASE), ('__init__.py', '')),
    ),
    Case(
        'scoped_types',
        "types named with their scope ('mmpretrain.T2TViT', ...)",
        own(
            "model = dict(type='mmpretrain.ImageClassifier', "
            "backbone=dict(type='mmpretrain.T2TViT'), "
            "head=dict(type='mmpretrain.T2TClsHead'))\n"
        ),
        W,
        OWN_BASE,
    ),
    Case(
        'allow_failed_imports',
        'custom_imports of a module that is not there, '
        'allow_failed_imports=True',
        own(
            "custom_imports = dict(imports=['t2t_plugin', "
            "'a_module_not_installed'], allow_failed_imports=True)\n"
        ),
        W,
        OWN_BASE,
        expected_warning='a_module_not_installed failed to import',
    ),
    Case(
        'default_work_dir',
        'no --work-dir and no work_dir: ./work_dirs/<config>, --launcher none',
        own(),
        ('--launcher', 'none'),
        OWN_BASE,
    ),
    Case(
        'one_cycle_and_restarts',
        'OneCycleLR by iteration, CosineRestartLR, momentum schedulers',
        own(
            'param_scheduler = ['
            "dict(type='OneCycleLR', eta_max=0.1, total_steps=4, "
            'by_epoch=False), '
            "dict(type='CosineRestartLR', periods=[2, 2], "
            'restart_weights=[1, 0.5], eta_min=0.0, by_epoch=True, begin=0, '
            'end=4), '
            "dict(type='LinearMomentum', start_factor=0.5, by_epoch=False, "
            'begin=0, end=2)]\n'
            'train_cfg = dict(max_epochs=4, dynamic_intervals=[(2, 2)])\n'
        ),
        W,
        OWN_BASE,
    ),
    # --cfg-options
    Case(
        'options_nested',
        '--cfg-options of nested keys',
        own(),
        (
            *W,
            '--cfg-options',
            'train_dataloader.batch_size=1',
            'optim_wrapper.optimizer.lr=0.01',
            'model.head.topk=1',
            'randomness.seed=3',
        ),
        OWN_BASE,
    ),
    Case(
        'options_lists',
        '--cfg-options lists, tuples and list items by index',
        own(),
        (
            *W,
            '--cfg-options',
            'model.head.topk=[1,2]',
            'param_scheduler.0.milestones=[1,2]',
            'data_preprocessor.mean=(0,0,0)',
        ),
        OWN_BASE,
    ),
    Case(
        'options_plain_forms',
        '--cfg-options a list without brackets, booleans, None, a tuple',
        own(),
        (
            *W,
            '--cfg-options',
            'model.head.topk=1,2',
            'train_dataloader.dataset.lazy_init=False',
            'model.backbone.init_cfg=None',
            'model.backbone.t2t_cfg.kernel_sizes=(7,3,3)',
        ),
        OWN_BASE,
    ),
    Case(
        'options_file_variable',
        '--cfg-options naming a variable of the file (num_classes)',
        own(
            'num_classes = 2\n'
            'model = dict(head=dict(num_classes=num_classes))\n'
            'data_preprocessor = dict(num_classes=num_classes)\n'
        ),
        (*W, '--cfg-options', 'num_classes=3'),
        OWN_BASE,
        holds=(('num_classes', 3), ('model.head.num_classes', 2)),
        stale=('model.head.num_classes', 'data_preprocessor.num_classes'),
    ),
    Case(
        'options_base_variable',
        '--cfg-options naming a variable set only in a base (max_epochs)',
        own(),
        (*W, '--cfg-options', 'max_epochs=1'),
        OWN_BASE,
        holds=(('max_epochs', 1), ('train_cfg.max_epochs', 2)),
        stale=('train_cfg.max_epochs',),
    ),
    Case(
        'options_annotated_variable',
        '--cfg-options naming an annotated variable (epochs: int = 3)',
        own('epochs: int = 3\ntrain_cfg = dict(max_epochs=epochs)\n'),
        (*W, '--cfg-options', 'epochs=1'),
        OWN_BASE,
        holds=(('epochs', 1), ('train_cfg.max_epochs', 3)),
        stale=('train_cfg.max_epochs',),
    ),
    Case(
        'options_read_base_comment',
        '--cfg-options naming a variable of a file whose comment says '
        'read_base',
        own(
            '# an old-style config: no read_base() here\n'
            'epochs = 3\ntrain_cfg = dict(max_epochs=epochs)\n'
        ),
        (*W, '--cfg-options', 'epochs=1'),
        OWN_BASE,
        holds=(('epochs', 1), ('train_cfg.max_epochs', 3)),
        stale=('train_cfg.max_epochs',),
    ),
    Case(
        'options_space',
        '--cfg-options value with a space',
        own(),
        (
            *W,
            '--cfg-options',
            'train_dataloader.dataset.data_root={data}/my set',
        ),
        OWN_BASE,
        refused='--cfg-options train_dataloader.dataset.data_root: mmengine '
        'deletes the spaces',
    ),
    # resume
    Case(
        'resume_none_load_from',
        'no --resume, load_from in the config',
        own("load_from = '{ckpt}'\n"),
        W,
        OWN_BASE,
        loads=('load', '{ckpt}'),
    ),
    Case(
        'resume_fresh',
        '--resume into a fresh work dir',
        own(),
        (*W, '--resume'),
        OWN_BASE,
        loads=None,
    ),
    Case(
        'resume_fresh_load_from',
        '--resume into a fresh work dir, load_from in the config',
        own("load_from = '{ckpt}'\n"),
        (*W, '--resume'),
        OWN_BASE,
        loads=('load', '{ckpt}'),
    ),
    Case(
        'resume_fresh_load_from_plain',
        "--resume into a fresh work dir, load_from, mmengine's Runner",
        plain("load_from = '{ckpt}'\n"),
        (*W, '--resume'),
        OWN_BASE,
        loads=None,
        warns='--resume with runner_type=Runner',
    ),
    Case(
        'resume_checkpoints',
        '--resume auto into a work dir with checkpoints',
        own(),
        (*W, '--resume', 'auto'),
        OWN_BASE,
        work_dir_checkpoints=('epoch_1.pth',),
        loads=('resume', '{work}/epoch_1.pth'),
    ),
    Case(
        'resume_none',
        'no --resume, no load_from, a work dir with checkpoints',
        own(),
        W,
        OWN_BASE,
        work_dir_checkpoints=('epoch_1.pth',),
        loads=None,
    ),
    Case(
        'resume_checkpoints_load_from',
        '--resume into a work dir with checkpoints, load_from in the config',
        own("load_from = '{ckpt}'\n"),
        (*W, '--resume'),
        OWN_BASE,
        work_dir_checkpoints=('epoch_1.pth',),
        loads=('resume', '{work}/epoch_1.pth'),
    ),
    Case(
        'resume_checkpoints_plain',
        "--resume into a work dir with checkpoints, mmengine's Runner",
        plain(),
        (*W, '--resume'),
        OWN_BASE,
        work_dir_checkpoints=('epoch_1.pth',),
        loads=('resume', '{work}/epoch_1.pth'),
    ),
    Case(
        'resume_checkpoints_load_from_plain',
        "--resume into a work dir with checkpoints, load_from, mmengine's "
        'Runner',
        plain("load_from = '{ckpt}'\n"),
        (*W, '--resume'),
        OWN_BASE,
        work_dir_checkpoints=('epoch_1.pth',),
        loads=('resume', '{work}/epoch_1.pth'),
        warns='--resume with runner_type=Runner',
    ),
    Case(
        'resume_path',
        '--resume PATH',
        own(),
        (*W, '--resume', '{ckpt}'),
        OWN_BASE,
        loads=('resume', '{ckpt}'),
    ),
    Case(
        'resume_path_plain',
        "--resume PATH over a config's load_from, mmengine's Runner",
        plain("load_from = '{work}/none.pth'\n"),
        (*W, '--resume', '{ckpt}'),
        OWN_BASE,
        loads=('resume', '{ckpt}'),
    ),
    # fine-tuning
    Case(
        'finetune_other_classes',
        'load_from a 3-class checkpoint of our recipe into 2 classes',
        own("load_from = '{data}/tiny3.pth'\n"),
        W,
        OWN_BASE,
        load=True,
    ),
    Case(
        'finetune_recipe_other_classes',
        "load_from a 3-class checkpoint into mmpretrain's LinearClsHead",
        RECIPE % 'resnet/resnet18_8xb32_in1k.py'
        + "load_from = '{data}/tiny3_linear.pth'\n",
        W,
        load=True,
    ),
    # test.py
    Case(
        'test_recipe',
        "tools/test.py on mmpretrain's recipe",
        RECIPE % 'resnet/resnet18_8xb32_in1k.py',
        W,
        tool='test',
    ),
    Case(
        'test_show_dir',
        "tools/test.py --show-dir on mmpretrain's recipe",
        RECIPE % 'resnet/resnet18_8xb32_in1k.py',
        (*W, '--show-dir', 'shown', '--interval', '2'),
        tool='test',
    ),
    Case(
        'test_tta_recipe',
        "tools/test.py --tta --no-pin-memory on mmpretrain's recipe",
        RECIPE % 'resnet/resnet18_8xb32_in1k.py',
        (*W, '--tta', '--no-pin-memory'),
        tool='test',
    ),
    Case(
        'test_amp',
        "tools/test.py --amp (mmpretrain's test_cfg.fp16)",
        RECIPE % 'resnet/resnet18_8xb32_in1k.py',
        (*W, '--amp'),
        tool='test',
    ),
    Case(
        'test_tta_flag',
        'tools/test.py --tta: flip TTA of the test pipeline',
        own(),
        (*W, '--tta'),
        OWN_BASE,
        tool='test',
    ),
    Case(
        'test_tta_model',
        "tools/test.py --tta with the config's tta_model and tta_pipeline",
        own(TTA),
        (*W, '--tta'),
        OWN_BASE,
        tool='test',
    ),
    Case(
        'test_tta_model_unused',
        'a config with tta_model, tested without --tta',
        own(TTA),
        W,
        OWN_BASE,
        tool='test',
    ),
    Case(
        'test_out_pkl',
        'tools/test.py --out preds.pkl',
        own(),
        (*W, '--out', '{here}/preds.pkl'),
        OWN_BASE,
        tool='test',
    ),
    Case(
        'test_out_pickle',
        'tools/test.py --out preds.pickle (DumpResults takes .pickle)',
        own(),
        (*W, '--out', '{here}/preds.pickle'),
        OWN_BASE,
        tool='test',
    ),
    Case(
        'test_out_metrics_json',
        'tools/test.py --out metrics.json --out-item metrics',
        own(),
        (*W, '--out', '{here}/metrics.json', '--out-item', 'metrics'),
        OWN_BASE,
        tool='test',
    ),
    Case(
        'test_out_metrics_yml',
        'tools/test.py --out metrics.yml --out-item metrics',
        own(),
        (*W, '--out', '{here}/metrics.yml', '--out-item', 'metrics'),
        OWN_BASE,
        tool='test',
    ),
    Case(
        'test_out_metrics_pickle',
        'tools/test.py --out metrics.pickle --out-item metrics',
        own(),
        (*W, '--out', '{here}/metrics.pickle', '--out-item', 'metrics'),
        OWN_BASE,
        tool='test',
    ),
    # our recipes
    Case(
        'recipe_custom_64px',
        'configs/t2t-vit-7_1xb64_custom-64px.py, loaders by --cfg-options',
        CUSTOM_RECIPE,
        loaders_at(
            DATA,
            'train_cfg.max_epochs=2',
            'model.head.num_classes=2',
            'data_preprocessor.num_classes=2',
        ),
    ),
    Case(
        'recipe_lite_32px',
        'configs/t2t-vit-lite_1xb64_custom-32px.py, loaders by --cfg-options',
        LITE_RECIPE,
        loaders_at(
            DATA, 'model.head.num_classes=2', 'data_preprocessor.num_classes=2'
        ),
    ),
    Case(
        'recipe_lite_environment',
        'configs/t2t-vit-lite_1xb64_custom-32px.py with the documented '
        'DATA_ROOT= NUM_CLASSES= MAX_EPOCHS=',
        LITE_RECIPE,
        W,
        env=ENVIRONMENT,
        holds=FOLLOWS_ENVIRONMENT,
    ),
    Case(
        'project_lsa_environment',
        'projects/small_data LSA config with the documented DATA_ROOT= '
        'NUM_CLASSES= MAX_EPOCHS=',
        LSA_RECIPE,
        W,
        env=ENVIRONMENT,
        holds=FOLLOWS_ENVIRONMENT,
    ),
    Case(
        'project_lsa',
        'projects/small_data LSA config, loaders by --cfg-options',
        LSA_RECIPE,
        loaders_at(DATA, 'model.head.num_classes=2'),
    ),
    Case(
        'recipe_in1k',
        'configs/t2t-vit-7_8xb64_in1k.py on an ImageNet layout',
        IN1K_RECIPE,
        loaders_at('{data}/imagenet'),
    ),
    Case(
        'recipe_in1k_test',
        'tools/test.py on configs/t2t-vit-7_8xb64_in1k.py',
        IN1K_RECIPE,
        loaders_at('{data}/imagenet'),
        tool='test',
    ),
    # detection and segmentation, with their toolboxes' own tools
    Case(
        'mmdet_retinanet_custom',
        "configs/det RetinaNet on a COCO folder, through mmdet's "
        'tools/train.py',
        DET,
        dense_options('{data}/coco', *COCO_EVALUATORS),
        host='mmdet',
    ),
    Case(
        'mmdet_retinanet_test',
        "configs/det RetinaNet through mmdet's tools/test.py",
        DET,
        dense_options('{data}/coco', *COCO_EVALUATORS),
        host='mmdet',
        tool='test',
    ),
    Case(
        'mmdet_resume',
        "configs/det RetinaNet with --resume, through mmdet's tools",
        DET,
        (*dense_options('{data}/coco', *COCO_EVALUATORS), '--resume'),
        host='mmdet',
        loads=None,
    ),
    Case(
        'mmseg_upernet_custom',
        "configs/seg UPerNet on image and label folders, through mmseg's "
        'tools/train.py',
        SEG,
        dense_options('{data}/seg'),
        host='mmseg',
    ),
    Case(
        'mmseg_upernet_test',
        "configs/seg UPerNet through mmseg's tools/test.py",
        SEG,
        dense_options('{data}/seg'),
        host='mmseg',
        tool='test',
    ),
]
