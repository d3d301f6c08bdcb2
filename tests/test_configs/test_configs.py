"""Every config builds a working model; the ImageNet configs carry the
official recipe (optimizer, schedule values, augmentations, hooks)."""

import copy
import math
from pathlib import Path

import pytest
import torch
from mmengine.config import Config
from mmengine.model import ExponentialMovingAverage
from mmengine.optim import build_optim_wrapper
from mmengine.registry import PARAM_SCHEDULERS
from mmpretrain.registry import MODELS, TRANSFORMS

import t2t_plugin  # noqa: F401

from .. import helpers

CONFIG_DIR = Path(__file__).resolve().parents[2] / 'configs'
# Top level only: configs/_base_, configs/det and configs/seg are not
# classification configs.
CONFIGS = sorted(CONFIG_DIR.glob('*.py'))

# (lr, weight decay) of the official recipe per variant, batch 512.
RECIPE = {
    't2t-vit-7_8xb64_in1k': (1e-3, 0.03),
    't2t-vit-10_8xb64_in1k': (1e-3, 0.03),
    't2t-vit-12_8xb64_in1k': (1e-3, 0.03),
    't2t-vit-14_8xb64_in1k': (5e-4, 0.05),
    't2t-vit-14_8xb64_in1k-384px': (5e-4, 0.05),
    't2t-vit-19_8xb64_in1k': (5e-4, 0.065),
    't2t-vit-24_8xb64_in1k': (5e-4, 0.065),
    't2t-vit-t-14_8xb64_in1k': (5e-4, 0.05),
    't2t-vit-t-19_8xb64_in1k': (5e-4, 0.065),
    't2t-vit-t-24_8xb64_in1k': (5e-4, 0.065),
}
TINY_ARCH = dict(helpers.TINY_ARCH, token_layer='performer')


def load(name: str) -> Config:
    return Config.fromfile(CONFIG_DIR / f'{name}.py')


def test_all_variants_have_configs():
    names = {path.stem for path in CONFIGS}
    assert set(RECIPE) <= names
    assert {
        't2t-vit-mini_1xb64_digits',
        't2t-vit-7_1xb128_cifar10-32px',
        't2t-vit-14_in1k-pre_1xb64_cifar10-224px',
        't2t-vit-14_in1k-pre_1xb64_cifar100-224px',
    } <= names


@pytest.mark.parametrize('path', CONFIGS, ids=lambda p: p.stem)
def test_config_builds_model_and_runs_forward(path):
    cfg = Config.fromfile(path)
    assert cfg.default_scope == 'mmpretrain'
    assert cfg.custom_imports == dict(
        imports=['t2t_plugin'], allow_failed_imports=False
    )
    num_classes = cfg.model.head.num_classes
    assert cfg.data_preprocessor.num_classes == num_classes

    model_cfg = copy.deepcopy(cfg.model)
    backbone = model_cfg.backbone
    # The full-size ImageNet models take seconds at 224; 64x64 inputs run
    # the same layers.
    size = min(backbone.img_size, 64)
    backbone.img_size = size
    backbone.pop('init_cfg', None)  # transfer configs name a checkpoint
    model = MODELS.build(model_cfg).eval()
    channels = backbone.get('in_channels', 3)
    with torch.no_grad():
        logits = model(torch.randn(2, channels, size, size), mode='tensor')
    assert logits.shape == (2, num_classes)
    assert torch.isfinite(logits).all()


def simulate_lr(cfg: Config, epoch_length: int) -> list:
    """lr of each training iteration, from the config's own schedulers."""
    optim_wrapper = build_optim_wrapper(
        torch.nn.Linear(2, 2), dict(optimizer=cfg.optim_wrapper.optimizer)
    )
    schedulers = [
        PARAM_SCHEDULERS.build(
            copy.deepcopy(s),
            default_args=dict(
                optimizer=optim_wrapper, epoch_length=epoch_length
            ),
        )
        for s in cfg.param_scheduler
    ]
    lrs = []
    for _ in range(cfg.train_cfg.max_epochs):
        for _ in range(epoch_length):
            lrs.append(optim_wrapper.param_groups[0]['lr'])
            for scheduler in schedulers:
                if not scheduler.by_epoch:
                    scheduler.step()
        for scheduler in schedulers:
            if scheduler.by_epoch:
                scheduler.step()
    return lrs


@pytest.mark.parametrize('name', sorted(RECIPE))
def test_imagenet_schedule(name):
    cfg = load(name)
    lr, weight_decay = RECIPE[name]
    optimizer = cfg.optim_wrapper.optimizer
    assert optimizer.type == 'AdamW'
    assert optimizer.lr == lr and optimizer.weight_decay == weight_decay
    assert cfg.train_cfg.max_epochs == 310
    assert (
        cfg.auto_scale_lr.base_batch_size
        == 512
        == (8 * cfg.train_dataloader.batch_size)
    )

    epoch_length = 4
    lrs = simulate_lr(cfg, epoch_length)

    def at(epoch: float) -> float:
        return lrs[int(epoch * epoch_length)]

    warmup_iters = 10 * epoch_length
    cosine_iters = 290 * epoch_length
    # Linear warm-up per iteration from 1e-6 to lr over 10 epochs.
    assert at(0) == pytest.approx(1e-6, rel=1e-9)
    for i in (1, 17, warmup_iters - 1):
        expected = 1e-6 + (lr - 1e-6) * i / (warmup_iters - 1)
        assert lrs[i] == pytest.approx(expected, rel=1e-9)
    # Cosine from lr (epoch 10) to 1e-5 (epoch 300), per iteration.
    for epoch in (10, 57.25, 155, 250.5):
        t = (epoch - 10) * epoch_length
        expected = (
            1e-5 + (lr - 1e-5) * (1 + math.cos(math.pi * t / cosine_iters)) / 2
        )
        assert at(epoch) == pytest.approx(expected, rel=1e-9)
    assert at(155) == pytest.approx((lr + 1e-5) / 2, rel=1e-9)
    # Cool-down: 10 epochs at 1e-5.
    for epoch in (300, 305, 309.75):
        assert at(epoch) == pytest.approx(1e-5, rel=1e-3)
    assert len(lrs) == 310 * epoch_length


@pytest.mark.parametrize('name', sorted(RECIPE))
def test_imagenet_no_decay_groups(name):
    cfg = load(name)
    model_cfg = copy.deepcopy(cfg.model)
    model_cfg.backbone.update(arch=TINY_ARCH, img_size=64)
    model_cfg.head.in_channels = TINY_ARCH['embed_dims']
    model = MODELS.build(model_cfg)
    optim_wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    decay_of = {
        id(p): group['weight_decay']
        for group in optim_wrapper.param_groups
        for p in group['params']
    }
    weight_decay = RECIPE[name][1]
    for param_name, param in model.named_parameters():
        # timm's rule for the official recipe: no decay on 1-d parameters
        # (norms, biases) and on the model's no_weight_decay() (cls_token).
        no_decay = param.ndim <= 1 or param_name.endswith('cls_token')
        assert decay_of[id(param)] == (0.0 if no_decay else weight_decay), (
            param_name
        )
    assert 'pos_embed' not in dict(model.named_parameters())


def pipeline_step(pipeline: list, kind: str) -> dict:
    return next(step for step in pipeline if step['type'] == kind)


def plain(value):
    """A resolved config value as plain dicts and lists, without the
    ``_scope_`` keys that bases of other packages add."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items() if k != '_scope_'}
    if isinstance(value, (list, tuple)):
        return type(value)(plain(v) for v in value)
    return value


# ImageNet mean and std, RGB.
IMAGENET_MEAN = [123.675, 116.28, 103.53]
IMAGENET_STD = [58.395, 57.12, 57.375]


def paper_pipelines(size: int):
    """The official recipe's augmentations (timm's create_transform with
    the paper's arguments), in mmpretrain transforms; images load as BGR."""
    bgr_mean, bgr_std = IMAGENET_MEAN[::-1], IMAGENET_STD[::-1]
    train = [
        dict(type='LoadImageFromFile'),
        dict(
            type='RandomResizedCrop',
            scale=size,
            backend='pillow',
            interpolation='bicubic',
        ),
        dict(type='RandomFlip', prob=0.5, direction='horizontal'),
        # rand-m9-mstd0.5-inc1
        dict(
            type='RandAugment',
            policies='timm_increasing',
            num_policies=2,
            total_level=10,
            magnitude_level=9,
            magnitude_std=0.5,
            hparams=dict(pad_val=[104, 116, 124], interpolation='bicubic'),
        ),
        # --reprob 0.25 --remode pixel
        dict(
            type='RandomErasing',
            erase_prob=0.25,
            mode='rand',
            min_area_ratio=0.02,
            max_area_ratio=1 / 3,
            fill_color=bgr_mean,
            fill_std=bgr_std,
        ),
        dict(type='PackInputs'),
    ]
    # crop_pct 0.9 at 224 (short side 248), 1.0 at 384
    resize = {224: 248, 384: 384}[size]
    test = [
        dict(type='LoadImageFromFile'),
        # ours: arrays of any depth and channels, as the inferencer passes
        dict(type='ConvertImage'),
        dict(
            type='ResizeEdge',
            scale=resize,
            edge='short',
            backend='pillow',
            interpolation='bicubic',
        ),
        dict(type='CenterCrop', crop_size=size),
        dict(type='PackInputs'),
    ]
    return train, test


@pytest.mark.parametrize('name', sorted(RECIPE))
def test_imagenet_pipelines_are_the_papers(name):
    cfg = load(name)
    size = 384 if name.endswith('384px') else 224
    train_pipeline, test_pipeline = paper_pipelines(size)
    assert plain(cfg.train_dataloader.dataset.pipeline) == train_pipeline
    for loader in (cfg.val_dataloader, cfg.test_dataloader):
        assert plain(loader.dataset.pipeline) == test_pipeline
    assert plain(cfg.data_preprocessor) == dict(
        num_classes=1000, mean=IMAGENET_MEAN, std=IMAGENET_STD, to_rgb=True
    )
    for loader, split in (
        (cfg.train_dataloader, 'train'),
        (cfg.val_dataloader, 'val'),
        (cfg.test_dataloader, 'val'),
    ):
        dataset = loader.dataset
        assert (dataset.type, dataset.data_root, dataset.split) == (
            'ImageNet',
            'data/imagenet',
            split,
        )
        assert loader.batch_size == 64
    assert cfg.train_dataloader.sampler.shuffle
    assert not cfg.val_dataloader.sampler.shuffle


def test_imagenet_dataset_file_matches_mmpretrains():
    """Ours inherits mmpretrain's T2T-ViT dataset file (``mmpretrain::``
    base) and changes only the loaders' worker settings and the
    ``ConvertImage`` step of its test pipeline; upstream is read here by
    path, independently of that inheritance."""
    import mmpretrain

    upstream = Config.fromfile(
        Path(mmpretrain.__file__).parent
        / '.mim'
        / 'configs'
        / '_base_'
        / 'datasets'
        / 'imagenet_bs64_t2t_224.py'
    )
    ours = Config.fromfile(
        CONFIG_DIR / '_base_' / 'datasets' / 'imagenet_bs64_t2t_224.py'
    )
    worker_keys = ('num_workers', 'persistent_workers', 'pin_memory')
    convert = dict(type='ConvertImage')

    def without_convert(loader: dict) -> dict:
        pipeline = loader['dataset']['pipeline']
        if convert in pipeline:
            assert pipeline.index(convert) == 1  # right after loading
            pipeline.remove(convert)
        return {k: v for k, v in loader.items() if k not in worker_keys}

    for key in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        assert without_convert(plain(ours[key])) == without_convert(
            plain(upstream[key])
        ), key
    assert plain(ours.test_pipeline) == (
        plain(upstream.test_pipeline)[:1]
        + [convert]
        + plain(upstream.test_pipeline)[1:]
    )
    for key in (
        'data_preprocessor',
        'train_pipeline',
        'val_evaluator',
        'test_evaluator',
    ):
        assert plain(ours[key]) == plain(upstream[key]), key


# Embed dims of each arch, from the paper's table.
EMBED_DIMS = {
    '7': 256,
    '10': 256,
    '12': 256,
    '14': 384,
    '19': 448,
    '24': 512,
    't-14': 384,
    't-19': 448,
    't-24': 512,
}


@pytest.mark.parametrize('name', sorted(RECIPE))
def test_imagenet_model(name):
    arch = name[len('t2t-vit-') :].split('_')[0]
    size = 384 if name.endswith('384px') else 224
    assert plain(load(name).model) == dict(
        type='ImageClassifier',
        backbone=dict(
            type='T2TViT', arch=arch, img_size=size, drop_path_rate=0.1
        ),
        neck=None,
        head=dict(
            type='T2TClsHead',
            num_classes=1000,
            in_channels=EMBED_DIMS[arch],
            loss=dict(
                type='LabelSmoothLoss', label_smooth_val=0.1, mode='original'
            ),
            topk=(1, 5),
        ),
        train_cfg=dict(
            augments=[
                dict(type='Mixup', alpha=0.8),
                dict(type='CutMix', alpha=1.0),
            ]
        ),
    )


@pytest.mark.parametrize('name', sorted(RECIPE))
def test_imagenet_evaluation_and_hooks(name):
    cfg = load(name)
    assert plain(cfg.val_evaluator) == dict(type='Accuracy', topk=(1, 5))
    (ema,) = [h for h in cfg.custom_hooks if h.type == 'EMAHook']
    assert ema.momentum == pytest.approx(1 - 0.99996)
    assert cfg.default_hooks.checkpoint.backend_args == dict(
        backend='atomic_local'
    )
    assert cfg.default_hooks.summary.type == 'RunSummaryHook'
    if name.endswith('384px'):
        assert cfg.load_from.endswith('t2t-vit-14_8xb64_in1k/epoch_310.pth')


def test_ema_momentum_convention():
    # mmengine's momentum weighs the new value: 4e-5 is timm's decay
    # 0.99996.
    model = torch.nn.Linear(1, 1, bias=False)
    torch.nn.init.constant_(model.weight, 1.0)
    ema = ExponentialMovingAverage(model, momentum=4e-5)
    torch.nn.init.constant_(model.weight, 2.0)
    ema.update_parameters(model)  # the first call only copies
    torch.nn.init.constant_(model.weight, 3.0)
    ema.update_parameters(model)
    expected = 0.99996 * 2.0 + (1 - 0.99996) * 3.0
    assert ema.module.weight.item() == pytest.approx(expected, rel=1e-7)


@pytest.mark.parametrize('classes', [10, 100])
def test_cifar_transfer_recipe(classes):
    cfg = load(f't2t-vit-14_in1k-pre_1xb64_cifar{classes}-224px')
    assert cfg.model.head.num_classes == classes
    assert cfg.model.train_cfg is None  # no mixup in the transfer recipe
    init = cfg.model.backbone.init_cfg
    assert (init.type, init.prefix) == ('Pretrained', 'backbone.')
    assert cfg.train_dataloader.batch_size == 64
    assert cfg.train_dataloader.dataset.type == f'LocalCIFAR{classes}'
    assert cfg.train_cfg.max_epochs == 60
    resize = pipeline_step(cfg.train_dataloader.dataset.pipeline, 'Resize')
    assert resize.scale == 224

    model_cfg = copy.deepcopy(cfg.model)
    model_cfg.backbone.update(arch=TINY_ARCH, img_size=64, init_cfg=None)
    model_cfg.head.in_channels = TINY_ARCH['embed_dims']
    model = MODELS.build(model_cfg)
    optim_wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    lr_of = {
        id(p): (group['lr'], group['weight_decay'], group['momentum'])
        for group in optim_wrapper.param_groups
        for p in group['params']
    }
    for name, param in model.named_parameters():
        lr = 0.05 if name.startswith('head.') else 0.05 * 0.01
        assert lr_of[id(param)] == pytest.approx((lr, 5e-4, 0.9)), name

    lrs = simulate_lr(cfg, epoch_length=1)
    for epoch in (0, 13, 30, 59):
        expected = (
            2e-4 + (0.05 - 2e-4) * (1 + math.cos(math.pi * epoch / 60)) / 2
        )
        assert lrs[epoch] == pytest.approx(expected, rel=1e-9)


def test_cifar_scratch_config_tokens():
    cfg = load('t2t-vit-7_1xb128_cifar10-32px')
    model = MODELS.build(cfg.model)
    # strides 1, 2, 2: 32x32 pixels -> 8x8 tokens
    assert model.backbone.patch_resolution == (8, 8)
    assert cfg.train_dataloader.dataset.type == 'LocalCIFAR10'
    assert cfg.train_dataloader.batch_size == 128
    # the ImageNet schedule of T2T-ViT-7 ending at epoch 300, without EMA
    assert cfg.optim_wrapper.optimizer.weight_decay == 0.05
    assert cfg.train_cfg.max_epochs == 300 and not cfg.custom_hooks
    lrs = simulate_lr(cfg, epoch_length=2)
    assert lrs[0] == pytest.approx(1e-6, rel=1e-9)
    assert lrs[20] == pytest.approx(1e-3, rel=1e-9)
    assert lrs[-1] == pytest.approx(1e-5, rel=1e-3)


def test_imagenet_recipe_trains_a_step():
    """The train pipeline and a training step with mixup/cutmix soft labels
    and label smoothing, on a small model with the recipe's other parts."""
    cfg = load('t2t-vit-14_8xb64_in1k')
    # Images come from memory instead of LoadImageFromFile.
    transforms = [TRANSFORMS.build(t) for t in cfg.train_pipeline[1:]]

    def pipeline(results: dict) -> dict:
        for transform in transforms:
            results = transform(results)
        return results

    rng = torch.Generator().manual_seed(0)
    samples = []
    for label in (3, 7):
        img = torch.randint(
            0, 256, (300, 260, 3), generator=rng, dtype=torch.uint8
        ).numpy()
        samples.append(
            pipeline(
                dict(
                    img=img,
                    img_shape=img.shape[:2],
                    ori_shape=img.shape[:2],
                    gt_label=label,
                )
            )
        )
    assert tuple(samples[0]['inputs'].shape) == (3, 224, 224)

    model_cfg = copy.deepcopy(cfg.model)
    model_cfg.backbone.update(arch=TINY_ARCH)
    model_cfg.head.in_channels = TINY_ARCH['embed_dims']
    model_cfg.data_preprocessor = cfg.data_preprocessor
    model = MODELS.build(model_cfg)
    data = model.data_preprocessor(
        dict(
            inputs=[s['inputs'] for s in samples],
            data_samples=[s['data_samples'] for s in samples],
        ),
        training=True,
    )
    scores = torch.stack([s.gt_score for s in data['data_samples']])
    # Mixed one-hot labels: two classes share each row.
    assert scores.shape == (2, 1000)
    assert torch.allclose(scores.sum(dim=1), torch.ones(2))
    assert set(scores.nonzero()[:, 1].tolist()) <= {3, 7}

    optim_wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    losses = model.train_step(
        dict(
            inputs=[s['inputs'] for s in samples],
            data_samples=[s['data_samples'] for s in samples],
        ),
        optim_wrapper,
    )
    # Label smoothing 0.1 over 1000 classes keeps the loss near ln(1000).
    assert 5.0 < losses['loss'].item() < 9.0


def _test_steps(cfg: Config) -> list[str]:
    dataset = cfg.test_dataloader.dataset
    return [step['type'] for step in dataset.pipeline]


@pytest.mark.parametrize('path', CONFIGS, ids=lambda p: p.stem)
def test_where_test_pipelines_have_convert_image(path):
    # as docs/configs.md says ("Test pipelines and ConvertImage")
    steps = _test_steps(Config.fromfile(path))
    if path.stem.endswith('_in1k') or path.stem.endswith('_in1k-384px'):
        assert steps[:2] == ['LoadImageFromFile', 'ConvertImage']
    elif 'digits' in path.stem:
        assert steps[0] == 'ConvertImage'
    else:  # CIFAR and the custom 64 px config
        assert 'cifar' in path.stem or 'custom' in path.stem, path.stem
        assert 'ConvertImage' not in steps


# Another arch is the arch and the head's width, stated as mmpretrain's
# configs state it; a width that does not fit is one line naming the key.

CUSTOM = CONFIG_DIR / 't2t-vit-7_1xb64_custom-64px.py'


@pytest.mark.parametrize('arch', ['12', '14', 't-19'])
def test_another_arch_is_the_arch_and_the_head_width(arch):
    from mmpretrain import get_model

    # MODELS.build, as mmpretrain's tools build the model
    cfg = Config.fromfile(CUSTOM)
    cfg.model.backbone.arch = arch
    cfg.model.head.in_channels = EMBED_DIMS[arch]
    model = MODELS.build(cfg.model).eval()
    assert model.head.layers.head.in_features == EMBED_DIMS[arch]
    with torch.no_grad():
        logits = model(torch.randn(1, 3, 64, 64), mode='tensor')
    assert logits.shape == (1, cfg.model.head.num_classes)
    # mmpretrain's get_model with a model override
    model = get_model(
        str(CONFIG_DIR / 't2t-vit-7_8xb64_in1k.py'),
        backbone=dict(arch=arch),
        head=dict(in_channels=EMBED_DIMS[arch]),
    )
    assert model.head.layers.head.in_features == EMBED_DIMS[arch]


def test_a_head_width_that_does_not_fit_the_arch_is_one_line():
    from mmpretrain import get_model

    expected = (
        'T2TClsHead has in_channels=256, but the backbone gives features of '
        'width 384; set model.head.in_channels=384.'
    )
    cfg = Config.fromfile(CUSTOM)
    cfg.model.backbone.arch = '14'
    model = MODELS.build(cfg.model).eval()
    with pytest.raises(ValueError) as error, torch.no_grad():
        model(torch.randn(1, 3, 64, 64), mode='tensor')
    assert str(error.value) == expected
    model = get_model(
        str(CONFIG_DIR / 't2t-vit-7_8xb64_in1k.py'), backbone=dict(arch='14')
    )
    with pytest.raises(ValueError) as error, torch.no_grad():
        model(torch.randn(1, 3, 224, 224), mode='tensor')
    assert str(error.value) == expected


def test_arch_option_through_the_training_tools(tmp_path):
    options = [
        '--cfg-options',
        'model.backbone.arch=7',
        'train_cfg.max_epochs=1',
        'train_dataloader.dataset.indices=32',
        'val_dataloader.dataset.indices=16',
    ]
    expected = (
        'T2TClsHead has in_channels=64, but the backbone gives features of '
        'width 256; set model.head.in_channels=256.'
    )
    ours = helpers.run_main(
        'train', helpers.DEMO, '--work-dir', tmp_path / 'w', *options
    )
    assert ours.returncode == 1
    assert ours.stderr.strip() == expected
    theirs = helpers.run_mmpretrain_tool(
        'train', helpers.DEMO, '--work-dir', tmp_path / 'w', *options
    )
    assert theirs.returncode == 1
    assert helpers.last_line(theirs.stderr).endswith(': ' + expected)
    # with the key the line names, it trains
    result = helpers.run_main(
        'train',
        helpers.DEMO,
        '--work-dir',
        tmp_path / 'w2',
        *options,
        'model.head.in_channels=256',
    )
    assert result.returncode == 0, result.stderr[-2000:]
    state = torch.load(tmp_path / 'w2' / 'epoch_1.pth', weights_only=False)
    assert state['state_dict']['head.layers.head.weight'].shape == (10, 256)
