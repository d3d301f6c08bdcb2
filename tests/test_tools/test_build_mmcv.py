"""tools/install/build_mmcv.sh: CPU or CUDA ops, cache keys and refusals,
with faked GPUs and compilers (nothing is built here)."""

import os
import subprocess
import sys
import zipfile

import pytest

from ..helpers import ROOT, load_tool

mmcv_build = load_tool('tools/install/mmcv_build.py')
SCRIPT = ROOT / 'tools/install/build_mmcv.sh'


def machine(**changes):
    facts = dict(
        torch_version='2.1.2',
        torch_cuda='12.1',
        cuda_available=True,
        cuda_home='/usr/local/cuda',
        nvcc_version='12.1',
        python_tag='cp311',
    )
    facts.update(changes)
    return mmcv_build.Machine(**facts)


def fake_wheel(path, library: bytes):
    with zipfile.ZipFile(path, 'w') as archive:
        archive.writestr('mmcv/__init__.py', '')
        archive.writestr(
            'mmcv/_ext.cpython-311-x86_64-linux-gnu.so', b'\x7fELF' + library
        )
    return str(path)


def fake_nvcc(folder, release):
    nvcc = folder / 'bin' / 'nvcc'
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text(
        '#!/bin/sh\necho "Cuda compilation tools, release '
        f'{release}, V{release}.105"\n'
    )
    nvcc.chmod(0o755)
    return str(folder)


def test_gpu_and_compiler_build_cuda_ops_keyed_by_cuda_version():
    plan = mmcv_build.plan_build(machine())
    assert plan.kind == 'cuda'
    assert plan.cache_key == 'mmcv-2.1.0-torch2.1.2-cu121'
    assert plan.env['FORCE_CUDA'] == '1'
    assert plan.env['CUDA_HOME'] == '/usr/local/cuda'


def test_no_gpu_builds_cpu_ops_even_with_a_compiler():
    plan = mmcv_build.plan_build(machine(cuda_available=False))
    assert (plan.kind, plan.device_key) == ('cpu', 'cpu')
    assert plan.cache_key == 'mmcv-2.1.0-torch2.1.2-cpu'
    assert plan.env == dict(MMCV_WITH_OPS='1', FORCE_CUDA='0')


@pytest.mark.parametrize(
    'changes',
    [dict(nvcc_version=None), dict(cuda_home=None, nvcc_version=None)],
)
def test_gpu_without_compiler_is_refused_in_one_line(changes):
    with pytest.raises(RuntimeError) as error:
        mmcv_build.plan_build(machine(**changes))
    message = str(error.value)
    assert '\n' not in message
    assert 'no CUDA compiler' in message and 'mim install mmcv==2.1.0' in (
        message
    )


def test_compiler_of_another_cuda_major_is_refused():
    with pytest.raises(RuntimeError, match='nvcc is CUDA 13.0'):
        mmcv_build.plan_build(machine(nvcc_version='13.0'))


def test_wheel_kind_is_read_from_the_compiled_library(tmp_path):
    cpu = fake_wheel(tmp_path / 'cpu.whl', b'libc10.so libtorch_cpu.so')
    cuda = fake_wheel(tmp_path / 'cuda.whl', b'libc10.so libc10_cuda.so')
    assert not mmcv_build.wheel_has_cuda_ops(cpu)
    assert mmcv_build.wheel_has_cuda_ops(cuda)
    lite = tmp_path / 'lite.whl'
    with zipfile.ZipFile(lite, 'w') as archive:
        archive.writestr('mmcv/__init__.py', '')
    with pytest.raises(RuntimeError, match='no compiled ops'):
        mmcv_build.wheel_has_cuda_ops(str(lite))


def test_cpu_only_wheel_is_refused_where_torch_sees_a_gpu(tmp_path):
    cpu = fake_wheel(
        tmp_path / 'mmcv-2.1.0-cp311-cp311-linux_x86_64.whl', b'libc10.so'
    )
    mmcv_build.check_wheel(cpu, machine(cuda_available=False))
    with pytest.raises(RuntimeError) as error:
        mmcv_build.check_wheel(cpu, machine())
    assert 'CPU-only ops but torch sees a GPU' in str(error.value)
    assert '\n' not in str(error.value)
    cuda = fake_wheel(tmp_path / 'cuda.whl', b'libc10_cuda.so')
    mmcv_build.check_wheel(cuda, machine())


def test_read_machine_uses_torch_and_the_compiler_of_cuda_home(
    tmp_path, monkeypatch
):
    import torch
    from torch.utils import cpp_extension

    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    monkeypatch.setattr(torch.version, 'cuda', '12.1')
    monkeypatch.setattr(
        cpp_extension, 'CUDA_HOME', fake_nvcc(tmp_path / 'cuda', '12.1')
    )
    facts = mmcv_build.read_machine()
    assert facts.cuda_available and facts.nvcc_version == '12.1'
    assert mmcv_build.plan_build(facts).device_key == 'cu121'
    monkeypatch.setattr(cpp_extension, 'CUDA_HOME', str(tmp_path / 'none'))
    assert mmcv_build.read_machine().nvcc_version is None
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    assert mmcv_build.plan_build(mmcv_build.read_machine()).cache_key.endswith(
        '-cpu'
    )


def fake_gpu_python(tmp_path, cuda_home):
    """Environment in which this interpreter's torch 'sees a GPU'."""
    site = tmp_path / 'site'
    site.mkdir()
    (site / 'sitecustomize.py').write_text(
        'import torch\n'
        'torch.cuda.is_available = lambda: True\n'
        "torch.version.cuda = '12.1'\n"
    )
    env = dict(
        os.environ,
        PYTHON=sys.executable,
        PYTHONPATH=os.pathsep.join([str(site), str(ROOT)]),
        CUDA_HOME=cuda_home,
        T2T_WHEEL_CACHE=str(tmp_path / 'cache'),
    )
    return env


def test_script_refuses_a_gpu_node_without_compiler(tmp_path):
    empty = tmp_path / 'no-cuda'
    empty.mkdir()
    run = subprocess.run(
        ['bash', str(SCRIPT)],
        capture_output=True,
        text=True,
        env=fake_gpu_python(tmp_path, str(empty)),
    )
    assert run.returncode == 2
    lines = [
        line
        for line in run.stderr.splitlines()
        if line.startswith('build_mmcv.sh:')
    ]
    assert len(lines) == 1 and 'no CUDA compiler' in lines[0]
    assert 'Building' not in run.stdout
    assert not (tmp_path / 'cache').exists()


def test_plan_prints_shell_assignments_for_the_script(tmp_path):
    env = fake_gpu_python(tmp_path, fake_nvcc(tmp_path / 'cuda', '12.1'))
    run = subprocess.run(
        [sys.executable, str(ROOT / 'tools/install/mmcv_build.py'), 'plan'],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assigned = dict(line.split('=', 1) for line in run.stdout.splitlines())
    assert assigned['MMCV_KIND'] == 'cuda'
    assert assigned['MMCV_DEVICE_KEY'] == 'cu121'
    assert assigned['MMCV_CACHE_KEY'].endswith('-cu121')
    assert 'FORCE_CUDA=1' in assigned['MMCV_BUILD_ENV']
