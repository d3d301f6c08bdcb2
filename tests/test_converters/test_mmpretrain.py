"""Runs of mmpretrain 1.2.0's own ``T2T_ViT`` give that model's logits
here: read by the checkpoint reader, loaded into
``T2TViT(attn_scale='mmpretrain')`` (its q.k * sqrt(head_dims)), in
float64 within 1e-5, through ``get_model`` and both test tools; a model of
the official scale refuses them in one line."""

import pickle
import sys
from pathlib import Path

import pytest
import torch
from mmengine.config import Config
from mmengine.runner import save_checkpoint
from mmpretrain import get_model
from mmpretrain.registry import MODELS

import t2t_plugin  # noqa: F401
from t2t_plugin.converters import mmpretrain_to_plugin
from t2t_plugin.runtime import CheckpointError

from ..helpers import DEMO, run_main

MMPRETRAIN = Path(sys.modules['mmpretrain'].__file__).parent
THEIR_CONFIG = MMPRETRAIN / '.mim/configs/t2t_vit/t2t-vit-t-14_8xb64_in1k.py'


def their_run(path: Path, cfg: Config, noise: float) -> torch.nn.Module:
    """mmpretrain's classifier of ``cfg``, initialised as its config says,
    then moved by Gaussian ``noise`` (0.05: far enough that float32
    rounding of any weight shows in the logits), saved as its Runner saves
    a checkpoint."""
    torch.manual_seed(0)
    model = MODELS.build(cfg.model)
    model.init_weights()
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * noise)
    checkpoint = {'state_dict': model.state_dict(), 'meta': {}}
    checkpoint['meta']['cfg'] = cfg.pretty_text
    save_checkpoint(checkpoint, str(path))
    return model.eval()


@pytest.mark.parametrize('noise', [0.0, 0.05])
def test_get_model_gives_the_logits_of_mmpretrains_t2t_vit(noise, tmp_path):
    """mmpretrain's T2T-ViT-t-14 recipe, at 224 pixels, float64."""
    path = tmp_path / 'epoch_1.pth'
    theirs = their_run(path, Config.fromfile(THEIR_CONFIG), noise)
    ours_cfg = Config.fromfile('configs/t2t-vit-t-14_8xb64_in1k.py')
    with pytest.raises(CheckpointError) as error:
        get_model(ours_cfg, pretrained=str(path))
    assert str(error.value) == (
        f'The checkpoint {path} was trained with model.backbone.attn_scale='
        'mmpretrain, this model has model.backbone.attn_scale=official: the '
        'weights have the same shapes but mean something else; use the '
        'config it was trained with (set model.backbone.attn_scale='
        'mmpretrain).'
    )
    ours_cfg.model.backbone.attn_scale = 'mmpretrain'
    ours = get_model(ours_cfg, pretrained=str(path)).eval()
    images = torch.randn(2, 3, 224, 224, dtype=torch.float64)
    with torch.no_grad():
        expected = theirs.double()(images, mode='tensor')
        logits = ours.double()(images, mode='tensor')
    assert expected.abs().max() > 1  # logits, not all near zero
    assert (logits - expected).abs().max() < 1e-5


def test_what_the_plugin_cannot_compute_is_refused_in_one_line(tmp_path):
    cases = {
        'norm_cfg': (
            dict(norm_cfg=dict(type='LN', eps=1e-6)),
            "its backbone sets norm_cfg={'eps': 1e-06, 'type': 'LN'}, where "
            'T2TViT has LayerNorm (eps 1e-5) and GELU only',
        ),
        'act_cfg': (
            dict(layer_cfgs=dict(num_heads=6, act_cfg=dict(type='ReLU'))),
            "its backbone sets act_cfg={'type': 'ReLU'}, where T2TViT has "
            'LayerNorm (eps 1e-5) and GELU only',
        ),
        'heads': (
            dict(layer_cfgs=[dict(num_heads=6), dict(num_heads=3)]),
            'its layer_cfgs set several num_heads ([3, 6]), where T2TViT '
            'has one for all layers',
        ),
    }
    for name, (backbone, reason) in cases.items():
        case = Config.fromfile(THEIR_CONFIG)
        case.model.backbone.update(backbone)
        meta = {'cfg': case.pretty_text}
        with pytest.raises(ValueError) as error:
            mmpretrain_to_plugin({'state_dict': {}, 'meta': meta})
        assert str(error.value) == reason, name
    # through the reader, one line naming the file
    path = tmp_path / 'eps.pth'
    case = Config.fromfile(THEIR_CONFIG)
    case.model.backbone.norm_cfg = dict(type='LN', eps=1e-6)
    torch.save({'state_dict': {}, 'meta': {'cfg': case.pretty_text}}, path)
    with pytest.raises(CheckpointError) as error:
        get_model(DEMO, pretrained=str(path))
    assert str(error.value) == (
        f"Cannot convert checkpoint {path} of mmpretrain's T2T_ViT: "
        f'{cases["norm_cfg"][1]}.'
    )
    # its saved config is read as data: code in it is refused, not run
    marker = tmp_path / 'ran'
    code = f"import os; os.system('touch {marker}')\nmodel = dict(backbone="
    meta = {'cfg': code + "dict(type='T2T_ViT', x=__import__('os')))"}
    with pytest.raises(ValueError, match='cannot be read as data'):
        mmpretrain_to_plugin({'state_dict': {}, 'meta': meta})
    assert not marker.exists()
    # another model's run is no concern of this converter
    other = Config.fromfile(
        MMPRETRAIN / '.mim/configs/_base_/models/vit-base-p16.py'
    )
    assert mmpretrain_to_plugin({'meta': {'cfg': other.pretty_text}}) is None


def test_both_test_tools_give_mmpretrains_scores(tmp_path):
    """tools/test.py with T2TViT(attn_scale='mmpretrain') and mmpretrain's
    tools/test.py with its own T2T_ViT score the digits alike from one
    checkpoint of mmpretrain's model (float32: 1e-5 on probabilities)."""
    common = (
        f'_base_ = [{DEMO!r}]\n'
        'test_pipeline = [dict(type="ConvertImage", channels=1), '
        'dict(type="Resize", scale=32), dict(type="PackInputs")]\n'
        'test_dataloader = dict(dataset=dict(pipeline=test_pipeline, '
        'indices=24))\n'
    )
    theirs = tmp_path / 'theirs.py'
    theirs.write_text(
        # (the configs' run checks assume this plugin's T2T module)
        common + 'default_hooks = dict(_delete_=True, '
        'timer=dict(type="IterTimerHook"))\n'
        'model = dict(backbone=dict(_delete_=True, type="T2T_ViT", '
        'img_size=32, in_channels=1, embed_dims=48, num_layers=2, '
        'layer_cfgs=dict(num_heads=3, feedforward_channels=96)), '
        'head=dict(type="VisionTransformerClsHead", in_channels=48))\n'
    )
    ours = tmp_path / 'ours.py'
    ours.write_text(
        common + 'model = dict(backbone=dict(arch=dict(_delete_=True, '
        'token_layer="transformer", embed_dims=48, num_layers=2, '
        'num_heads=3, feedforward_channels=96), img_size=32, '
        't2t_cfg=dict(_delete_=True), attn_scale="mmpretrain"), '
        'head=dict(in_channels=48))\n'
    )
    path = tmp_path / 'epoch_1.pth'
    their_run(path, Config.fromfile(theirs), noise=0.05)
    scores = {}
    for tool, config in (
        ('test', ours),
        (MMPRETRAIN / '.mim/tools/test.py', theirs),
    ):
        out = tmp_path / f'{config.stem}.pkl'
        result = run_main(
            tool, config, path, '--work-dir', tmp_path / config.stem,
            '--out', out, '--out-item', 'pred',
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-2000:]
        with open(out, 'rb') as f:
            scores[config.stem] = torch.stack(
                [p['pred_score'] for p in pickle.load(f)]
            )
    assert scores['ours'].shape == (24, 10)
    # without the setting, our tool refuses the file in one line
    official = tmp_path / 'official.py'
    official.write_text(
        ours.read_text().replace('attn_scale="mmpretrain"', '')
    )
    result = run_main('test', official, path, '--work-dir', tmp_path / 'o')
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f'The checkpoint {path} was trained with '
        'model.backbone.attn_scale=mmpretrain, this model has '
        'model.backbone.attn_scale=official: the weights have the same '
        'shapes but mean something else; use the config it was trained '
        'with (set model.backbone.attn_scale=mmpretrain).'
    )
    assert scores['theirs'].max() > 0.2  # not the uniform 0.1
    assert (scores['ours'] - scores['theirs']).abs().max() < 1e-5
