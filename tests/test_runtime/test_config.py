"""load_config: every way a config fails is one ConfigError line that says
what to do."""

import inspect
import sys
from pathlib import Path

import mmengine.utils.package_utils
import pytest

from t2t_plugin.runtime import ConfigError, load_config

from ..helpers import ROOT

IMAGENET_CONFIG = ROOT / 'configs/t2t-vit-t-14_8xb64_in1k.py'


def test_imagenet_config_inherits_mmpretrain_base():
    cfg = load_config(IMAGENET_CONFIG)
    # from mmpretrain::_base_/datasets/imagenet_bs64_t2t_224.py
    assert cfg.train_dataloader.dataset.type == 'ImageNet'


# onedl-mmengine finds installed packages with importlib instead
MMENGINE_USES_PKG_RESOURCES = 'pkg_resources' in Path(
    inspect.getsourcefile(mmengine.utils.package_utils)
).read_text(encoding='utf-8')


@pytest.mark.skipif(
    not MMENGINE_USES_PKG_RESOURCES,
    reason='this mmengine does not read config bases with pkg_resources',
)
def test_setuptools_without_pkg_resources_names_the_fix(monkeypatch):
    # setuptools >= 81 has no pkg_resources, which mmengine 0.10 imports to
    # find `mmpretrain::` bases; None in sys.modules makes the import fail
    monkeypatch.setitem(sys.modules, 'pkg_resources', None)
    with pytest.raises(ConfigError) as caught:
        load_config(IMAGENET_CONFIG)
    message = str(caught.value)
    assert '\n' not in message
    assert str(IMAGENET_CONFIG) in message
    assert "pip install 'setuptools<81'" in message


def test_missing_file_and_syntax_error_are_one_line(tmp_path):
    with pytest.raises(ConfigError, match='Config file not found'):
        load_config(tmp_path / 'nope.py')
    broken = tmp_path / 'broken.py'
    broken.write_text('model = dict(\n')
    with pytest.raises(ConfigError, match='SyntaxError: line') as caught:
        load_config(broken)
    assert '\n' not in str(caught.value)
