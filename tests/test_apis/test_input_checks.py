"""The checks of a tool's inputs that need no model
(t2t_plugin/apis/input_checks.py)."""

import pytest
import torch

from t2t_plugin.apis import ArgumentRefused, check_device


def test_devices_are_checked_against_the_machine(monkeypatch):
    check_device('cpu')
    with pytest.raises(ArgumentRefused) as error:
        check_device('gpu')
    assert str(error.value) == (
        "--device gpu is not a device; give 'cpu', 'cuda' or 'cuda:N' "
        '(N from 0).'
    )
    with pytest.raises(ArgumentRefused, match="run on 'cpu' or 'cuda"):
        check_device('meta')
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    with pytest.raises(ArgumentRefused) as error:
        check_device('cuda:0')
    assert str(error.value) == (
        '--device cuda:0: this machine has no CUDA device '
        '(torch.cuda.is_available() is False); use --device cpu.'
    )
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    monkeypatch.setattr(torch.cuda, 'device_count', lambda: 2)
    check_device('cuda:1')
    with pytest.raises(ArgumentRefused) as error:
        check_device('cuda:2')
    assert str(error.value) == (
        '--device cuda:2: this machine has 2 CUDA device(s), cuda:0 to cuda:1.'
    )
