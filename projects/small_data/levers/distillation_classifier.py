from typing import Optional, Union

import torch
import torch.nn.functional as F
from mmengine.logging import print_log
from mmengine.runner import CheckpointLoader
from mmpretrain.models.classifiers import ImageClassifier
from mmpretrain.registry import MODELS
from mmpretrain.structures import DataSample
from torch import nn

from t2t_plugin.models.option_checks import (
    check_choice,
    check_fraction,
    check_positive,
)
from t2t_plugin.runtime.checkpoint import load_state_dict_strictly


def soft_distillation_loss(
    student_logits: torch.Tensor,
    teacher_logits: torch.Tensor,
    temperature: float,
) -> torch.Tensor:
    """Hinton et al.'s loss: ``T**2 * KL(softmax(t / T) || softmax(s / T))``
    summed over the classes, averaged over the batch. ``T**2`` keeps its
    gradients at the scale of a cross entropy whatever ``T``."""
    # float32: under autocast the softmax of a sharp teacher underflows
    log_student = F.log_softmax(student_logits.float() / temperature, dim=1)
    log_teacher = F.log_softmax(teacher_logits.float() / temperature, dim=1)
    kl = F.kl_div(
        log_student, log_teacher, reduction='batchmean', log_target=True
    )
    return kl * temperature**2


def hard_distillation_loss(
    student_logits: torch.Tensor, teacher_logits: torch.Tensor
) -> torch.Tensor:
    """DeiT's hard distillation: the cross entropy against the class the
    teacher picks."""
    return F.cross_entropy(
        student_logits.float(), teacher_logits.argmax(dim=1)
    )


class _Unregistered:
    """Holds a module where its owner's ``nn.Module`` machinery does not
    look (``_modules``), so that it is in none of the owner's
    ``state_dict``, ``parameters``, ``children`` or ``train()``."""

    def __init__(self, module: nn.Module) -> None:
        self.module = module


@MODELS.register_module()
class DistillationClassifier(ImageClassifier):
    """An :class:`ImageClassifier` trained with a frozen teacher's
    predictions (knowledge distillation), e.g. a small T2T-ViT taught by a
    ResNet-18 trained on the same images.

    Training minimises ``(1 - kd_weight) * loss + kd_weight * kd``, ``loss``
    being the head's own (label smoothing, mixup's soft labels) and ``kd``
    the distillation loss of the student's logits against the teacher's on
    the same preprocessed batch (mixed images where the data preprocessor
    mixes them). The loss dict holds both parts already weighted, ``loss``
    and ``loss_kd``, which mmengine sums and logs. Prediction, ``'tensor'``
    mode and features are the student's alone, as :class:`ImageClassifier`
    gives them.

    The teacher is frozen and stays in eval mode (its batch norms use their
    running statistics). It is deliberately not a submodule: mmengine's
    optimizer constructors put parameters without gradients into their
    groups too, a submodule would add its weights to every student
    checkpoint (a ResNet-18 is 45 MB beside a 2.4 MB student), and the
    student's checkpoints would not load strictly into the same config
    without the teacher. So checkpoints of this model are plain student
    checkpoints: they load into the config without distillation (e.g. for
    testing or deployment). The teacher follows the student's moves
    (``to``, ``cuda``, ``half``: :meth:`_apply`), and is read from
    ``teacher_checkpoint`` in :meth:`init_weights`, which the Runner calls
    before each training (also on resume); the weights must fit the teacher
    exactly.

    The teacher reads the student's inputs: train it with the same data
    preprocessor (mean, std, ``to_rgb``) and image size, on the same
    classes.

    Args:
        teacher (dict | nn.Module): The teacher, a classifier config (e.g.
            ``dict(type='ImageClassifier', backbone=dict(type='ResNet',
            depth=18), ...)``) or model whose ``forward(inputs,
            mode='tensor')`` gives its logits.
        teacher_checkpoint (str, optional): The teacher's weights (a
            checkpoint of the teacher's config, read with mmengine's
            ``CheckpointLoader``, i.e. this plugin's safe reader). None
            leaves the teacher as built (a model passed in), or as its own
            ``init_cfg`` initialises it (a config). Defaults to None.
        kd_weight (float): The share of the distillation loss, from 0 (the
            head's loss alone) to 1 (the teacher's alone). Defaults to 0.5.
        temperature (float): ``T`` of the ``'soft'`` mode; higher values
            soften both distributions. Defaults to 4.0.
        kd_mode (str): ``'soft'`` (Hinton: ``T**2 * KL(softmax(teacher /
            T) || softmax(student / T))``, batch mean) or ``'hard'`` (DeiT:
            cross entropy against the teacher's top class;
            ``temperature`` unused). Defaults to ``'soft'``.
        **kwargs: The :class:`ImageClassifier` arguments (``backbone``,
            ``neck``, ``head``, ``train_cfg``, ``data_preprocessor``,
            ``init_cfg``) of the student.
    """

    KD_MODES = ('soft', 'hard')

    def __init__(
        self,
        teacher: Union[dict, nn.Module],
        teacher_checkpoint: Optional[str] = None,
        kd_weight: float = 0.5,
        temperature: float = 4.0,
        kd_mode: str = 'soft',
        **kwargs,
    ) -> None:
        owner = type(self).__name__
        check_choice(owner, 'kd_mode', kd_mode, self.KD_MODES)
        check_fraction(owner, 'kd_weight', kd_weight, closed=True)
        check_positive(owner, 'temperature', temperature)
        if teacher_checkpoint is not None and not isinstance(
            teacher_checkpoint, str
        ):
            raise ValueError(
                f'{owner} got teacher_checkpoint={teacher_checkpoint!r}; '
                "give the path of the teacher's checkpoint, or None."
            )
        super().__init__(**kwargs)
        # a model passed in keeps its weights; a config's are initialised
        # with the student's (init_weights)
        self._teacher_from_config = not isinstance(teacher, nn.Module)
        if self._teacher_from_config:
            teacher = MODELS.build(teacher)
        teacher.requires_grad_(False)
        teacher.eval()
        self._teacher = _Unregistered(teacher)
        self.teacher_checkpoint = teacher_checkpoint
        self.kd_weight = kd_weight
        self.temperature = temperature
        self.kd_mode = kd_mode
        self._check_classes()

    @property
    def teacher(self) -> nn.Module:
        """The frozen teacher (not a submodule: see the class docs)."""
        return self._teacher.module

    def _check_classes(self) -> None:
        head = getattr(self.teacher, 'head', None)
        taught = getattr(head, 'num_classes', None)
        classes = getattr(self.head, 'num_classes', None)
        if (
            isinstance(taught, int)
            and isinstance(classes, int)
            and taught != classes
        ):
            raise ValueError(
                f'The teacher has model.teacher.head.num_classes={taught}, '
                f'the student model.head.num_classes={classes}; set '
                f'model.teacher.head.num_classes to {classes} and use a '
                'teacher trained on the same classes.'
            )

    def init_weights(self) -> None:
        """Initialise the student, then the teacher (its config's
        ``init_cfg``, then ``teacher_checkpoint``)."""
        super().init_weights()
        if self._teacher_from_config and hasattr(self.teacher, 'init_weights'):
            self.teacher.init_weights()
        if self.teacher_checkpoint:
            self._load_teacher(self.teacher_checkpoint)
        self.teacher.eval()

    def _load_teacher(self, path: str) -> None:
        source = f'teacher_checkpoint {path}'
        # every scheme of CheckpointLoader reads through the plugin's safe
        # reader (a missing file is one CheckpointError line)
        checkpoint = CheckpointLoader.load_checkpoint(path, map_location='cpu')
        load_state_dict_strictly(self.teacher, checkpoint, source)
        print_log(f'Loaded the teacher from {path}.', logger='current')

    def train(self, mode: bool = True) -> 'DistillationClassifier':
        """Set the student's mode; the teacher stays in eval mode."""
        super().train(mode)
        self.teacher.eval()
        return self

    def _apply(self, fn, *args, **kwargs) -> 'DistillationClassifier':
        # .to(), .cuda(), .cpu(), .half() and a wrapper moving its module
        # all end here: the teacher moves with the student
        super()._apply(fn, *args, **kwargs)
        self.teacher._apply(fn, *args, **kwargs)
        return self

    def extra_repr(self) -> str:
        return (
            f'teacher={type(self.teacher).__name__} (frozen, not a '
            f'submodule), kd_mode={self.kd_mode!r}, '
            f'kd_weight={self.kd_weight}, temperature={self.temperature}'
        )

    def distillation_loss(
        self, student_logits: torch.Tensor, teacher_logits: torch.Tensor
    ) -> torch.Tensor:
        """The unweighted distillation loss of ``kd_mode``."""
        if student_logits.shape != teacher_logits.shape:
            raise ValueError(
                f'The teacher gives logits of shape '
                f'{tuple(teacher_logits.shape)}, the student '
                f'{tuple(student_logits.shape)}; the teacher must be a '
                'classifier of the same classes.'
            )
        if self.kd_mode == 'hard':
            return hard_distillation_loss(student_logits, teacher_logits)
        return soft_distillation_loss(
            student_logits, teacher_logits, self.temperature
        )

    def loss(
        self, inputs: torch.Tensor, data_samples: list[DataSample]
    ) -> dict:
        """The head's loss and the distillation loss, each weighted.

        Args:
            inputs (torch.Tensor): The preprocessed batch, (N, C, H, W).
            data_samples (list[DataSample]): Its labels.

        Returns:
            dict[str, Tensor]: ``loss`` (the head's, times ``1 -
            kd_weight``), ``loss_kd`` (times ``kd_weight``) and what else
            the head reports.
        """
        # the head's public API: its loss, then its logits of the same
        # features (a second pass of the head alone, not the backbone)
        feats = self.extract_feat(inputs)
        losses = self.head.loss(feats, data_samples)
        logits = self.head(feats)
        with torch.no_grad():
            teacher_logits = self.teacher(inputs, mode='tensor')
        kd = self.distillation_loss(logits, teacher_logits)
        # mmengine adds every entry whose key holds 'loss': weight each
        losses = {
            key: (1 - self.kd_weight) * value if 'loss' in key else value
            for key, value in losses.items()
        }
        losses['loss_kd'] = self.kd_weight * kd
        return losses
