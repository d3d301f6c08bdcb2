"""Export of T2T-ViT classifiers and pyramid backbones to ONNX.

The graph is captured by ``torch.export`` (``torch.onnx.export(...,
dynamo=True)``) with symbolic batch, height and width. Height and width are
symbolic multiples of the T2T module's total stride (16 for every released
arch), the only sizes the soft splits tile; the sinusoidal position table is
resized inside the graph, so one file serves 224, 384 and non-square inputs.
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Union

import torch
from mmengine.config import Config
from mmengine.registry import DefaultScope
from mmpretrain.registry import MODELS
from torch import nn

from ..engine.checkpoint import (
    checkpoint_state_dict,
    load_state_dict_strictly,
    read_checkpoint,
)
from ..engine.config import load_config
from ..models.backbones import T2TViT
from ..models.necks import T2TFeaturePyramid
from .runtimes import TILING_KEY

OPSET = 18
OUTPUTS = ('logits', 'scores')
# torch.export needs an upper bound for a symbolic size
MAX_BATCH = 4096
MAX_SIDE = 8192


class ClassifierForExport(nn.Module):
    """Images to logits (or softmax scores) of an mmpretrain classifier.

    Args:
        classifier (nn.Module): An ``ImageClassifier`` with a T2T-ViT
            backbone.
        output (str): ``'logits'`` or ``'scores'``. Defaults to
            ``'logits'``.
    """

    def __init__(self, classifier: nn.Module, output: str = 'logits') -> None:
        super().__init__()
        if output not in OUTPUTS:
            raise ValueError(
                f'Unknown output {output!r}; choose one of {OUTPUTS}.'
            )
        self.backbone = classifier.backbone
        self.neck = getattr(classifier, 'neck', None)
        self.head = classifier.head
        self.output = output

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        feats = self.backbone(images)
        if self.neck is not None:
            feats = self.neck(feats)
        logits = self.head(feats)
        return logits.softmax(-1) if self.output == 'scores' else logits


class PyramidForExport(nn.Module):
    """Images to the feature levels a dense-prediction neck reads.

    Args:
        backbone (T2TViT): The backbone.
        pyramid (T2TFeaturePyramid, optional): The pyramid neck. Without
            it, the backbone's own outputs are exported.
    """

    def __init__(
        self, backbone: T2TViT, pyramid: Optional[T2TFeaturePyramid] = None
    ) -> None:
        super().__init__()
        self.backbone = backbone
        self.pyramid = pyramid

    def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, ...]:
        feats = self.backbone(images)
        return tuple(self.pyramid(feats)) if self.pyramid else tuple(feats)


@dataclass
class ExportableModel:
    """A model ready for export, with what the exported file will hold.

    Attributes:
        module (nn.Module): The model in eval mode, images in, tensors out.
        input_size (tuple): The ``(H, W)`` the config is built for.
        in_channels (int): Image channels.
        stride (int): Height and width must be multiples of it.
        output_names (list): One name per output.
        mean (list): Per-channel mean the inputs are normalised with.
        std (list): Per-channel standard deviation, likewise.
        kind (str): ``'classifier'`` or ``'pyramid'``.
    """

    module: nn.Module
    input_size: tuple[int, int]
    in_channels: int
    stride: int
    output_names: list[str]
    mean: list[float] = field(default_factory=list)
    std: list[float] = field(default_factory=list)
    kind: str = 'classifier'


def _find_backbone_cfg(cfg: Config) -> dict:
    backbone = cfg.model.get('backbone') or {}
    backbone_type = str(backbone.get('type', '')).split('.')[-1]
    if backbone_type != 'T2TViT':
        raise ValueError(
            f'Only T2T-ViT models export here; the config builds a '
            f'{backbone_type or cfg.model.get("type")!r} backbone.'
        )
    return backbone


def _normalisation(cfg: Config, in_channels: int) -> tuple[list, list]:
    preprocessor = (
        cfg.model.get('data_preprocessor')
        or cfg.get('data_preprocessor')
        or {}
    )
    mean = preprocessor.get('mean') or [0.0] * in_channels
    std = preprocessor.get('std') or [1.0] * in_channels
    return [float(v) for v in mean], [float(v) for v in std]


def _disable_checkpointing(backbone: T2TViT) -> None:
    if backbone.with_cp:
        # activation checkpointing only acts in training; export is eval
        backbone.with_cp = False
        backbone.tokens_to_token.with_cp = False


def build_exportable(
    config: Union[str, Path, Config],
    checkpoint: Optional[Union[str, Path]],
    output: str = 'logits',
) -> ExportableModel:
    """Build a config's model and load its checkpoint, ready for export.

    A classifier config (mmpretrain ``ImageClassifier``) exports images to
    logits or scores. A dense-prediction config (mmdet / mmseg with a T2T-ViT
    backbone) exports the backbone and, when the config's first neck is
    :class:`T2TFeaturePyramid`, that neck: images to the four pyramid levels
    (strides 4, 8, 16, 32) that FPN or UPerNet read.

    Args:
        config (str | Path | Config): The config.
        checkpoint (str | Path, optional): Its weights (``backbone.*`` and,
            for dense configs, ``neck.0.*`` keys are read). Without it the
            model keeps its random initialisation.
        output (str): ``'logits'`` or ``'scores'`` for classifiers.
            Defaults to ``'logits'``.

    Returns:
        ExportableModel: The model in eval mode and its input description.

    Raises:
        ValueError: If the config is not a T2T-ViT model or the checkpoint
            cannot be read (``CheckpointError``, ``ConfigError``).
        CheckpointMismatchError: If the checkpoint does not fit the model.
        FileNotFoundError: If the config or checkpoint is missing.
    """
    cfg = load_config(config)
    backbone_cfg = _find_backbone_cfg(cfg)
    if checkpoint is not None and not Path(checkpoint).is_file():
        raise FileNotFoundError(f'Checkpoint {checkpoint} does not exist.')
    in_channels = backbone_cfg.get('in_channels', 3)
    mean, std = _normalisation(cfg, in_channels)
    if cfg.model.get('type') == 'ImageClassifier':
        cfg.model.backbone.pop('init_cfg', None)  # the checkpoint replaces it
        classifier = MODELS.build(cfg.model)
        if checkpoint is None:
            classifier.init_weights()
        else:
            load_state_dict_strictly(
                classifier, read_checkpoint(checkpoint), str(checkpoint)
            )
        module = ClassifierForExport(classifier, output)
        backbone = classifier.backbone
        output_names = [output]
        kind = 'classifier'
    else:
        # the parts are built on their own, from our registry, whatever
        # default scope (mmdet, mmseg) the config set
        with DefaultScope.overwrite_default_scope('mmpretrain'):
            module, output_names = _build_pyramid(
                cfg, backbone_cfg, checkpoint
            )
        backbone = module.backbone
        kind = 'pyramid'
    _disable_checkpointing(backbone)
    t2t = backbone.tokens_to_token
    size = tuple(s * t2t.total_stride for s in backbone.patch_resolution)
    return ExportableModel(
        module.eval(),
        size,
        in_channels,
        t2t.total_stride,
        output_names,
        mean,
        std,
        kind,
    )


def _build_pyramid(
    cfg: Config, backbone_cfg: dict, checkpoint: Optional[Union[str, Path]]
) -> tuple[PyramidForExport, list[str]]:
    backbone_cfg = dict(backbone_cfg, type='T2TViT')
    backbone_cfg.pop('init_cfg', None)
    backbone = MODELS.build(backbone_cfg)
    necks = cfg.model.get('neck') or []
    necks = [necks] if isinstance(necks, dict) else list(necks)
    pyramid = None
    prefixes = {'backbone.': backbone}
    if necks and str(necks[0].get('type', '')).endswith('T2TFeaturePyramid'):
        neck_cfg = dict(necks[0], type='T2TFeaturePyramid')
        # built here apart from its backbone: give it the widths it would
        # read off that backbone inside the detector or segmentor
        if neck_cfg.get('in_channels') is None:
            neck_cfg['in_channels'] = T2TFeaturePyramid.backbone_widths(
                backbone
            )
        pyramid = MODELS.build(neck_cfg)
        # a list of necks is an nn.Sequential in mmdet and mmseg
        listed = isinstance(cfg.model.get('neck'), (list, tuple))
        prefixes['neck.0.' if listed else 'neck.'] = pyramid
    module = PyramidForExport(backbone, pyramid)
    if checkpoint is None:
        backbone.init_weights()
        if pyramid is not None:
            pyramid.init_weights()
    else:
        state_dict = checkpoint_state_dict(
            read_checkpoint(checkpoint), str(checkpoint)
        )
        for prefix, part in prefixes.items():
            own = {
                key[len(prefix) :]: value
                for key, value in state_dict.items()
                if key.startswith(prefix)
            }
            if not own:
                raise ValueError(
                    f'{checkpoint} holds no {prefix}* weights; give the '
                    'checkpoint of a detector or segmentor with this '
                    'backbone.'
                )
            load_state_dict_strictly(
                part, {'state_dict': own}, str(checkpoint)
            )
    if pyramid is not None:
        names = [f'level{i}' for i in pyramid.out_indices]
    else:
        names = [
            f'out{i}'
            for i in range(
                len(backbone.out_indices) + (2 if backbone.out_t2t_maps else 0)
            )
        ]
    return module, names


def dynamic_shapes(
    model: ExportableModel,
    dynamic_batch: bool = True,
    dynamic_size: bool = True,
) -> tuple[dict[int, object]]:
    """``torch.export`` dynamic shapes of the (only, positional) input.

    Batch is any size; height and width any multiple of ``model.stride``.
    """
    axes: dict[int, object] = {}
    if dynamic_batch:
        axes[0] = torch.export.Dim('batch', min=1, max=MAX_BATCH)
    if dynamic_size:
        stride = model.stride
        limit = MAX_SIDE // stride
        axes[2] = stride * torch.export.Dim('height', min=1, max=limit)
        axes[3] = stride * torch.export.Dim('width', min=1, max=limit)
    return (axes,)


def trace_size(model: ExportableModel, dynamic_size: bool) -> tuple[int, int]:
    """The image size the graph is captured at.

    For dynamic sizes it differs from the size the position table is built
    for, so that the table's resize (an identity at that size) is captured in
    the graph instead of being skipped.
    """
    if not dynamic_size:
        return model.input_size
    return tuple(side + model.stride for side in model.input_size)


def export_onnx(
    model: ExportableModel,
    path: Union[str, Path],
    opset: int = OPSET,
    dynamic_batch: bool = True,
    dynamic_size: bool = True,
    batch_size: int = 2,
) -> Path:
    """Write ``model`` as an ONNX file with one input called ``images``.

    Args:
        model (ExportableModel): From :func:`build_exportable`.
        path (str | Path): The ``.onnx`` file to write.
        opset (int): ONNX opset. Defaults to 18.
        dynamic_batch (bool): Symbolic batch axis. Defaults to True.
        dynamic_size (bool): Symbolic height and width (multiples of the
            stride). Defaults to True.
        batch_size (int): Batch of the example input the graph is captured
            with (and of the file when the batch is static). Defaults to 2.

    Returns:
        Path: ``path``.

    Raises:
        ValueError: If the model cannot be captured.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    height, width = trace_size(model, dynamic_size)
    images = torch.zeros(batch_size, model.in_channels, height, width)
    try:
        with torch.no_grad():
            torch.onnx.export(
                model.module,
                (images,),
                str(path),
                dynamo=True,
                opset_version=opset,
                input_names=['images'],
                output_names=model.output_names,
                dynamic_shapes=dynamic_shapes(
                    model, dynamic_batch, dynamic_size
                ),
                # onnxscript's optimizer removes additions of constants
                # that math.isclose(c, 0, abs_tol=1e-8) calls zero, among
                # them the performer's `+ 1e-8` (no-op rule `add_0`), which
                # changes its output by up to 1e-3; onnxruntime and OpenVINO
                # optimise the graph themselves when they load it.
                optimize=False,
                verbose=False,
            )
    except Exception as error:  # torch.export fails in many ways
        # the exporter wraps the error of the step that failed
        while error.__cause__ is not None:
            error = error.__cause__
        lines = str(error).strip().splitlines() or ['']
        raise ValueError(
            f'The model cannot be exported to ONNX ({type(error).__name__}: '
            f'{lines[0][:200]}).'
        ) from None
    _write_tiling(path, model.module.backbone.tokens_to_token)
    return path


def _write_tiling(path: Path, t2t: nn.Module) -> None:
    """Store the soft splits' settings in the file, so that a runtime
    session refuses the input sizes the model refuses (an exported graph
    computes numbers for any size)."""
    import onnx

    onnx_model = onnx.load(str(path), load_external_data=False)
    tiling = dict(
        in_channels=t2t.in_channels,
        kernel_sizes=list(t2t.kernel_sizes),
        strides=list(t2t.strides),
        paddings=list(t2t.paddings),
    )
    onnx.helper.set_model_props(onnx_model, {TILING_KEY: json.dumps(tiling)})
    onnx.save(onnx_model, str(path))


def check_input_size(model: ExportableModel, size: Sequence[int]) -> None:
    """Raise the model's own error for an ``(H, W)`` it cannot tile."""
    model.module.backbone.tokens_to_token.output_sizes(tuple(size))
