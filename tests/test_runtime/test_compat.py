"""t2t_plugin.compat: features of newer torch degrade to one warning line,
on the installed torch and with the features faked away."""

import inspect
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
def test_gpu_machine_with_cpu_only_mmcv_warns_once_on_import(
    cuda, compiled, warns, monkeypatch, fresh_warnings
):
    import mmcv

    if compiled is None:  # mmcv-lite: no compiled ops to import
        monkeypatch.delattr(mmcv, '_ext', raising=False)
        monkeypatch.setitem(sys.modules, 'mmcv._ext', None)
    else:
        fake_ext = types.SimpleNamespace(
            get_compiling_cuda_version=lambda: compiled
        )
        monkeypatch.setattr(mmcv, '_ext', fake_ext, raising=False)
        monkeypatch.setitem(sys.modules, 'mmcv._ext', fake_ext)
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: cuda)
    compat.warn_if_mmcv_ops_lack_cuda()
    compat.warn_if_mmcv_ops_lack_cuda()
    found = messages(fresh_warnings)
    assert len(found) == warns
    if warns:
        assert found[0].startswith('mmcv was built without CUDA ops')
        assert '\n' not in found[0] and 'fail on CUDA tensors' in found[0]


# --- the private names of the hosts: each fails here when a release
# renames or changes it -----------------------------------------------------


def test_torch_weights_only_globals_hold_the_tensor_rebuilders():
    allowed = compat.torch_weights_only_globals()
    assert (
        allowed['torch._utils._rebuild_tensor_v2'] is compat.rebuild_tensor()
    )
    assert (
        allowed['collections.OrderedDict']
        is __import__('collections').OrderedDict
    )


def test_a_pickled_tensor_names_rebuild_tensor():
    rebuild, _ = torch.zeros(2).__reduce_ex__(2)
    assert rebuild is compat.rebuild_tensor()


def test_is_view_tells_a_view_from_a_copy():
    base = torch.arange(6.0)
    assert compat.is_view(base.view(2, 3))
    assert compat.is_view(base[1:])
    assert not compat.is_view(base)
    assert not compat.is_view(base.view(2, 3).clone())


@pytest.mark.parametrize('protocol', [2, 4, 5])
def test_pickled_numpy_names_only_the_numpy_pickle_globals(protocol):
    """Every global a pickled array, dtype and scalar names is either
    public numpy or one of numpy_pickle_globals, the same object."""
    import io
    import pickle

    import numpy as np

    allowed = compat.numpy_pickle_globals()
    data = pickle.dumps(
        [np.arange(3.0), np.float32(1.5), np.int64(2)], protocol=protocol
    )
    names = set()

    class Recorder(pickle.Unpickler):
        def find_class(self, module, name):
            names.add((module, name))
            return super().find_class(module, name)

    Recorder(io.BytesIO(data)).load()
    private = {name for name in names if name[1].startswith('_')}
    private |= {name for name in names if name[1] == 'scalar'}
    assert private and private <= set(allowed)
    for module, name in private:
        found = getattr(__import__(module, fromlist=[name]), name)
        assert found is allowed[(module, name)]


def test_python3_module_of_a_protocol_2_name():
    assert compat.python3_module('__builtin__') == 'builtins'
    assert compat.python3_module('copy_reg') == 'copyreg'
    assert compat.python3_module('numpy') == 'numpy'


def test_default_store_is_the_process_groups(tmp_path):
    import torch.distributed as dist

    store = dist.FileStore(str(tmp_path / 'store'), 1)
    dist.init_process_group('gloo', store=store, rank=0, world_size=1)
    try:
        found = compat.default_store()
        assert isinstance(found, dist.Store)
        found.set('key', 'value')
        assert found.get('key') == b'value'
    finally:
        dist.destroy_process_group()


def test_mmengine_home_follows_its_variable(tmp_path, monkeypatch):
    monkeypatch.setenv('MMENGINE_HOME', str(tmp_path))
    assert compat.mmengine_home() == str(tmp_path)


def test_mmcls_backbone_weights_are_the_backbones_bare():
    weight = torch.zeros(1)
    checkpoint = {'state_dict': {'backbone.a': weight, 'head.b': weight}}
    assert compat.mmcls_backbone_weights(checkpoint) == {
        'state_dict': {'a': weight}
    }


def test_runner_timestamp_and_train_dataloader_are_the_runners():
    from mmengine.runner import Runner

    runner = Runner.__new__(Runner)
    compat.set_runner_timestamp(runner, '20260101_000000')
    assert runner.timestamp == '20260101_000000'
    loader = dict(batch_size=2)
    compat.set_train_dataloader(runner, loader)
    assert compat.unbuilt_train_dataloader(runner) is loader
    # mmengine builds its training loop from that attribute
    assert 'self._train_dataloader' in inspect.getsource(
        Runner.build_train_loop
    )


def test_get_model_attaches_the_config_and_dataset_meta():
    from mmpretrain import get_model

    from ..helpers import DEMO

    model = get_model(DEMO)
    assert compat.model_config(model).model.backbone.type == 'T2TViT'
    # the classes of the config's test dataset
    classes = compat.model_dataset_meta(model)['classes']
    assert list(classes) == [str(digit) for digit in range(10)]
    compat.set_model_dataset_meta(model, dict(classes=['a', 'b']))
    assert compat.model_dataset_meta(model) == dict(classes=['a', 'b'])
