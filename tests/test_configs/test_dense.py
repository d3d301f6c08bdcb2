"""T2T-ViT inside mmdetection and mmsegmentation: configs, training, weights.

Each test runs on CPU on tiny synthetic data that it writes itself: COCO-format
images and annotations for RetinaNet / Mask R-CNN, ADE20K-layout images and
label maps for UPerNet. ``make test`` installs both toolboxes (``make
install-dense``); without them these tests are skipped.
"""

import argparse
import copy
import importlib
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from mmengine.config import Config, DictAction
from mmengine.dataset import pseudo_collate
from mmengine.optim import build_optim_wrapper
from mmengine.registry import init_default_scope

from t2t_plugin.models import T2TViT
from t2t_plugin.runtime.hooks.run_checks import width_problem

from ..helpers import (
    DENSE_ARCH,
    DENSE_TOKEN_DIMS,
    ROOT,
    build_dense_model,
    dense_config,
    run_main,
    tiny_retinanet,
    toolbox,
    write_coco,
)

CONFIGS = ROOT / 'configs'
pytestmark = [
    pytest.mark.dense,
    pytest.mark.usefixtures('one_thread', 'restore_default_scope'),
]

# The COCO and ADE20K configs; tests/test_configs/test_custom_data.py runs
# the ones for your own data.
DET_CONFIGS = sorted(
    p for p in (CONFIGS / 'det').glob('*.py') if 'custom' not in p.name
)
SEG_CONFIGS = sorted(
    p for p in (CONFIGS / 'seg').glob('*.py') if 'custom' not in p.name
)


@pytest.fixture(scope='module')
def read_config():
    """``dense_config(path, tiny)``, each file parsed once per module: a
    dense config's ``mmdet::`` / ``mmseg::`` bases cost mmengine a second
    a read (it loads every metafile of the toolbox). Each call gives a
    copy of its own to change."""
    parsed = {}

    def read(path: Path, tiny: bool) -> Config:
        key = (str(path), tiny)
        if key not in parsed:
            parsed[key] = dense_config(path, tiny)
        return copy.deepcopy(parsed[key])

    return read


# the configs whose real models two tests build
LR_DECAY_CONFIGS = [
    CONFIGS / 'det' / 'retinanet_t2t-vit-t-14_fpn_1x_coco.py',
    CONFIGS / 'seg' / 'upernet_t2t-vit-t-14_8xb2-160k_ade20k-512x512.py',
]


@pytest.fixture(scope='module')
def real_model(read_config):
    """``(cfg, model)`` of a config with its real backbone, in its scope;
    the models of :data:`LR_DECAY_CONFIGS` are built once per module, for
    tests that only read them (a forward without gradients, the
    optimizer's parameter groups)."""
    built = {}

    def build(path: Path) -> tuple:
        scope = 'mmdet' if path.parent.name == 'det' else 'mmseg'
        toolbox(scope)
        if path in built:
            init_default_scope(scope)
            return built[path]
        cfg = read_config(path, tiny=False)
        model = build_dense_model(cfg, scope)
        if path in LR_DECAY_CONFIGS:
            built[path] = cfg, model
        return cfg, model

    return build


def backbone_grads_are_nonzero(model) -> bool:
    grads = [
        (name, param.grad)
        for name, param in model.backbone.named_parameters()
        if name.startswith('tokens_to_token.')
    ]
    return bool(grads) and all(
        grad is not None and grad.abs().sum() > 0 for _, grad in grads
    )


# --------------------------------------------------------------- configs --


def test_configs_are_all_here():
    assert {path.name for path in DET_CONFIGS} == {
        'retinanet_t2t-vit-t-14_fpn_1x_coco.py',
        'retinanet_t2t-vit-14_fpn_1x_coco.py',
        'mask-rcnn_t2t-vit-t-14_fpn_1x_coco.py',
        'mask-rcnn_t2t-vit-14_fpn_1x_coco.py',
    }
    assert {path.name for path in SEG_CONFIGS} == {
        'upernet_t2t-vit-t-14_8xb2-160k_ade20k-512x512.py',
        'upernet_t2t-vit-14_8xb2-160k_ade20k-512x512.py',
    }


@pytest.mark.parametrize(
    'path', DET_CONFIGS + SEG_CONFIGS, ids=lambda path: path.stem
)
def test_config_builds_with_the_real_backbone(path, real_model):
    scope = 'mmdet' if path.parent.name == 'det' else 'mmseg'
    cfg, model = real_model(path)
    assert cfg.default_scope == scope
    assert cfg.custom_imports.imports == ['t2t_plugin']
    backbone_cfg = cfg.model.backbone
    assert backbone_cfg.type == 'mmpretrain.T2TViT'
    assert backbone_cfg.init_cfg.prefix == 'backbone.'

    expected_layer = (
        'transformer' if 't2t-vit-t-14' in path.name else ('performer')
    )
    assert isinstance(model.backbone, T2TViT)
    assert model.backbone.tokens_to_token.token_layer == expected_layer
    assert model.backbone.num_layers == 14
    with torch.no_grad():
        feats = model.extract_feat(torch.randn(1, 3, 64, 96))
    if scope == 'mmdet':
        # FPN: five levels of 256 channels from stride 4 (Mask R-CNN) or
        # stride 8 (RetinaNet) on.
        first = 4 if 'mask-rcnn' in path.name else 8
        assert [tuple(f.shape[-2:]) for f in feats] == [
            (-(-64 // (first * 2**i)), -(-96 // (first * 2**i)))
            for i in range(5)
        ]
        assert {f.shape[1] for f in feats} == {256}
    else:
        assert [tuple(f.shape) for f in feats] == [
            (1, 96, 16, 24),
            (1, 192, 8, 12),
            (1, 384, 4, 6),
            (1, 768, 2, 3),
        ]


@pytest.mark.parametrize('path', LR_DECAY_CONFIGS, ids=lambda path: path.stem)
def test_layer_wise_lr_decay_matches_get_layer_depth(path, real_model):
    """The configs' optimizer follows the backbone's layer depths."""
    cfg, model = real_model(path)
    optim_wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    base_lr = cfg.optim_wrapper.optimizer.lr
    base_wd = cfg.optim_wrapper.optimizer.weight_decay
    rate = cfg.optim_wrapper.paramwise_cfg.layer_decay_rate
    groups = {
        id(param): group
        for group in optim_wrapper.optimizer.param_groups
        for param in group['params']
    }
    norm_types = (
        torch.nn.LayerNorm,
        torch.nn.GroupNorm,
        torch.nn.modules.batchnorm._BatchNorm,
    )
    norm_params = {
        id(param)
        for module in model.modules()
        if isinstance(module, norm_types)
        for param in module.parameters(recurse=False)
    }
    for name, param in model.named_parameters():
        group = groups[id(param)]
        if name.startswith('backbone.encoder.'):
            # encoder layer i of 14 sits at depth i + 1 of 16
            layer = int(name.split('.')[2])
            expected_lr = base_lr * rate ** (14 - layer)
        elif name.startswith(
            ('backbone.tokens_to_token.', 'backbone.cls_token')
        ):
            expected_lr = base_lr * rate**15
        else:
            expected_lr = base_lr
        assert group['lr'] == pytest.approx(expected_lr, rel=1e-9), name
        no_decay = id(param) in norm_params or name == 'backbone.cls_token'
        expected_wd = 0.0 if no_decay else base_wd
        assert group['weight_decay'] == pytest.approx(expected_wd), name
    t2t_lr = groups[id(model.backbone.tokens_to_token.project.weight)]['lr']
    assert t2t_lr == pytest.approx(base_lr * 0.75**15)


# -------------------------------------------------------------- training --


def write_ade(root: Path, num_images: int = 2) -> None:
    """Images and label maps in ADE20K's layout (labels 0..150, 0 ignored)."""
    import mmcv

    rng = np.random.default_rng(0)
    (root / 'images' / 'training').mkdir(parents=True)
    (root / 'annotations' / 'training').mkdir(parents=True)
    for index in range(num_images):
        image = rng.integers(0, 255, (64, 96, 3), dtype=np.uint8)
        label = np.zeros((64, 96), dtype=np.uint8)
        label[:32] = 5
        label[32:, :48] = 17
        label[32:, 48:] = 150
        mmcv.imwrite(image, str(root / 'images' / 'training' / f'{index}.jpg'))
        mmcv.imwrite(
            label, str(root / 'annotations' / 'training' / f'{index}.png')
        )


def first_batch(cfg: Config, scope: str):
    registry = importlib.import_module(f'{scope}.registry')
    dataset = registry.DATASETS.build(cfg.train_dataloader.dataset)
    return pseudo_collate([dataset[i] for i in range(len(dataset))])


def train_step(model, cfg: Config, batch, record_property) -> dict:
    """Forward, backward and update on one batch; returns the losses and
    records the step's time in the JUnit report (``--junitxml``)."""
    optim_wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    model.train()
    start = time.perf_counter()
    data = model.data_preprocessor(batch, True)
    losses = model(**data, mode='loss')
    loss, log_vars = model.parse_losses(losses)
    loss.backward()
    optim_wrapper.step()
    record_property('train_step_s', round(time.perf_counter() - start, 3))
    return {name: float(value) for name, value in log_vars.items()}


@pytest.mark.parametrize(
    'name',
    [
        'retinanet_t2t-vit-t-14_fpn_1x_coco.py',
        'mask-rcnn_t2t-vit-t-14_fpn_1x_coco.py',
    ],
)
def test_detector_trains_on_coco_format_data(
    name, tmp_path, record_property, read_config
):
    toolbox('mmdet')
    write_coco(tmp_path, size=128)
    cfg = read_config(CONFIGS / 'det' / name, tiny=True)
    dataset = cfg.train_dataloader.dataset
    dataset.update(
        data_root=str(tmp_path),
        ann_file='annotations/train.json',
        data_prefix=dict(img='images/'),
    )
    for transform in dataset.pipeline:
        if transform.type == 'Resize':
            transform.scale = (128, 128)
        if transform.type == 'RandomFlip':
            transform.prob = 0.0
    if 'mask-rcnn' in name:
        # 64 instead of 512 sampled RoIs per image: the box head's two
        # 1024-wide layers dominate a CPU step otherwise.
        cfg.model.train_cfg.rcnn.sampler.num = 64
    torch.manual_seed(0)
    model = build_dense_model(cfg, 'mmdet')
    model.init_weights()
    batch = first_batch(cfg, 'mmdet')
    assert tuple(batch['inputs'][0].shape) == (3, 128, 128)

    log_vars = train_step(model, cfg, batch, record_property)

    expected = (
        {'loss_cls', 'loss_bbox'}
        if 'retinanet' in name
        else {
            'loss_rpn_cls',
            'loss_rpn_bbox',
            'loss_cls',
            'loss_bbox',
            'loss_mask',
        }
    )
    assert expected <= set(log_vars)
    assert all(np.isfinite(value) for value in log_vars.values())
    assert log_vars['loss'] > 0
    assert backbone_grads_are_nonzero(model)


@pytest.mark.parametrize(
    'name',
    [
        'upernet_t2t-vit-t-14_8xb2-160k_ade20k-512x512.py',
        'upernet_t2t-vit-14_8xb2-160k_ade20k-512x512.py',
    ],
)
def test_segmentor_trains_on_ade_layout_data(
    name, tmp_path, record_property, read_config
):
    toolbox('mmseg')
    write_ade(tmp_path)
    cfg = read_config(CONFIGS / 'seg' / name, tiny=True)
    crop_size = (64, 64)
    cfg.model.data_preprocessor.size = crop_size
    dataset = cfg.train_dataloader.dataset
    dataset.data_root = str(tmp_path)
    for transform in dataset.pipeline:
        if transform.type == 'RandomResize':
            transform.scale = (128, 64)
        if transform.type == 'RandomCrop':
            transform.crop_size = crop_size
    torch.manual_seed(0)
    model = build_dense_model(cfg, 'mmseg')
    model.init_weights()
    batch = first_batch(cfg, 'mmseg')

    log_vars = train_step(model, cfg, batch, record_property)

    assert {'decode.loss_ce', 'aux.loss_ce'} <= set(log_vars)
    assert all(np.isfinite(value) for value in log_vars.values())
    assert log_vars['decode.loss_ce'] > 0
    assert backbone_grads_are_nonzero(model)


def test_segmentor_tests_whole_images_of_any_size(read_config):
    """Whole-image inference pads to a multiple of 32 and crops back."""
    toolbox('mmseg')
    from mmseg.structures import SegDataSample

    cfg = read_config(
        CONFIGS / 'seg' / 'upernet_t2t-vit-t-14_8xb2-160k_ade20k-512x512.py',
        tiny=True,
    )
    model = build_dense_model(cfg, 'mmseg').eval()
    image = torch.randint(0, 255, (3, 50, 75), dtype=torch.uint8)
    sample = SegDataSample(
        metainfo=dict(ori_shape=(50, 75), img_shape=(50, 75))
    )
    with torch.no_grad():
        results = model.test_step(dict(inputs=[image], data_samples=[sample]))
    assert tuple(results[0].pred_sem_seg.data.shape) == (1, 50, 75)


TINY_RETINANET = """
_base_ = {base!r}
model = dict(
    backbone=dict(
        arch=dict(_delete_=True, **{arch!r}),
        t2t_cfg=dict(token_dims={token_dims}),
        init_cfg=None),
    neck=[
        dict(type='mmpretrain.T2TFeaturePyramid',
             in_channels=({token_dims}, {token_dims}, {arch[embed_dims]}),
             out_channels=(192, 384, 768), out_indices=(1, 2, 3)),
        dict(type='FPN', in_channels=[192, 384, 768], out_channels=256,
             start_level=0, add_extra_convs='on_input', num_outs=5),
    ])
pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', with_bbox=True),
    dict(type='Resize', scale=(128, 128), keep_ratio=True),
    dict(type='PackDetInputs'),
]
train_dataloader = dict(
    num_workers=0, persistent_workers=False,
    dataset=dict(data_root={root!r}, ann_file='annotations/train.json',
                 data_prefix=dict(img='images/'), pipeline=pipeline))
train_cfg = dict(max_epochs=1)
default_hooks = dict(logger=dict(interval=1))
"""


@pytest.mark.slow
def test_train_tool_runs_a_detection_config(tmp_path):
    """tools/train.py takes mmdet configs (default_scope='mmdet')."""
    toolbox('mmdet')
    config = tiny_retinanet(TINY_RETINANET, tmp_path, 'retinanet_tiny.py')
    # another width of the backbone: one line naming the key, before the
    # stride probe or the first step
    wider = run_main(
        'train', config, '--work-dir', tmp_path / 'wider', '--no-validate',
        '--cfg-options', 'model.backbone.arch.embed_dims=48',
    )  # fmt: skip
    assert wider.returncode == 1
    dims = DENSE_TOKEN_DIMS
    assert wider.stderr.strip() == (
        f'T2TFeaturePyramid has in_channels=({dims}, {dims}, 64), but the '
        f'backbone outputs have widths ({dims}, {dims}, 48); set '
        f'model.neck.0.in_channels=[{dims},{dims},48].'
    )
    work_dir = tmp_path / 'work'
    result = run_main('train', config, '--work-dir', work_dir, '--no-validate')
    assert result.returncode == 0, result.stderr[-3000:]
    assert (work_dir / 'epoch_1.pth').is_file()
    assert (work_dir / 'curves.png').stat().st_size > 0
    assert 'loss_cls' in result.stdout + result.stderr


# ------------------------------------------------------------- weights --


def test_classification_checkpoint_loads_into_the_detector(
    tmp_path, read_config
):
    """An ImageClassifier(T2TViT, T2TClsHead) checkpoint initialises the
    detector's backbone through the config's Pretrained init_cfg."""
    toolbox('mmdet')
    from mmengine.runner.checkpoint import _load_checkpoint_with_prefix
    from mmpretrain.registry import MODELS as PRETRAIN_MODELS

    torch.manual_seed(0)
    classifier = PRETRAIN_MODELS.build(
        dict(
            type='ImageClassifier',
            backbone=dict(
                type='T2TViT',
                arch=DENSE_ARCH,
                t2t_cfg=dict(token_dims=DENSE_TOKEN_DIMS),
            ),
            head=dict(
                type='T2TClsHead',
                num_classes=10,
                in_channels=DENSE_ARCH['embed_dims'],
            ),
        )
    )
    classifier.init_weights()
    checkpoint = tmp_path / 't2t-vit-tiny_in1k.pth'
    torch.save(
        dict(state_dict=classifier.state_dict(), meta=dict()), checkpoint
    )

    path = CONFIGS / 'det' / 'mask-rcnn_t2t-vit-t-14_fpn_1x_coco.py'
    cfg = read_config(path, tiny=True)
    init_cfg = read_config(path, tiny=False).model.backbone.init_cfg
    init_cfg.checkpoint = str(checkpoint)
    cfg.model.backbone.init_cfg = init_cfg
    detector = build_dense_model(cfg, 'mmdet')

    # Strict: the prefix-stripped checkpoint is exactly the backbone.
    backbone_state = _load_checkpoint_with_prefix('backbone.', str(checkpoint))
    detector.backbone.load_state_dict(backbone_state, strict=True)

    torch.manual_seed(1)
    fresh = build_dense_model(cfg, 'mmdet')
    fresh.init_weights()
    expected = classifier.backbone.state_dict()
    loaded = fresh.backbone.state_dict()
    assert loaded.keys() == expected.keys()
    for key, value in expected.items():
        torch.testing.assert_close(loaded[key], value, rtol=0, atol=0)


def test_missing_coco_points_to_the_dense_readme_section(
    tmp_path, read_config
):
    toolbox('mmdet')
    from t2t_preflight.inputs import built_datasets, find_missing_data

    cfg = read_config(
        CONFIGS / 'det' / 'retinanet_t2t-vit-t-14_fpn_1x_coco.py', tiny=False
    )
    cfg.train_dataloader.dataset.data_root = str(tmp_path / 'nowhere') + '/'
    built = built_datasets(cfg, ['train_dataloader'])
    messages = find_missing_data(cfg, built)
    assert messages[0].startswith(
        f'Dataset not found: expected {tmp_path}/nowhere/'
    )
    assert all('(see docs/dense_prediction.md)' in m for m in messages)


# ------------------------------------------- one edit through every door --


@pytest.mark.parametrize(
    'path, scope, arch, widths',
    [
        ('det/retinanet_t2t-vit-t-14_fpn_1x_coco.py', 'mmdet', '7', 256),
        ('det/mask-rcnn_t2t-vit-14_fpn_1x_coco.py', 'mmdet', '19', 448),
        ('det/retinanet_t2t-vit-7_fpn_24e_custom-coco.py', 'mmdet', '24', 512),
        (
            'seg/upernet_t2t-vit-7_1xb4-4k_custom-256x256.py',
            'mmseg',
            't-14',
            384,
        ),
    ],
)
def test_another_arch_through_models_build(
    path, scope, arch, widths, read_config
):
    """As mmdet's and mmseg's own tools build a model: MODELS.build on
    cfg.model, no tool of ours in between. The arch alone is refused at the
    first forward in one line naming the key; with it, the model runs."""
    toolbox(scope)
    cfg = read_config(CONFIGS / path, tiny=False)
    cfg.merge_from_dict(
        {'model.backbone.arch': arch, 'model.backbone.init_cfg': None}
    )
    model = build_dense_model(cfg, scope)
    pyramid = model.neck[0] if scope == 'mmdet' else model.neck
    stated = pyramid.in_channels
    key = (
        'model.neck.0.in_channels'
        if scope == 'mmdet'
        else ('model.neck.in_channels')
    )
    line = (
        f'T2TFeaturePyramid has in_channels={stated}, but the backbone '
        f'outputs have widths (64, 64, {widths}); set '
    )
    assert width_problem(model) == f'{line}{key}=[64,64,{widths}].'
    images = torch.zeros(1, 3, 64, 64)
    with pytest.raises(ValueError) as error, torch.no_grad():
        model.extract_feat(images)
    assert str(error.value).startswith(f'{line}model.neck.in_channels=')
    # the option as the line writes it, through mmengine's parser
    options = argparse.Namespace()
    DictAction(None, 'cfg_options')(None, options, [f'{key}=[64,64,{widths}]'])
    cfg.merge_from_dict(options.cfg_options)
    model = build_dense_model(cfg, scope)
    assert width_problem(model) is None
    with torch.no_grad():
        feats = model.extract_feat(images)
    assert feats[0].shape[0] == 1


@pytest.mark.slow
@pytest.mark.parametrize(
    'path',
    [
        'det/retinanet_t2t-vit-7_fpn_24e_custom-coco.py',
        'seg/upernet_t2t-vit-7_1xb4-4k_custom-256x256.py',
    ],
)
def test_custom_configs_export_to_onnx(path, tmp_path, capsys, read_config):
    pytest.importorskip('onnxruntime')
    pytest.importorskip('onnxscript')
    from ..helpers import load_tool

    scope = path.split('/')[0].replace('det', 'mmdet').replace('seg', 'mmseg')
    toolbox(scope)
    cfg = read_config(CONFIGS / path, tiny=False)
    cfg.model.backbone.init_cfg = None
    model = build_dense_model(cfg, scope)
    checkpoint = tmp_path / 'model.pth'
    torch.save({'state_dict': model.state_dict()}, checkpoint)
    tool = load_tool('tools/deployment/pytorch2onnx.py')
    out = tmp_path / 'model.onnx'
    code = tool.main(
        [str(CONFIGS / path), str(checkpoint), str(out), '--shape', '64', '64']
        + ['--static-size', '--verify']
    )
    printed = capsys.readouterr()
    assert code == 0, printed.err
    diffs = [
        float(line.rsplit(' ', 1)[1])
        for line in printed.out.splitlines()
        if 'max abs diff' in line
    ]
    assert len(diffs) == 3 and max(diffs) < 1e-4
