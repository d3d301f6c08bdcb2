"""DistillationClassifier: the soft and hard losses against their
formulas, the weighting, a frozen teacher outside the student's
parameters and checkpoints, predictions that are the student's alone, and
the distillation config trained through tools/train.py."""

import copy

import pytest
import torch
from mmengine.config import Config
from mmengine.optim import build_optim_wrapper
from mmpretrain.registry import MODELS
from mmpretrain.structures import DataSample

from projects.small_data.levers import DistillationClassifier
from projects.small_data.levers.distillation_classifier import (
    hard_distillation_loss,
    soft_distillation_loss,
)
from t2t_plugin.runtime import (
    CheckpointError,
    read_checkpoint,
)
from tests.helpers import (
    ROOT,
    TINY_ARCH,
    run_main,
    run_mmpretrain_tool,
    write_class_folders,
)
from tests.test_datasets.image_folders import LITE, lite_options

from . import CONFIGS

DISTILL = CONFIGS / 't2t-vit-lite_1xb64_custom-32px-distill.py'
NUM_CLASSES = 3

STUDENT = dict(
    backbone=dict(
        type='T2TViT',
        arch=dict(TINY_ARCH, token_layer='performer'),
        img_size=32,
        t2t_cfg=dict(token_dims=16),
    ),
    head=dict(type='T2TClsHead', num_classes=NUM_CLASSES, in_channels=32),
)


def teacher_cfg(num_classes: int = NUM_CLASSES, width: int = 8) -> dict:
    """A narrow ResNet-18 (batch norms included) as the teacher."""
    return dict(
        type='ImageClassifier',
        backbone=dict(
            type='ResNet', depth=18, stem_channels=width, base_channels=width
        ),
        neck=dict(type='GlobalAveragePooling'),
        head=dict(
            type='LinearClsHead',
            num_classes=num_classes,
            in_channels=8 * width,
        ),
    )


def build(**kwargs) -> DistillationClassifier:
    cfg = dict(copy.deepcopy(STUDENT), type='DistillationClassifier', **kwargs)
    cfg.setdefault('teacher', teacher_cfg())
    model = MODELS.build(cfg)
    model.init_weights()
    return model


def batch(size: int = 4) -> tuple[torch.Tensor, list]:
    inputs = torch.randn(size, 3, 32, 32)
    samples = [DataSample().set_gt_label(i % NUM_CLASSES) for i in range(size)]
    return inputs, samples


def hand_soft_kd(student, teacher, temperature):
    """T^2 * KL(p_teacher || p_student) at temperature T, batch mean,
    written out."""
    s, t = student / temperature, teacher / temperature
    log_p_s = s - torch.log(torch.exp(s).sum(dim=1, keepdim=True))
    p_t = torch.exp(t) / torch.exp(t).sum(dim=1, keepdim=True)
    kl = (p_t * (torch.log(p_t) - log_p_s)).sum(dim=1)
    return temperature**2 * kl.mean()


def hand_cross_entropy(logits, labels):
    log_p = logits - torch.log(torch.exp(logits).sum(dim=1, keepdim=True))
    return -log_p[torch.arange(len(labels)), labels].mean()


# --------------------------------------------------------------- losses --


def test_soft_loss_is_hintons_formula():
    student = torch.tensor([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]])
    teacher = torch.tensor([[2.0, 0.0, 1.0], [1.0, 1.0, -2.0]])
    for temperature in (1.0, 2.0, 4.0):
        torch.testing.assert_close(
            soft_distillation_loss(student, teacher, temperature),
            hand_soft_kd(student, teacher, temperature),
        )
    # the same logits: nothing to learn
    assert soft_distillation_loss(teacher, teacher, 4.0) == pytest.approx(
        0.0, abs=1e-6
    )


def test_hard_loss_is_the_cross_entropy_of_the_teachers_class():
    student = torch.tensor([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]])
    teacher = torch.tensor([[2.0, 0.0, 1.0], [1.0, 4.0, -2.0]])
    torch.testing.assert_close(
        hard_distillation_loss(student, teacher),
        hand_cross_entropy(student, torch.tensor([0, 1])),
    )


@pytest.mark.parametrize('kd_mode', ['soft', 'hard'])
def test_loss_is_the_weighted_sum(kd_mode):
    kd_weight, temperature = 0.3, 2.0
    model = build(
        kd_weight=kd_weight, temperature=temperature, kd_mode=kd_mode
    )
    model.eval()  # the performer's dropout off: the same logits twice
    inputs, samples = batch()
    losses = model.loss(inputs, samples)
    assert set(losses) == {'loss', 'loss_kd'}

    with torch.no_grad():
        student = model(inputs, mode='tensor')
        teacher = model.teacher(inputs, mode='tensor')
    labels = torch.tensor([s.gt_label.item() for s in samples])
    ce = hand_cross_entropy(student, labels)
    if kd_mode == 'soft':
        kd = hand_soft_kd(student, teacher, temperature)
    else:
        kd = hand_cross_entropy(student, teacher.argmax(dim=1))
    torch.testing.assert_close(losses['loss'], (1 - kd_weight) * ce)
    torch.testing.assert_close(losses['loss_kd'], kd_weight * kd)
    total, _ = model.parse_losses(losses)
    torch.testing.assert_close(total, (1 - kd_weight) * ce + kd_weight * kd)


def test_teacher_sees_the_mixed_images_the_student_sees():
    model = build(
        train_cfg=dict(augments=dict(type='Mixup', alpha=0.8)),
        data_preprocessor=dict(num_classes=NUM_CLASSES),
    )
    seen = {}

    def record(name):
        def hook(module, args):
            seen[name] = args[0].clone()

        return hook

    model.backbone.register_forward_pre_hook(record('student'))
    model.teacher.backbone.register_forward_pre_hook(record('teacher'))
    inputs, samples = batch()
    data = model.data_preprocessor(
        dict(inputs=list(inputs * 50 + 128), data_samples=samples), True
    )
    model.train()
    model(**data, mode='loss')
    # mixed: soft labels, and images that are not the ones given
    assert data['data_samples'][0].gt_score.shape == (NUM_CLASSES,)
    torch.testing.assert_close(seen['teacher'], seen['student'])


# --------------------------------------------------------------- teacher --


def test_teacher_is_frozen_and_outside_the_student():
    model = build()
    teacher = model.teacher
    running_mean = teacher.backbone.bn1.running_mean.clone()
    model.train()
    assert model.training and model.backbone.training
    assert not any(m.training for m in teacher.modules())

    inputs, samples = batch()
    total, _ = model.parse_losses(model.loss(inputs, samples))
    total.backward()
    assert all(p.grad is None for p in teacher.parameters())
    assert not any(p.requires_grad for p in teacher.parameters())
    assert all(p.grad is not None for p in model.head.parameters())
    # eval mode: its batch norms did not update their statistics
    torch.testing.assert_close(teacher.backbone.bn1.running_mean, running_mean)

    teacher_ids = {id(p) for p in teacher.parameters()}
    assert not teacher_ids & {id(p) for p in model.parameters()}
    optim_wrapper = build_optim_wrapper(
        model,
        dict(
            optimizer=dict(type='AdamW', lr=1e-3, weight_decay=0.05),
            paramwise_cfg=dict(norm_decay_mult=0.0, bias_decay_mult=0.0),
        ),
    )
    in_groups = {
        id(p)
        for group in optim_wrapper.optimizer.param_groups
        for p in group['params']
    }
    assert not teacher_ids & in_groups
    assert in_groups == {id(p) for p in model.parameters()}

    assert not [k for k in model.state_dict() if k.startswith('teacher')]
    # a student checkpoint: it loads strictly into the student alone
    student = MODELS.build(
        dict(copy.deepcopy(STUDENT), type='ImageClassifier')
    )
    student.load_state_dict(model.state_dict(), strict=True)


def test_teacher_moves_with_the_student():
    model = build().double()
    assert all(p.dtype == torch.float64 for p in model.teacher.parameters())
    model.float()
    if torch.cuda.is_available():
        model.cuda()
        assert next(model.teacher.parameters()).is_cuda
        model.cpu()
    assert next(model.teacher.parameters()).device.type == 'cpu'
    inputs, samples = batch()
    model.loss(inputs, samples)


def test_predictions_are_the_students():
    model = build().eval()
    student = MODELS.build(
        dict(copy.deepcopy(STUDENT), type='ImageClassifier')
    )
    student.load_state_dict(model.state_dict(), strict=True)
    student.eval()
    inputs, samples = batch()
    with torch.no_grad():
        torch.testing.assert_close(
            model(inputs, mode='tensor'), student(inputs, mode='tensor')
        )
        ours = model(inputs, copy.deepcopy(samples), mode='predict')
        theirs = student(inputs, copy.deepcopy(samples), mode='predict')
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a.pred_score, b.pred_score)
        assert a.pred_label.tolist() == b.pred_label.tolist()


def test_teacher_checkpoint_is_read_strictly(tmp_path):
    trained = MODELS.build(teacher_cfg())
    with torch.no_grad():
        for param in trained.parameters():
            param.normal_()
    path = tmp_path / 'teacher.pth'
    torch.save(dict(state_dict=trained.state_dict(), meta={}), path)
    model = build(teacher_checkpoint=str(path))
    for key, value in trained.state_dict().items():
        torch.testing.assert_close(model.teacher.state_dict()[key], value)

    other = tmp_path / 'wider.pth'
    torch.save(
        dict(state_dict=MODELS.build(teacher_cfg(width=16)).state_dict()),
        other,
    )
    with pytest.raises(CheckpointError) as error:
        build(teacher_checkpoint=str(other))
    assert f'teacher_checkpoint {other}' in str(error.value)
    assert '\n' not in str(error.value)

    missing = tmp_path / 'missing.pth'
    with pytest.raises(CheckpointError, match='Checkpoint not found'):
        build(teacher_checkpoint=str(missing))


def test_arguments_are_checked():
    with pytest.raises(ValueError) as error:
        build(teacher=teacher_cfg(num_classes=5))
    assert str(error.value) == (
        'The teacher has model.teacher.head.num_classes=5, the student '
        'model.head.num_classes=3; set model.teacher.head.num_classes to 3 '
        'and use a teacher trained on the same classes.'
    )
    for option, value, accepted in (
        ('kd_mode', 'feature', "choose one of 'soft', 'hard'"),
        ('kd_weight', 1.5, 'give a number in [0, 1]'),
        ('kd_weight', float('nan'), 'give a number in [0, 1]'),
        ('temperature', 0, 'give a finite number above 0'),
        ('temperature', '4', 'give a finite number above 0'),
    ):
        with pytest.raises(ValueError) as error:
            build(**{option: value})
        assert str(error.value) == (
            f'DistillationClassifier got {option}={value!r}; {accepted}.'
        )


# ---------------------------------------------------------------- config --


def test_config_teacher_is_the_resnet_reference():
    cfg = Config.fromfile(DISTILL)
    reference = Config.fromfile(
        ROOT / '.dev_scripts' / 'small_data' / 'resnet-18_1xb64_custom-32px.py'
    )
    teacher = cfg.model.teacher
    assert teacher.backbone == reference.model.backbone
    assert teacher.neck == reference.model.neck
    for key in ('type', 'num_classes', 'in_channels'):
        assert teacher.head[key] == reference.model.head[key]
    assert cfg.model.head.num_classes == teacher.head.num_classes
    assert cfg.data_preprocessor == reference.data_preprocessor
    # everything else is the recipe's
    recipe = Config.fromfile(LITE)
    assert cfg.model.backbone == recipe.model.backbone
    assert cfg.train_pipeline == recipe.train_pipeline
    assert cfg.optim_wrapper == recipe.optim_wrapper


def test_config_trains_with_a_teacher_checkpoint(tmp_path, monkeypatch):
    root = write_class_folders(tmp_path / 'data')
    teacher = MODELS.build(Config.fromfile(DISTILL).model.teacher)
    checkpoint = tmp_path / 'teacher.pth'
    torch.save(dict(state_dict=teacher.state_dict(), meta={}), checkpoint)
    work_dir = tmp_path / 'work'
    with monkeypatch.context() as patch:  # the documented way
        patch.setenv('TEACHER_CHECKPOINT', str(checkpoint))
        result = run_main(
            'train',
            DISTILL,
            '--work-dir',
            work_dir,
            '--verbose',  # the log's INFO lines here too
            '--cfg-options',
            *lite_options(root),
        )
    assert result.returncode == 0, result.stderr[-3000:]
    log = result.stdout + result.stderr
    assert f'Loaded the teacher from {checkpoint}.' in log
    assert 'loss_kd: ' in log

    # a plain student checkpoint, for the recipe's own config
    saved = read_checkpoint(work_dir / 'epoch_1.pth')['state_dict']
    assert not [k for k in saved if k.startswith('teacher')]
    student = MODELS.build(Config.fromfile(LITE).model)
    student.load_state_dict(saved, strict=True)

    # mmpretrain's own tools/train.py (the key, not the file's variable)
    theirs = run_mmpretrain_tool(
        'train', DISTILL, '--work-dir', tmp_path / 'theirs', '--cfg-options',
        *lite_options(root, f'model.teacher_checkpoint={checkpoint}'),
    )  # fmt: skip
    assert theirs.returncode == 0, theirs.stderr[-3000:]
    log = theirs.stdout + theirs.stderr
    assert f'Loaded the teacher from {checkpoint}.' in log
    assert 'loss_kd: ' in log


def test_config_without_its_teacher_checkpoint_is_one_line(
    tmp_path, monkeypatch
):
    root = write_class_folders(tmp_path / 'data')
    missing = tmp_path / 'no_teacher.pth'
    monkeypatch.setenv('TEACHER_CHECKPOINT', str(missing))
    result = run_main(
        'train',
        DISTILL,
        '--work-dir',
        tmp_path / 'work',
        '--cfg-options',
        *lite_options(root),
    )
    assert result.returncode == 1
    assert 'Traceback' not in result.stdout + result.stderr
    assert result.stderr.strip().splitlines() == [
        f'Checkpoint not found: expected {missing} '
        '(see docs/training.md#training).'
    ]
