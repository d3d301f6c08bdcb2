"""Adapting a config: arch names however they are spelt, the CPU bf16
warning, the layer-decay range in the log and get_flops' default input
size."""

import logging

import pytest
import torch
from mmengine.config import Config
from mmengine.logging import MMLogger
from mmengine.optim import build_optim_wrapper
from mmpretrain.registry import MODELS

from t2t_plugin.models import T2TViT
from t2t_plugin.runtime import AutocastOptimWrapper
from t2t_plugin.runtime.optim_wrapper import cpu_has_fast_bf16

from ..helpers import ROOT, load_tool, run_main

CONFIGS = ROOT / 'configs'


# ------------------------------------------------------------ arch names --


@pytest.mark.parametrize(
    'spelling', [7, '7', 't2t-vit-7', 'T2T-ViT-7', ' t2t_vit_7 ', 'T2TViT7']
)
def test_every_spelling_of_an_arch_builds_it(spelling):
    backbone = MODELS.build(dict(type='T2TViT', arch=spelling))
    assert (backbone.embed_dims, backbone.num_layers) == (256, 7)
    assert backbone.tokens_to_token.token_layer == 'performer'


@pytest.mark.parametrize(
    'name,expected',
    [
        ('T2T-ViT-t-14', ('transformer', 384, 14, 6)),
        ('t-24', ('transformer', 512, 24, 8)),
        ('t2t-vit-14-resnext', ('performer', 384, 14, 32)),
        ('14-WIDE', ('performer', 768, 4, 12)),
        (19, ('performer', 448, 19, 7)),
    ],
)
def test_variant_names(name, expected):
    settings = T2TViT.resolve_arch(name)
    assert (
        settings['token_layer'],
        settings['embed_dims'],
        settings['num_layers'],
        settings['num_heads'],
    ) == expected


def test_384_names_build_the_384_pixel_model():
    backbone = T2TViT(arch='t2t-vit-14@384')
    assert backbone.embed_dims == 384
    assert backbone.patch_resolution == (24, 24)  # 384 / 16
    # an explicit img_size still wins
    assert T2TViT(arch='14-384', img_size=224).patch_resolution == (14, 14)
    assert T2TViT(arch='14').patch_resolution == (14, 14)


@pytest.mark.parametrize('wrong', ['13', 99, 'vit-7', '7.5', 1.5])
def test_a_wrong_arch_is_one_line_listing_the_names(wrong):
    with pytest.raises(ValueError) as error:
        T2TViT.resolve_arch(wrong)
    message = str(error.value)
    assert '\n' not in message
    assert '7, 10, 12, 14, 19, 24' in message and 't-14' in message


def test_train_tool_reports_a_wrong_arch_in_one_line(tmp_path):
    for split in ('train', 'val'):  # the config's 3 classes
        for name in ('a', 'b', 'c'):
            (tmp_path / split / name).mkdir(parents=True)
    result = run_main(
        'train', CONFIGS / 't2t-vit-7_1xb64_custom-64px.py',
        '--work-dir', tmp_path, '--cfg-options', 'model.backbone.arch=13',
        f'train_dataloader.dataset.data_root={tmp_path}',
        f'val_dataloader.dataset.data_root={tmp_path}',
    )  # fmt: skip
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Unknown T2T-ViT arch '13'" in lines[0]
    assert 'Traceback' not in result.stderr


# --------------------------------------------------------------- CPU bf16 --


@pytest.mark.parametrize(
    'flags,expected',
    [
        ('fpu avx2 avx512f avx512_bf16', True),
        ('fpu avx2 amx_bf16 amx_tile', True),
        ('fp asimd bf16', True),  # Arm Features line
        ('fpu avx2 avx512f', False),
    ],
)
def test_bf16_flags(tmp_path, flags, expected):
    cpuinfo = tmp_path / 'cpuinfo'
    cpuinfo.write_text(f'processor\t: 0\nflags\t\t: {flags}\n')
    assert cpu_has_fast_bf16(str(cpuinfo)) is expected


def bf16_warnings(monkeypatch, has_bf16) -> list:
    from t2t_plugin.runtime import optim_wrapper

    monkeypatch.setattr(optim_wrapper, 'cpu_has_fast_bf16', lambda: has_bf16)
    logger = MMLogger.get_current_instance()
    messages = []
    monkeypatch.setattr(logger, 'warning', messages.append)
    optimizer = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1)
    AutocastOptimWrapper(optimizer=optimizer, device_type='cpu')
    return messages


def test_amp_on_a_cpu_without_bf16_warns_in_one_line(monkeypatch):
    messages = bf16_warnings(monkeypatch, False)
    assert len(messages) == 1 and '\n' not in messages[0]
    assert 'without --amp' in messages[0]
    assert bf16_warnings(monkeypatch, True) == []
    assert bf16_warnings(monkeypatch, None) == []


# ------------------------------------------------------------ lr logging --


def test_layer_decay_range_is_logged(monkeypatch):
    backbone = MODELS.build(
        dict(
            type='T2TViT', arch=dict(embed_dims=32, num_layers=3, num_heads=2)
        )
    )

    class Detector(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = backbone
            self.head = torch.nn.Linear(32, 2)

    logger = MMLogger.get_current_instance()
    messages = []
    monkeypatch.setattr(logger, 'info', messages.append)
    wrapper = build_optim_wrapper(
        Detector(),
        dict(
            optimizer=dict(type='AdamW', lr=1e-3, weight_decay=0.05),
            constructor='mmpretrain.BackboneLayerDecayOptimWrapperConstructor',
            paramwise_cfg=dict(layer_decay_rate=0.5),
        ),
    )
    lrs = [group['lr'] for group in wrapper.optimizer.param_groups]
    line = next(m for m in messages if m.startswith('Layer-wise lr decay'))
    # 5 depths (T2T module, 3 layers, rest): 0.5 ** 4 at the bottom
    assert min(lrs) == pytest.approx(1e-3 * 0.5**4)
    assert 'base_lr x 0.0625 (T2T module) up to base_lr x 1' in line
    # mmengine logs the configured lr as base_lr beside the first group's
    assert wrapper.get_lr()['base_lr'] == [1e-3]
    assert wrapper.get_lr()['lr'][0] == pytest.approx(lrs[0])


# ------------------------------------------------------------- get_flops --


@pytest.mark.parametrize(
    'name,shape',
    [
        ('t2t-vit-14_8xb64_in1k.py', (224, 224)),
        ('t2t-vit-14_8xb64_in1k-384px.py', (384, 384)),
        ('t2t-vit-7_1xb64_custom-64px.py', (64, 64)),
        ('det/retinanet_t2t-vit-t-14_fpn_1x_coco.py', (800, 1344)),
        ('det/retinanet_t2t-vit-7_fpn_24e_custom-coco.py', (512, 512)),
        ('seg/upernet_t2t-vit-t-14_8xb2-160k_ade20k-512x512.py', (512, 512)),
        ('seg/upernet_t2t-vit-7_1xb4-4k_custom-256x256.py', (256, 256)),
    ],
)
def test_get_flops_counts_at_the_config_test_size(name, shape):
    if '/' in name:
        pytest.importorskip('mmdet')
    get_flops = load_tool('tools/analysis_tools/get_flops.py')
    assert (
        get_flops.config_test_shape(Config.fromfile(str(CONFIGS / name)))
        == shape
    )


@pytest.mark.parametrize('wrapper', ['RepeatDataset', 'ConcatDataset'])
def test_get_flops_reads_the_test_size_inside_dataset_wrappers(wrapper):
    get_flops = load_tool('tools/analysis_tools/get_flops.py')
    cfg = Config.fromfile(str(CONFIGS / 't2t-vit-7_1xb64_custom-64px.py'))
    dataset = cfg.test_dataloader.dataset
    cfg.test_dataloader.dataset = (
        dict(type=wrapper, times=2, dataset=dataset)
        if wrapper == 'RepeatDataset'
        else dict(type=wrapper, datasets=[dataset, dataset])
    )
    assert get_flops.config_test_shape(cfg) == (64, 64)


def test_get_flops_runs_a_segmentor_at_its_crop_size(capsys):
    pytest.importorskip('mmseg')
    get_flops = load_tool('tools/analysis_tools/get_flops.py')
    config = CONFIGS / 'seg' / 'upernet_t2t-vit-7_1xb4-4k_custom-256x256.py'
    logging.disable(logging.WARNING)
    try:
        code = get_flops.main(
            [
                str(config),
                '--cfg-options',
                'model.backbone.init_cfg=None',
                'model.data_preprocessor.size=(64,64)',
            ]
        )
    finally:
        logging.disable(logging.NOTSET)
    assert code == 0
    assert 'Input       3x64x64' in capsys.readouterr().out
