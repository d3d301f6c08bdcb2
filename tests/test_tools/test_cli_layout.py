"""The command-line plumbing lives in ``t2t_plugin.cli``; its old import
paths under ``t2t_plugin.engine`` still work, with a warning."""

import pytest
from mmengine.config import Config

import t2t_plugin.analysis
import t2t_plugin.cli
import t2t_plugin.engine
from t2t_plugin.cli import set_default_work_dir


@pytest.mark.parametrize(
    'name, home',
    [
        ('find_missing_inputs', t2t_plugin.cli),
        ('setup_cpu_dist', t2t_plugin.cli),
        ('plot_curves', t2t_plugin.analysis),
    ],
)
def test_moved_names_warn_and_resolve(name, home):
    with pytest.warns(DeprecationWarning, match=f'moved to {home.__name__}'):
        moved = getattr(t2t_plugin.engine, name)
    assert moved is getattr(home, name)


def test_unknown_engine_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match='no_such_name'):
        t2t_plugin.engine.no_such_name  # noqa: B018


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
