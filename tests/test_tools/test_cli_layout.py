"""The command-line plumbing lives in ``t2t_plugin.cli``."""

import pytest
from mmengine.config import Config

from t2t_plugin.cli import set_default_work_dir


@pytest.mark.parametrize(
    'given, in_config, expected',
    [
        ('out/run', None, 'out/run'),
        (None, 'from/config', 'from/config'),
        (None, None, './work_dirs/t2t-vit-7_8xb64_in1k'),
    ],
)
def test_default_work_dir(given, in_config, expected):
    cfg = Config(dict(work_dir=in_config) if in_config else {})
    set_default_work_dir(cfg, 'configs/t2t-vit-7_8xb64_in1k.py', given)
    assert cfg.work_dir == expected
