"""Decide how ``build_mmcv.sh`` builds full mmcv: CPU or CUDA ops.

mmcv 2.1.0's ``setup.py`` compiles CUDA ops whenever torch sees a GPU and
fails without ``nvcc``; a wheel built on a CPU node fails on CUDA tensors.
The decision goes into the wheel cache's key (``cpu`` or ``cu121``). A
machine that cannot build or use the mmcv it needs is a RuntimeError with
a one-line reason.

Usage: ``mmcv_build.py plan | check-wheel WHEEL``.
"""

import os
import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from typing import Optional

MMCV_VERSION = '2.1.0'
INSTALL_DOC = 'docs/install.md'
EXT_PATTERN = r'mmcv/_ext[.].*so$'  # the compiled ops in a wheel


@dataclass
class Machine:
    """What the decision depends on (``torch_cuda`` None: a CPU torch;
    ``cxx_std``: what torch's headers need, ``'c++20'`` for recent torch,
    where mmcv 2.1.0 hard-codes ``-std=c++17``)."""

    torch_version: str
    torch_cuda: Optional[str]
    cuda_available: bool
    cuda_home: Optional[str]
    nvcc_version: Optional[str]
    python_tag: str
    cxx_std: str = 'c++17'


@dataclass
class BuildPlan:
    """How to build mmcv (``kind``: ``'cpu'`` or ``'cuda'``; ``env``: of
    its ``setup.py``) and its wheel cache's folder, ``cache_key``."""

    kind: str
    device_key: str
    cache_key: str
    env: dict[str, str]


def plan_build(machine: Machine) -> BuildPlan:
    """CUDA ops when torch sees a GPU and a CUDA compiler of torch's major
    version exists, CPU ops when it sees no GPU; else RuntimeError."""
    prefix = f'mmcv-{MMCV_VERSION}-torch{machine.torch_version}'
    env = dict(MMCV_WITH_OPS='1', FORCE_CUDA='0')
    if not machine.cuda_available:
        return BuildPlan('cpu', 'cpu', f'{prefix}-cpu', env)
    prebuilt = (
        f'or, on torch 2.1 with CUDA 12.1, install the prebuilt '
        f'wheel: mim install mmcv=={MMCV_VERSION} ({INSTALL_DOC})'
    )
    if machine.nvcc_version is None or machine.cuda_home is None:
        raise RuntimeError(
            f'torch {machine.torch_version} sees a GPU but no CUDA compiler '
            f'was found (nvcc, CUDA_HOME): mmcv needs CUDA ops there. '
            f'Install the CUDA {machine.torch_cuda} toolkit and set '
            f'CUDA_HOME, {prebuilt}.'
        )
    if machine.nvcc_version.split('.')[0] != machine.torch_cuda.split('.')[0]:
        raise RuntimeError(
            f'nvcc is CUDA {machine.nvcc_version} but torch '
            f'{machine.torch_version} was built with CUDA '
            f'{machine.torch_cuda}: point CUDA_HOME at a CUDA '
            f'{machine.torch_cuda} toolkit, {prebuilt}.'
        )
    device_key = 'cu' + machine.torch_cuda.replace('.', '')
    env.update(FORCE_CUDA='1', CUDA_HOME=machine.cuda_home)
    return BuildPlan('cuda', device_key, f'{prefix}-{device_key}', env)


def wheel_has_cuda_ops(wheel: str) -> bool:
    """Whether an mmcv wheel's ``mmcv._ext`` links torch's CUDA libraries
    (read without importing it); RuntimeError if it has no compiled ops."""
    with zipfile.ZipFile(wheel) as archive:
        names = [n for n in archive.namelist() if re.match(EXT_PATTERN, n)]
        if not names:
            raise RuntimeError(
                f'{wheel} has no compiled ops (mmcv/_ext); '
                'rebuild it with build_mmcv.sh.'
            )
        library = archive.read(names[0])
    return b'libc10_cuda.so' in library or b'libcudart' in library


def check_wheel(wheel: str, machine: Machine) -> None:
    """Refuse (RuntimeError) a CPU-only wheel where torch sees a GPU."""
    if machine.cuda_available and not wheel_has_cuda_ops(wheel):
        raise RuntimeError(
            f'{os.path.basename(wheel)} has CPU-only ops but torch sees a '
            f'GPU, where mmdet/mmseg would fail on CUDA tensors: remove it '
            f'and rerun build_mmcv.sh on this node, or install the prebuilt '
            f'wheel: mim install mmcv=={MMCV_VERSION} ({INSTALL_DOC}).'
        )


def _nvcc_version(cuda_home: Optional[str]) -> Optional[str]:
    """``'12.1'`` from ``CUDA_HOME/bin/nvcc`` (the compiler torch's
    extension builder runs), or None."""
    if not cuda_home:
        return None
    try:
        out = subprocess.run(
            [os.path.join(cuda_home, 'bin', 'nvcc'), '--version'],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    match = re.search(r'release (\d+\.\d+)', out.stdout)
    return match.group(1) if match else None


def read_machine() -> Machine:
    """The facts of this machine, from the installed torch."""
    import importlib.util

    import torch

    cuda_available = torch.cuda.is_available()
    cuda_home = None
    if cuda_available:
        # imported only here: without a GPU it logs a warning about CUDA
        from torch.utils import cpp_extension

        cuda_home = cpp_extension.CUDA_HOME
    source = importlib.util.find_spec('torch.utils.cpp_extension').origin
    with open(source, encoding='utf-8') as file:
        cxx_std = 'c++20' if "'-std=c++20'" in file.read() else 'c++17'
    return Machine(
        torch_version=torch.__version__.split('+')[0],
        torch_cuda=torch.version.cuda,
        cuda_available=cuda_available,
        cuda_home=cuda_home,
        nvcc_version=_nvcc_version(cuda_home) if cuda_available else None,
        python_tag=f'cp{sys.version_info.major}{sys.version_info.minor}',
        cxx_std=cxx_std,
    )


def main(argv: Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        machine = read_machine()
        if argv[:1] == ['plan']:
            plan = plan_build(machine)
            env = ' '.join(
                f'{name}={value}' for name, value in plan.env.items()
            )
            print(
                f'MMCV_KIND={plan.kind}\n'
                f'MMCV_DEVICE_KEY={plan.device_key}\n'
                f'MMCV_CACHE_KEY={plan.cache_key}\n'
                f'PYTHON_TAG={machine.python_tag}\n'
                f'MMCV_CXX_STD={machine.cxx_std}\n'
                f'MMCV_BUILD_ENV="{env}"'
            )
        elif argv[:1] == ['check-wheel'] and len(argv) == 2:
            check_wheel(argv[1], machine)
        else:
            print(
                'usage: mmcv_build.py plan | check-wheel WHEEL',
                file=sys.stderr,
            )
            return 2
    except RuntimeError as refusal:
        print(f'build_mmcv.sh: {refusal}', file=sys.stderr)
        return 2
    return 0


if __name__ == '__main__':
    sys.exit(main())
