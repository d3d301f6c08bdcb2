"""t2t_plugin.compat: features of newer torch degrade to one warning line,
on the installed torch and with the features faked away."""

import subprocess
import sys
import types
import warnings

import pytest
import torch

from t2t_plugin import compat

from ..helpers import ROOT


@pytest.fixture
def fresh_warnings(monkeypatch):
    """Forget which messages were already given, and record new ones."""
    monkeypatch.setattr(compat, '_warned', set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        yield caught


def messages(caught):
    return [
        str(w.message)
        for w in caught
        if issubclass(w.category, compat.MissingFeatureWarning)
    ]


def test_import_on_this_torch_warns_only_about_what_it_lacks():
    run = subprocess.run(
        [
            sys.executable,
            '-W',
            'always::UserWarning',
            '-c',
            'import t2t_plugin',
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr
    lines = [
        line
        for line in run.stderr.splitlines()
        if 'MissingFeatureWarning' in line
    ]
    # before torch 2.4 the checkpoint reader restricts itself (see
    # tests/test_apis/test_inference.py): nothing is lost to warn about
    assert lines == []


def test_missing_safe_globals_says_so_quietly(monkeypatch, fresh_warnings):
    monkeypatch.setattr(compat, 'HAS_ADD_SAFE_GLOBALS', False)
    assert compat.add_safe_globals([]) is False
    assert messages(fresh_warnings) == []


def test_safe_globals_context_without_the_feature_is_a_no_op(
    monkeypatch, fresh_warnings
):
    monkeypatch.setattr(compat, 'HAS_SAFE_GLOBALS_CONTEXT', False)
    with compat.safe_globals([dict]):
        pass
    [message] = messages(fresh_warnings)
    assert 'torch >= 2.5' in message and '--trust-pickle' in message


def test_grad_scaler_on_old_torch(monkeypatch):
    if compat.HAS_DEVICE_GRAD_SCALER:
        assert isinstance(compat.grad_scaler('cpu'), torch.amp.GradScaler)
    monkeypatch.setattr(compat, 'HAS_DEVICE_GRAD_SCALER', False)
    with pytest.raises(ValueError) as error:
        compat.grad_scaler('cpu')
    assert 'use bf16 or fp32 on CPU' in str(error.value)
    assert '\n' not in str(error.value)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # deprecated on newer torch
        scaler = compat.grad_scaler('cuda')
    assert isinstance(scaler, torch.cuda.amp.GradScaler)


@pytest.mark.parametrize(
    'cuda,compiled,warns',
    [
        (False, 'not available', False),  # no GPU: CPU ops are right
        (True, None, False),  # mmcv-lite: mmdet/mmseg do not import at all
        (True, '12.1', False),  # CUDA ops
        (True, 'not available', True),
    ],
)
def test_cpu_only_mmcv_ops_on_a_gpu_machine(cuda, compiled, warns):
    problem = compat.mmcv_cuda_ops_problem(cuda, compiled)
    assert (problem is not None) == warns
    if warns:
        assert '\n' not in problem and 'fail on CUDA tensors' in problem


def test_gpu_machine_with_cpu_only_mmcv_warns_once_on_import(
    monkeypatch, fresh_warnings
):
    fake_ext = types.SimpleNamespace(
        get_compiling_cuda_version=lambda: 'not available'
    )
    import mmcv

    monkeypatch.setattr(mmcv, '_ext', fake_ext, raising=False)
    monkeypatch.setitem(sys.modules, 'mmcv._ext', fake_ext)
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    compat.warn_if_mmcv_ops_lack_cuda()
    compat.warn_if_mmcv_ops_lack_cuda()
    [message] = messages(fresh_warnings)
    assert message.startswith('mmcv was built without CUDA ops')
