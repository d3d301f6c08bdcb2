"""Deployed copies of a backbone (onnxruntime, OpenVINO) for the benchmark.

The backbone is exported once with ``t2t_plugin.deployment`` (the file
``tools/deployment/pytorch2onnx.py`` writes: dynamic batch, height and
width) and opened in each runtime and precision. Beside the speed, each
deployed copy gets two accuracy figures against eager fp32: the largest
difference of its outputs on the benchmark batch, and the top-1 agreement
of a linear probe on the handwritten digits that scikit-learn ships.
"""

import contextlib
import io
from pathlib import Path
from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F

from t2t_plugin.datasets import DigitsDataset
from t2t_plugin.deployment import (
    ExportableModel,
    RuntimeSession,
    export_onnx,
    max_abs_diff,
    quantize_int8,
)
from t2t_plugin.models.backbones import T2TViT

# benchmark name -> (runtime, precision)
DEPLOYED = {
    'onnxruntime': ('onnxruntime', 'fp32'),
    'onnxruntime-int8': ('onnxruntime', 'int8'),
    'openvino': ('openvino', 'fp32'),
    'openvino-bf16': ('openvino', 'bf16'),
}


class RuntimeRunner:
    """One inference of a deployed copy on a fixed batch, callable again
    and again like :class:`StepRunner`.

    Args:
        session (RuntimeSession): The opened file.
        images (torch.Tensor): The input batch (CPU).
    """

    def __init__(self, session: RuntimeSession, images: torch.Tensor) -> None:
        self.session = session
        self.images = np.ascontiguousarray(images.numpy(), dtype=np.float32)
        self.device = torch.device('cpu')

    def __call__(self) -> None:
        self.session(self.images)


def export_backbone(
    model: T2TViT, folder: Path, names: tuple[str, ...]
) -> dict[str, Path]:
    """ONNX files of ``model`` for the requested deployed copies.

    Returns:
        dict: benchmark name -> file (the int8 one quantised from fp32).
    """
    size = tuple(
        side * model.tokens_to_token.total_stride
        for side in model.patch_resolution
    )
    exportable = ExportableModel(
        module=model.eval(),
        input_size=size,
        in_channels=model.tokens_to_token.in_channels,
        stride=model.tokens_to_token.total_stride,
        output_names=['features'],
    )
    fp32 = folder / 'backbone.onnx'
    # torch.onnx reports its steps on stdout, which holds the table
    with contextlib.redirect_stdout(io.StringIO()):
        export_onnx(exportable, fp32)
    files = {}
    for name in names:
        if DEPLOYED[name][1] == 'int8':
            files[name] = quantize_int8(fp32, folder / 'backbone.int8.onnx')
        else:
            files[name] = fp32
    return files


def open_sessions(
    files: dict[str, Path], threads: Optional[int]
) -> dict[str, RuntimeSession]:
    return {
        name: RuntimeSession(path, *DEPLOYED[name], threads=threads)
        for name, path in files.items()
    }


def digits_batch(
    count: int, img_size: int, in_channels: int, seed: int = 0
) -> tuple[torch.Tensor, np.ndarray]:
    """``count`` digits (shuffled, fixed seed) upsampled to the model's input
    size and normalised to zero mean, unit spread; and their labels."""
    samples = DigitsDataset(split='all', seed=seed).load_data_list()
    order = np.random.default_rng(seed).permutation(len(samples))[:count]
    images = torch.from_numpy(
        np.stack([samples[i]['img'] for i in order])
    ).float()[:, None]
    images = F.interpolate(
        images, size=(img_size, img_size), mode='bilinear', align_corners=False
    ).repeat(1, in_channels, 1, 1)
    labels = np.array([samples[i]['gt_label'] for i in order])
    return (images - 127.5) / 127.5, labels


def _features(run, images: torch.Tensor, batch_size: int) -> np.ndarray:
    return np.concatenate(
        [
            run(images[start : start + batch_size])
            for start in range(0, len(images), batch_size)
        ]
    )


def top1_agreement(
    model: T2TViT,
    sessions: dict[str, RuntimeSession],
    count: int,
    batch_size: int,
) -> tuple[dict[str, float], float]:
    """Top-1 agreement of each deployed copy with eager fp32 on digits.

    A logistic-regression probe is fitted on the eager fp32 features of the
    first half of ``count`` digits; on the second half, each copy's
    features go through the same probe, and the share of images whose class
    equals eager fp32's is its agreement.

    Returns:
        tuple: benchmark name -> agreement, and the probe's accuracy on the
        labels with eager fp32 features (how much the features tell apart).
    """
    from sklearn.linear_model import LogisticRegression

    images, labels = digits_batch(
        count,
        model.patch_resolution[0] * model.tokens_to_token.total_stride,
        model.tokens_to_token.in_channels,
    )

    def eager(batch: torch.Tensor) -> np.ndarray:
        with torch.no_grad():
            return model(batch)[-1].float().numpy()

    half = count // 2
    eager_features = _features(eager, images, batch_size)
    probe = LogisticRegression(max_iter=2000)
    probe.fit(eager_features[:half], labels[:half])
    reference = probe.predict(eager_features[half:])
    accuracy = float((reference == labels[half:]).mean())
    agreement = {}
    for name, session in sessions.items():
        features = _features(
            lambda batch: session(batch)[-1], images[half:], batch_size
        )
        agreement[name] = float((probe.predict(features) == reference).mean())
    return agreement, accuracy


def output_difference(
    model: T2TViT, session: RuntimeSession, images: torch.Tensor
) -> float:
    """Largest absolute difference to eager fp32 on ``images``."""
    with torch.no_grad():
        expected = [output.numpy() for output in model(images)]
    return max_abs_diff(expected, session(images))
