"""What several test modules share: the repository root, tools loaded as
modules or run as processes, the digits demo config, and a tiny model with
its checkpoint and images written to a folder."""

import argparse
import contextlib
import copy
import importlib
import importlib.util
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import weakref
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace

import numpy as np
import torch
from mmengine.config import Config, DictAction
from mmengine.runner import Runner, load_checkpoint
from mmpretrain.registry import DATASETS, MODELS
from PIL import Image
from torch.utils.data.dataloader import _MultiProcessingDataLoaderIter

import t2t_plugin  # noqa: F401  registers the models and datasets
from t2t_plugin.runtime.hooks import release_locks, run_check_hook

ROOT = Path(__file__).resolve().parents[1]


def load_tool(relative_path: str) -> ModuleType:
    """The module of ``ROOT / relative_path``, e.g. ``'tools/infer.py'``."""
    path = ROOT / relative_path
    spec = importlib.util.spec_from_file_location(
        relative_path.replace('/', '_').removesuffix('.py'), path
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_tool_package(relative_path: str) -> ModuleType:
    """A package folder beside a script, e.g.
    ``'.dev_scripts/benchmark_lib'``, imported under its folder name
    (the name its tool imports it by when run as a script)."""
    path = ROOT / relative_path
    name = path.name
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(
        name, path / '__init__.py', submodule_search_locations=[str(path)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


DEMO = str(ROOT / 'configs' / 't2t-vit-mini_1xb64_digits.py')
CUSTOM = str(ROOT / 'configs' / 't2t-vit-7_1xb64_custom-64px.py')
DIGIT_CLASSES = [str(i) for i in range(10)]
# The demo on 32 training and 16 validation images, one epoch.
TINY_DEMO = [
    'train_cfg.max_epochs=1',
    'train_cfg.val_interval=1',
    'train_dataloader.batch_size=16',
    'train_dataloader.dataset.indices=32',
    'val_dataloader.dataset.indices=16',
    'default_hooks.checkpoint.interval=1',
    'default_hooks.logger.interval=1',
]


def free_port() -> int:
    """A TCP port of 127.0.0.1 free now, below the kernel's range for
    outgoing connections: a port from that range (what binding to port 0
    gives) can become the source port of any process's connection before
    the test's server binds it (EADDRINUSE, seen with two torchrun-like
    tests at once)."""
    port_range = Path('/proc/sys/net/ipv4/ip_local_port_range')
    low = (
        int(port_range.read_text().split()[0])
        if port_range.exists()
        else 32768
    )
    for port in random.SystemRandom().sample(range(low // 2, low), 100):
        with socket.socket() as sock:
            try:
                sock.bind(('127.0.0.1', port))
            except OSError:
                continue
            return port
    raise RuntimeError(f'No free port between {low // 2} and {low}.')


def tool_env() -> dict:
    env = dict(os.environ)
    env['PYTHONPATH'] = os.pathsep.join(
        [str(ROOT)] + [p for p in [env.get('PYTHONPATH')] if p]
    )
    env.update(
        OMP_NUM_THREADS='1', CUDA_VISIBLE_DEVICES='', PYTHONWARNINGS='ignore'
    )
    return env


def evaluate_in_process(checkpoint: str) -> tuple:
    """Top-1 / top-5 (%) on the digits val split, computed directly."""
    cfg = Config.fromfile(DEMO)
    model_cfg = copy.deepcopy(cfg.model)
    model_cfg.data_preprocessor = cfg.data_preprocessor
    model = MODELS.build(model_cfg).eval()
    load_checkpoint(model, checkpoint, map_location='cpu', strict=True)
    dataset = DATASETS.build(dict(type='DigitsDataset', split='val'))
    infos = [dataset.get_data_info(i) for i in range(len(dataset))]
    images = torch.stack([torch.from_numpy(i['img']) for i in infos])
    labels = torch.tensor([i['gt_label'] for i in infos])
    inputs = (images[:, None].float() - 77.8) / 95.8
    with torch.no_grad():
        logits = model(inputs, mode='tensor')
    top5 = logits.topk(5, dim=1).indices
    top1 = (top5[:, 0] == labels).float().mean().item() * 100
    top5 = (top5 == labels[:, None]).any(dim=1).float().mean().item() * 100
    return top1, top5


MEAN = (123.675, 116.28, 103.53)
STD = (58.395, 57.12, 57.375)

TINY_CONFIG = """
model = dict(
    type='ImageClassifier',
    backbone=dict(
        type='T2TViT',
        arch=dict(token_layer='{token_layer}', embed_dims=32, num_layers=2,
                  num_heads=2, feedforward_channels=64),
        img_size=32,
        t2t_cfg=dict(token_dims=16)),
    head=dict(type='T2TClsHead', num_classes={num_classes}, in_channels=32))
data_preprocessor = dict(
    num_classes={num_classes}, mean={mean}, std={std}, to_rgb=True)
test_pipeline = {pipeline}
test_dataloader = dict(
    batch_size=1,
    dataset=dict(type='CIFAR10', data_root='data/cifar10',
                 pipeline=test_pipeline))
"""
RESIZE_PIPELINE = [
    dict(type='LoadImageFromFile'),
    dict(type='ConvertImage'),
    dict(type='ResizeEdge', scale=36, edge='short'),
    dict(type='CenterCrop', crop_size=32),
    dict(type='PackInputs'),
]


def write_tiny_model(
    folder, num_classes=10, token_layer='performer', pipeline=None, extra=None
):
    """A tiny config and a randomly initialised checkpoint of it."""
    config = Path(folder) / f'tiny_{token_layer}_{num_classes}.py'
    config.write_text(
        TINY_CONFIG.format(
            token_layer=token_layer,
            num_classes=num_classes,
            mean=list(MEAN),
            std=list(STD),
            pipeline=pipeline or RESIZE_PIPELINE,
        )
    )
    model = MODELS.build(Config.fromfile(str(config)).model)
    with torch.no_grad():
        for name, param in model.named_parameters():
            # weights large enough that the classes are told apart
            param.normal_(0, 0.3 if 'head' in name else 0.1)
    checkpoint = config.with_suffix('.pth')
    torch.save(
        dict(state_dict=model.state_dict(), meta=extra or {}), checkpoint
    )
    return config, checkpoint, model


def write_image(
    path,
    size: tuple = (50, 40),
    seed: int = 0,
    content: str = 'smooth',
    mode: str = 'RGB',
) -> Path:
    """An image file of ``size`` (width, height) in ``mode`` (``'RGB'``,
    ``'L'``), in the format its suffix names; its folders are made.
    ``content``: ``'smooth'`` a picture with some structure (waves drawn
    from ``seed``), ``'noise'`` random pixels of ``seed``, ``'flat'`` one
    grey level, ``'header'`` a PNG whose header states ``size`` and whose
    data is empty: a few dozen bytes that no decoder should be given (what
    a huge image costs to decode is never paid)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    width, height = size
    if content == 'header':
        path.write_bytes(_png_header(width, height, mode))
        return path
    rng = np.random.default_rng(seed)
    if content == 'smooth':
        ys, xs = np.mgrid[0:height, 0:width]
        channels = [
            127 + 120 * np.sin(xs / rng.uniform(3, 9) + ys / rng.uniform(3, 9))
            for _ in range(3)
        ]
        pixels = np.stack(channels, -1).astype(np.uint8)
    elif content == 'noise':
        pixels = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    elif content == 'flat':
        pixels = np.full((height, width, 3), 128, np.uint8)
    else:
        raise ValueError(f'unknown image content {content!r}')
    Image.fromarray(pixels).convert(mode).save(path)
    return path


def _png_header(width: int, height: int, mode: str = 'RGB') -> bytes:
    """The signature, header and an empty data chunk of a PNG of
    ``width`` x ``height`` pixels in ``mode``."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = struct.pack('>I', zlib.crc32(kind + data))
        return struct.pack('>I', len(data)) + kind + data + crc

    colour_type = {'L': 0, 'RGB': 2}[mode]
    header = struct.pack('>IIBBBBB', width, height, 8, colour_type, 0, 0, 0)
    return (
        b'\x89PNG\r\n\x1a\n'
        + chunk(b'IHDR', header)
        + chunk(b'IDAT', zlib.compress(b''))
        + chunk(b'IEND', b'')
    )


def write_class_folders(
    root: Path,
    classes=3,
    per_class: int = 2,
    splits: tuple = ('train', 'val'),
    file_name: str = '{index}',
    suffix: str = '.jpg',
    size=(32, 32),
    content: str = 'noise',
    mode='RGB',
) -> Path:
    """``root`` with a folder per split of ``splits``, each holding a
    folder per class (``classes``: their names, or a count for ``c0``,
    ``c1``, ...) of ``per_class`` images ``file_name`` + ``suffix``
    (``file_name`` formats ``class_name`` and ``index``), written by
    :func:`write_image` with ``content``, image ``index`` of class
    ``label`` from seed ``100 * label + index``. ``size`` and ``mode``
    are one value or a sequence taken in turn over a class's images."""
    names = (
        [f'c{label}' for label in range(classes)]
        if isinstance(classes, int)
        else list(classes)
    )
    sizes = [size] if isinstance(size[0], int) else list(size)
    modes = [mode] if isinstance(mode, str) else list(mode)
    for split in splits:
        for label, class_name in enumerate(names):
            for index in range(per_class):
                name = file_name.format(class_name=class_name, index=index)
                write_image(
                    root / split / class_name / f'{name}{suffix}',
                    sizes[index % len(sizes)],
                    seed=100 * label + index,
                    content=content,
                    mode=modes[index % len(modes)],
                )
    return root


# The suite's tiny T2T-ViT arch, without its token layer (the
# ``tiny_arch`` / ``tiny_t2t_vit`` fixtures of conftest.py add it).
TINY_ARCH = dict(
    embed_dims=32, num_layers=2, num_heads=2, feedforward_channels=64
)


def forget_visualizers_and_loggers() -> None:
    """Drop the visualizers, loggers and message hubs earlier runs of this
    process made, as a fresh process would start. mmengine keeps them by
    name for the process, and the OpenMMLab configs all name theirs
    ``'visualizer'``: a second run would get the first one back (drawing
    into the first run's folder), and
    ``Visualizer.get_current_instance()`` may return one of another
    toolbox. A logger writes to the stdout of the test that made it
    (capsys's, closed once that test ended)."""
    from mmengine.logging import MessageHub, MMLogger
    from mmengine.visualization import Visualizer

    MMLogger._instance_dict.clear()
    # a run's message hub (its best and kept checkpoints) too: mmengine's
    # own Runner, started in the second of an earlier run of the same
    # config, gets that run's back
    classes = [Visualizer, MessageHub]
    while classes:
        cls = classes.pop()
        cls._instance_dict.clear()
        classes.extend(cls.__subclasses__())


def plain_runner(cfg: Config) -> Runner:
    """mmengine's own Runner of ``cfg`` (as mmpretrain's tools build a
    config without ``runner_type``), as in a fresh process: it names its
    visualizer after the config and the second it starts, and would get
    back the one of a run of this process in that second, with that run's
    (maybe removed) folder."""
    forget_visualizers_and_loggers()
    return Runner.from_cfg(cfg)


# The data-loader iterators made in this process (stop_loader_workers).
_loader_iterators = weakref.WeakSet()
_make_loader_iterator = _MultiProcessingDataLoaderIter.__init__


def _recorded_loader_iterator(self, *args, **kwargs):
    _make_loader_iterator(self, *args, **kwargs)
    _loader_iterators.add(self)


_MultiProcessingDataLoaderIter.__init__ = _recorded_loader_iterator


def stop_loader_workers() -> None:
    """Stop the worker processes of the data loaders made in this process
    that are still running (conftest's ``_stop_loader_workers`` says
    why)."""
    for iterator in list(_loader_iterators):
        iterator._shutdown_workers()


def run_main(tool, *args, check: bool = False) -> subprocess.CompletedProcess:
    """A tool's ``main`` run in this process as the interpreter would run
    the script: its exit code, stdout (with mmengine's log) and stderr, an
    uncaught exception as its traceback on stderr and exit code 1. ``tool``
    is a name under ``tools/`` (``'train'``, ``'analysis_tools/get_flops'``)
    or the path of a script (mmpretrain's tools among them). ``main(argv)``
    gets the arguments; a ``main()`` without parameters reads them from
    ``sys.argv``, set for the call, as are the environment variables it
    sets (mmpretrain's tools set ``LOCAL_RANK``). Own streams rather than
    capsys: the loggers mmengine creates keep them, and these stay open for
    the tests that follow. With ``check``, an exit code other than 0
    fails the test, with the end of stderr."""
    import contextlib
    import inspect
    import io
    import traceback
    from unittest import mock

    path = str(tool) if str(tool).endswith('.py') else f'tools/{tool}.py'
    module = load_tool(path)
    argv = [str(arg) for arg in args]
    takes_argv = bool(inspect.signature(module.main).parameters)
    out, err = io.StringIO(), io.StringIO()
    forget_visualizers_and_loggers()
    with (
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
        mock.patch.object(sys, 'argv', [path, *argv]),
        mock.patch.dict(os.environ),
    ):
        try:
            code = module.main(argv) if takes_argv else module.main()
        except SystemExit as exit_info:  # argparse errors, sys.exit(...)
            code = exit_info.code
            if isinstance(code, str):  # printed, exit code 1
                print(code, file=sys.stderr)
                code = 1
        except Exception:
            traceback.print_exc()
            code = 1
        finally:
            stop_loader_workers()
    result = subprocess.CompletedProcess(
        args, code or 0, out.getvalue(), err.getvalue()
    )
    if check:
        assert result.returncode == 0, result.stderr[-3000:]
    return result


MMPRETRAIN_TOOLS = (
    Path(importlib.util.find_spec('mmpretrain').origin).parent
    / '.mim'
    / 'tools'
)


def run_mmpretrain_tool(tool: str, *args) -> subprocess.CompletedProcess:
    """mmpretrain's own ``tools/<tool>.py`` (``'train'``,
    ``'analysis_tools/confusion_matrix'``) with :func:`run_main`."""
    return run_main(MMPRETRAIN_TOOLS / f'{tool}.py', *args)


# Runs several tools as scripts in turn in one interpreter, each in its own
# folder with its own environment variables and output files, and says
# after each what had been imported by then (so far, in all of them: a
# case answered before the models is proven so only when every case before
# it was too).
ANSWERS_BEFORE_MODELS = """
import json, os, runpy, sys, traceback
environ = dict(os.environ)
for case in json.loads(sys.argv[1]):
    os.chdir(case['cwd'])
    os.environ.clear()
    os.environ.update(environ, **case['env'])
    sys.argv = [case['tool'], *case['args']]
    saved = os.dup(1), os.dup(2)
    with open(case['stdout'], 'w') as out, open(case['stderr'], 'w') as err:
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        try:
            runpy.run_path(case['tool'], run_name='__main__')
        except SystemExit as exit_info:
            print('exit', exit_info.code)
        except Exception:
            traceback.print_exc()
        print('imported', 'mmpretrain.models' in sys.modules,
              't2t_plugin' in sys.modules, 'torch' in sys.modules)
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
"""


def answers_before_models(cases: list[dict]) -> list[tuple[str, list]]:
    """Run the ``tools/<tool>.py`` of each of ``cases`` (dicts of
    ``tool``, ``args``, ``cwd`` and environment variables ``env``) in one
    fresh interpreter, in their order (those that import the least
    first): for each, its stderr and what had been imported when it ended
    (its exit code first)."""
    with tempfile.TemporaryDirectory() as folder:
        runs = [
            dict(
                tool=str(ROOT / 'tools' / f'{case["tool"]}.py'),
                args=list(map(str, case['args'])),
                cwd=str(case['cwd']),
                env=case.get('env', {}),
                stdout=f'{folder}/{index}.out',
                stderr=f'{folder}/{index}.err',
            )
            for index, case in enumerate(cases)
        ]
        result = subprocess.run(
            [sys.executable, '-c', ANSWERS_BEFORE_MODELS, json.dumps(runs)],
            env=tool_env(), capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-3000:]
        return [
            (
                Path(run['stderr']).read_text().strip(),
                Path(run['stdout']).read_text().splitlines(),
            )
            for run in runs
        ]


def answer_before_models(tool: str, *args, cwd: Path):
    """Run ``tools/<tool>.py`` with ``args`` in a fresh interpreter: its
    stderr and what it had imported when it ended (its exit code first)."""
    return answers_before_models([dict(tool=tool, args=args, cwd=cwd)])[0]


def last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else ''


# What goes wrong, through every door (test_runtime/test_reliability.py and
# the hook tests of test_runtime/test_hooks/): our tools' one line, and a
# Runner built from the config as any OpenMMLab tool builds it.


def one_line(err: str) -> str:
    """The only line of ``err``, which holds no traceback."""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert 'Traceback' not in err
    return lines[0]


def door(
    config: str,
    options: dict,
    work_dir: Path,
    mode: str = 'train',
    build=plain_runner,
):
    """What a Runner built from the config raises (None if it runs
    through): mmengine's own Runner, or with ``build=RUNNERS.build`` the
    config's ``runner_type``, as the OpenMMLab tools build it."""
    forget_visualizers_and_loggers()  # as a fresh process
    cfg = Config.fromfile(config)
    cfg.merge_from_dict(options)
    cfg.work_dir = str(work_dir)
    runner = build(cfg)
    try:
        getattr(runner, mode)()
    except Exception as error:
        release_locks()  # as the process's end would
        return error
    return None


@contextlib.contextmanager
def held_work_dir(work_dir: Path) -> Iterator[SimpleNamespace]:
    """A process that holds the lock of ``work_dir`` as a running training
    does (``RunCheckHook``'s), killed (-9) at the end: a fork of this one,
    which has imported the plugin already (a fresh interpreter spends
    seconds importing it only to take a lock). A POSIX lock belongs to
    the process that took it, so this one's own attempt is refused."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the holder: never returns into the test
        try:
            os.close(read_end)
            run_check_hook.lock_work_dir(str(work_dir))
            os.write(write_end, b'locked')
            while True:
                signal.pause()
        finally:
            os._exit(1)
    os.close(write_end)
    try:
        # one write of a few bytes arrives whole; b'' if the holder failed
        assert os.read(read_end, 16) == b'locked'
        yield SimpleNamespace(pid=pid)
    finally:
        os.close(read_end)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def as_dict(options: list) -> dict:
    """``--cfg-options`` as mmengine's argument parser reads them."""
    namespace = argparse.Namespace()
    DictAction(None, 'cfg_options')(None, namespace, options)
    return namespace.cfg_options


def digit_model(**backbone):
    """The digits demo's model, ``backbone`` updating its backbone."""
    model_cfg = Config.fromfile(DEMO).model
    model_cfg.backbone.update(backbone)
    return MODELS.build(model_cfg)


def save_checkpoint(path: Path, classes, **backbone) -> Path:
    """A weights-only checkpoint of :func:`digit_model` trained on
    ``classes``."""
    torch.save(
        dict(
            state_dict=digit_model(**backbone).state_dict(),
            meta=dict(dataset_meta=dict(classes=tuple(classes))),
        ),
        path,
    )
    return path


def fake_runner(model=None):
    """What a hook reads of a Runner at iteration and epoch 0 (without
    hooks or a work dir)."""
    return SimpleNamespace(iter=0, epoch=0, model=model, hooks=[], work_dir='')


def loader_options(root: Path, *loaders: str) -> list:
    """Point the dataloaders at ``root`` and load in the main process."""
    options = []
    for loader in loaders:
        options += [
            f'{loader}.dataset.data_root={root}',
            f'{loader}.num_workers=0',
            f'{loader}.persistent_workers=False',
        ]
    return options


def custom_options(
    root: Path, epochs: int = 1, batch_size: int = 2, workers: bool = False
) -> list:
    """``--cfg-options`` of the custom-data config (:data:`CUSTOM`) on the
    image folders in ``root``: ``epochs`` epochs in batches of
    ``batch_size``, every loader reading ``root`` in the main process, or
    with ``workers=True`` in the loaders' workers as shipped (2 persistent
    ones)."""
    options = [
        f'train_cfg.max_epochs={epochs}',
        f'train_dataloader.batch_size={batch_size}',
    ]
    loaders = ('train_dataloader', 'val_dataloader', 'test_dataloader')
    if workers:
        return options + [
            f'{loader}.dataset.data_root={root}' for loader in loaders
        ]
    return options + loader_options(root, *loaders)


# mmdetection and mmsegmentation (test_configs/test_dense.py and
# test_custom_data.py,
# test_runtime/test_hooks/test_pyramid_stride_check_hook.py).


def toolbox(name: str) -> ModuleType:
    """Import mmdet / mmseg with all modules registered, or skip."""
    import pytest

    try:
        package = importlib.import_module(name)
        importlib.import_module(f'{name}.models')
        utils = importlib.import_module(f'{name}.utils')
    except Exception as error:  # mmcv without compiled ops raises many kinds
        pytest.skip(
            f'{name} is not importable ({type(error).__name__}: '
            f'{error}); `make install-dense` installs it.'
        )
    utils.register_all_modules(init_default_scope=False)
    return package


# A two-layer T2T-ViT with narrow T2T maps keeps every step around a second.
DENSE_ARCH = dict(
    token_layer='transformer',
    embed_dims=64,
    num_layers=2,
    num_heads=2,
    feedforward_channels=128,
)
DENSE_TOKEN_DIMS = 16


def dense_config(path: Path, tiny: bool) -> Config:
    """A detection or segmentation config; with ``tiny``, its backbone
    :data:`DENSE_ARCH` (the token layer of the config's arch) and the
    pyramid's widths to match."""
    cfg = Config.fromfile(str(path))
    if tiny:
        backbone = cfg.model.backbone
        token_layer = 'performer' if backbone.arch == '14' else 'transformer'
        backbone.arch = dict(DENSE_ARCH, token_layer=token_layer)
        backbone.t2t_cfg = dict(token_dims=DENSE_TOKEN_DIMS)
        backbone.drop_path_rate = 0.0
        backbone.init_cfg = None
        necks = cfg.model.neck
        pyramid = necks[0] if isinstance(necks, list) else necks
        pyramid.in_channels = (
            DENSE_TOKEN_DIMS,
            DENSE_TOKEN_DIMS,
            DENSE_ARCH['embed_dims'],
        )
    return cfg


def build_dense_model(cfg: Config, scope: str):
    """``cfg.model`` built in the registry of ``scope`` (``'mmdet'``,
    ``'mmseg'``), the default scope from then on."""
    from mmengine.registry import init_default_scope

    registry = importlib.import_module(f'{scope}.registry')
    init_default_scope(scope)
    return registry.MODELS.build(cfg.model)


def tiny_retinanet(template: str, folder: Path, name: str) -> Path:
    """``folder/name``: a RetinaNet config written from ``template`` (its
    fields ``base``, ``arch``, ``token_dims``, ``root``) over the T2T-ViT-t-14
    COCO config with the tiny dense arch, reading a COCO set that
    :func:`write_coco` writes into ``folder/coco`` (128 px)."""
    write_coco(folder / 'coco', size=128)
    base = ROOT / 'configs' / 'det' / 'retinanet_t2t-vit-t-14_fpn_1x_coco.py'
    config = folder / name
    config.write_text(
        template.format(
            base=str(base),
            arch=DENSE_ARCH,
            token_dims=DENSE_TOKEN_DIMS,
            root=str(folder / 'coco'),
        )
    )
    return config


def write_coco(root: Path, num_images: int = 2, size: int = 96) -> None:
    """A bright 'cat' box and a dark 'dog' box on noise, in COCO format:
    ``images/{split}_{index}.jpg`` and ``annotations/{split}.json`` of the
    splits ``train`` and ``val``, each box with its outline as the polygon
    of its mask."""
    import mmcv

    rng = np.random.default_rng(0)
    (root / 'images').mkdir(parents=True)
    (root / 'annotations').mkdir()
    categories = [dict(id=1, name='cat'), dict(id=2, name='dog')]
    for split in ('train', 'val'):
        images, annotations = [], []
        for index in range(num_images):
            image = rng.integers(90, 160, (size, size, 3), dtype=np.uint8)
            for category, (x, y, w, h), value in (
                (1, (8, 10, 36, 30), 250),
                (2, (50, 48, 38, 40), 5),
            ):
                image[y : y + h, x : x + w] = value
                polygon = [x, y, x + w, y, x + w, y + h, x, y + h]
                annotations.append(
                    dict(
                        id=len(annotations) + 1,
                        image_id=index,
                        category_id=category,
                        bbox=[x, y, w, h],
                        area=w * h,
                        segmentation=[polygon],
                        iscrowd=0,
                    )
                )
            name = f'{split}_{index}.jpg'
            mmcv.imwrite(image, str(root / 'images' / name))
            images.append(
                dict(id=index, file_name=name, height=size, width=size)
            )
        (root / 'annotations' / f'{split}.json').write_text(
            json.dumps(
                dict(
                    images=images,
                    annotations=annotations,
                    categories=categories,
                )
            )
        )
