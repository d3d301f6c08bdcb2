"""What several test modules share: the repository root, tools loaded as
modules or run as processes, the digits demo config, and a tiny model with
its checkpoint and images written to a folder."""

import copy
import importlib.util
import os
import random
import socket
import subprocess
import sys
import weakref
from pathlib import Path
from types import ModuleType

import numpy as np
import torch
from mmengine.config import Config
from mmengine.runner import load_checkpoint
from mmpretrain.registry import DATASETS, MODELS
from PIL import Image
from torch.utils.data.dataloader import _MultiProcessingDataLoaderIter

import t2t_plugin  # noqa: F401  registers the models and datasets

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


def run_tool(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )


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


def write_image(path, size=(50, 40), seed=0):
    """A smooth colour picture (width, height) with some structure."""
    rng = np.random.default_rng(seed)
    width, height = size
    ys, xs = np.mgrid[0:height, 0:width]
    channels = [
        127 + 120 * np.sin(xs / rng.uniform(3, 9) + ys / rng.uniform(3, 9))
        for _ in range(3)
    ]
    Image.fromarray(np.stack(channels, -1).astype(np.uint8)).save(path)
    return Path(path)


# The suite's tiny T2T-ViT arch, without its token layer (the
# ``tiny_arch`` / ``tiny_t2t_vit`` fixtures of conftest.py add it).
TINY_ARCH = dict(
    embed_dims=32, num_layers=2, num_heads=2, feedforward_channels=64
)


def forget_visualizers_and_loggers() -> None:
    """Drop the visualizers and loggers earlier runs of this process made,
    as a fresh process would start. mmengine keeps them by name for the
    process, and the OpenMMLab configs all name theirs ``'visualizer'``: a
    second run would get the first one back (drawing into the first run's
    folder), and ``Visualizer.get_current_instance()`` may return one of
    another toolbox. A logger writes to the stdout of the test that made it
    (capsys's, closed once that test ended)."""
    from mmengine.logging import MMLogger
    from mmengine.visualization import Visualizer

    MMLogger._instance_dict.clear()
    classes = [Visualizer]
    while classes:
        cls = classes.pop()
        cls._instance_dict.clear()
        classes.extend(cls.__subclasses__())


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


def run_main(tool, *args) -> subprocess.CompletedProcess:
    """A tool's ``main`` run in this process as the interpreter would run
    the script: its exit code, stdout (with mmengine's log) and stderr, an
    uncaught exception as its traceback on stderr and exit code 1. ``tool``
    is a name under ``tools/`` (``'train'``, ``'analysis_tools/get_flops'``)
    or the path of a script (mmpretrain's tools among them). ``main(argv)``
    gets the arguments; a ``main()`` without parameters reads them from
    ``sys.argv``, set for the call, as are the environment variables it
    sets (mmpretrain's tools set ``LOCAL_RANK``). Own streams rather than
    capsys: the loggers mmengine creates keep them, and these stay open for
    the tests that follow."""
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
    return subprocess.CompletedProcess(
        args, code or 0, out.getvalue(), err.getvalue()
    )


MMPRETRAIN_TOOLS = (
    Path(importlib.util.find_spec('mmpretrain').origin).parent
    / '.mim'
    / 'tools'
)


def run_mmpretrain_tool(tool: str, *args) -> subprocess.CompletedProcess:
    """mmpretrain's own ``tools/<tool>.py`` (``'train'``,
    ``'analysis_tools/confusion_matrix'``) with :func:`run_main`."""
    return run_main(MMPRETRAIN_TOOLS / f'{tool}.py', *args)


def last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else ''
