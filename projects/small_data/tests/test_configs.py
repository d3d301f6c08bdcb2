"""Every config of the project reaches its parts with custom_imports,
builds, runs a forward, and is the recipe with one lever changed."""

import pytest
import torch
from mmengine.config import Config
from mmpretrain.registry import MODELS

from tests.test_datasets.image_folders import LITE

from . import CONFIGS

PROJECT_CONFIGS = sorted(CONFIGS.glob('*.py'))
# what each config changes in the recipe's model (type, or key: value)
LEVERS = {
    'distill': ('type', 'DistillationClassifier'),
    'drloc': ('head.type', 'DRLocClsHead'),
    'lsa': ('backbone.layer_cfgs.type', 'LocalityTransformerLayer'),
    'conv-stem': ('backbone.arch.token_layer', 'ConvStemTokenLayer'),
}


def test_every_lever_has_its_config():
    assert sorted(p.stem.rsplit('-32px-', 1)[1] for p in PROJECT_CONFIGS) == (
        sorted(LEVERS)
    )


@pytest.mark.parametrize('path', PROJECT_CONFIGS, ids=lambda p: p.stem)
def test_config_builds_model_and_runs_forward(path):
    cfg = Config.fromfile(path)
    assert cfg.default_scope == 'mmpretrain'
    assert cfg.custom_imports == dict(
        imports=['t2t_plugin', 'projects.small_data.levers'],
        allow_failed_imports=False,
    )
    key, value = LEVERS[path.stem.rsplit('-32px-', 1)[1]]
    found = cfg.model
    for part in key.split('.'):
        found = found[part]
    assert found == value
    recipe = Config.fromfile(LITE)
    assert cfg.train_pipeline == recipe.train_pipeline
    assert cfg.optim_wrapper == recipe.optim_wrapper

    model = MODELS.build(cfg.model).eval()
    with torch.no_grad():
        logits = model(torch.randn(2, 3, 32, 32), mode='tensor')
    assert logits.shape == (2, cfg.model.head.num_classes)
    assert torch.isfinite(logits).all()
