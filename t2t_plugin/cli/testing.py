"""What ``tools/test.py`` adds to a config and a runner, as mmpretrain's
``tools/test.py`` does: drawn predictions, test-time augmentation, and a
check that the model's outputs are finite."""

import copy
import os.path as osp
from collections.abc import Sequence
from typing import Any, Optional

import torch
from mmengine.config import Config, ConfigDict
from mmengine.hooks import Hook

from ..engine.checkpoint import (
    CheckpointError,
    check_finite_weights,
    checkpoint_state_dict,
    read_checkpoint,
)


def checkpoint_problem(path: str) -> Optional[str]:
    """Why a checkpoint should not be tested, in one line, or None.

    Args:
        path (str): A checkpoint file or URL.

    Returns:
        str | None: The reason: it cannot be read, or some of its weights
        are NaN or infinite (a run that diverged scores chance).
    """
    try:
        check_finite_weights(
            checkpoint_state_dict(read_checkpoint(path), path), path
        )
    except CheckpointError as error:
        return str(error)
    return None


def enable_show(
    cfg: Config,
    show_dir: Optional[str],
    show: bool = False,
    interval: int = 1,
    wait_time: float = 2,
) -> None:
    """Switch on the visualization hook of any OpenMMLab toolbox.

    Args:
        cfg (Config): The run's config, with ``work_dir`` set.
        show_dir (str, optional): Folder for the drawings, inside the work
            dir if relative.
        show (bool): Show them in a window. Defaults to False.
        interval (int): Draw every ``interval``-th image. Defaults to 1.
        wait_time (float): Seconds each window stays. Defaults to 2.

    Raises:
        ValueError: If the config has no visualization hook.
    """
    hook = cfg.get('default_hooks', {}).get('visualization')
    if hook is None:
        raise ValueError(
            '--show / --show-dir need a visualization hook in default_hooks.'
        )
    scope = cfg.get('default_scope')
    # An absolute folder: mmpretrain's hook would take a relative out_dir
    # from the current folder, and mmdet's joins test_out_dir to
    # <work_dir>/<timestamp>/ again on every test batch.
    out_dir = (
        osp.abspath(osp.join(cfg.work_dir, show_dir)) if show_dir else None
    )
    if scope == 'mmpretrain':
        hook.update(
            enable=True,
            interval=interval,
            out_dir=out_dir,
            show=show,
            wait_time=wait_time,
        )
    elif scope == 'mmseg':
        # mmseg's hook writes through the visualizer's save_dir.
        hook.update(
            draw=True, interval=interval, show=show, wait_time=wait_time
        )
        if out_dir:
            cfg.visualizer.save_dir = out_dir
    else:
        hook.update(
            draw=True, interval=interval, show=show, wait_time=wait_time
        )
        if out_dir:
            hook.test_out_dir = out_dir


def enable_tta(cfg: Config) -> None:
    """Test with test-time augmentation, as mmpretrain's ``--tta`` does.

    The config's ``tta_model`` and ``tta_pipeline`` are used if it has
    them; a classification config without them averages the scores of the
    image and its horizontal flip.

    Raises:
        ValueError: If a detection or segmentation config has no
            ``tta_model`` / ``tta_pipeline``.
    """
    if 'tta_model' not in cfg or 'tta_pipeline' not in cfg:
        if cfg.get('default_scope', 'mmpretrain') != 'mmpretrain':
            raise ValueError(
                '--tta needs tta_model and tta_pipeline in a '
                'detection or segmentation config.'
            )
        cfg.setdefault('tta_model', dict(type='mmpretrain.AverageClsScoreTTA'))
        if 'tta_pipeline' not in cfg:
            pipeline = copy.deepcopy(cfg.test_dataloader.dataset.pipeline)
            flips = [
                dict(type='RandomFlip', prob=1.0),
                dict(type='RandomFlip', prob=0.0),
            ]
            pipeline[-1] = dict(
                type='TestTimeAug', transforms=[flips, [pipeline[-1]]]
            )
            cfg.tta_pipeline = pipeline
    cfg.model = ConfigDict(**cfg.tta_model, module=cfg.model)
    cfg.test_dataloader.dataset.pipeline = cfg.tta_pipeline


def _outputs_of(sample: Any) -> Sequence[torch.Tensor]:
    # the fields that carry a prediction in mmpretrain, mmdet and mmseg
    found = []
    for path in (
        'pred_score',
        'pred_instances.scores',
        'pred_instances.bboxes',
        'seg_logits.data',
    ):
        value = sample
        for name in path.split('.'):
            value = getattr(value, name, None)
            if value is None:
                break
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            found.append(value)
    return found


class NonFiniteOutputCounter(Hook):
    """Counts test predictions holding NaN or infinite values.

    A model with broken weights or an input it cannot handle scores
    NaN, which the metrics hide (a NaN score is simply never the top
    class); ``tools/test.py`` reports the count.
    """

    priority = 'VERY_LOW'

    def __init__(self) -> None:
        self.count = 0
        self.total = 0

    def after_test_iter(
        self,
        runner,
        batch_idx: int,
        data_batch: Any = None,
        outputs: Optional[Sequence] = None,
    ) -> None:
        for sample in outputs or ():
            self.total += 1
            if any(
                not bool(torch.isfinite(value).all())
                for value in _outputs_of(sample)
            ):
                self.count += 1
