"""Export of T2T-ViT classifiers and pyramid backbones to ONNX, with
symbolic batch, height and width (the position table is resized inside the
graph), so that one file serves 224, 384 and non-square inputs."""

import glob
import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Union

import torch
from mmengine.config import Config
from mmengine.registry import DefaultScope
from mmpretrain.registry import MODELS
from torch import nn

from t2t_preflight.config import load_config

from ..models.necks import T2TFeaturePyramid
from ..runtime.checkpoint import (
    checkpoint_weights,
    load_state_dict_strictly,
    read_checkpoint,
)
from .runtimes import TILING_KEY

OPSET = 18
OUTPUTS = ('logits', 'scores')
# torch.export needs an upper bound for a symbolic size
MAX_BATCH = 4096
MAX_SIDE = 8192


class ModelForExport(nn.Module):
    """Images to a classifier's logits (or softmax scores), or, without a
    head, to the feature levels of a backbone and its neck."""

    def __init__(
        self,
        backbone: nn.Module,
        neck: Optional[nn.Module] = None,
        head: Optional[nn.Module] = None,
        output: str = 'logits',
    ) -> None:
        super().__init__()
        if output not in OUTPUTS:
            raise ValueError(
                f'Unknown output {output!r}; choose one of {OUTPUTS}.'
            )
        self.backbone = backbone
        self.neck = neck
        self.head = head
        self.output = output

    def forward(self, images: torch.Tensor):
        feats = self.backbone(images)
        if self.neck is not None:
            feats = self.neck(feats)
        if self.head is None:
            return tuple(feats)
        logits = self.head(feats)
        return logits.softmax(-1) if self.output == 'scores' else logits


@dataclass
class ExportableModel:
    """A model in eval mode (images in, tensors out) and its input: the
    ``(H, W)`` of its config, the channels, the stride the sides must be
    multiples of, the output names, the normalisation of its inputs (on
    pixel values 0-255), their channel order (``'RGB'``, ``'BGR'`` or
    ``'L'``) and the class names the checkpoint's meta gives."""

    module: nn.Module
    input_size: tuple[int, int]
    in_channels: int
    stride: int
    output_names: list[str]
    mean: list[float] = field(default_factory=list)
    std: list[float] = field(default_factory=list)
    channel_order: str = 'RGB'
    classes: list[str] = field(default_factory=list)

    def metadata(self) -> dict[str, str]:
        """The ``metadata_props`` of an exported file, what a runtime needs
        to feed it an image file: lists as JSON, the channel order as it
        is."""
        lists = dict(mean=self.mean, std=self.std, classes=self.classes)
        lists['input_size'] = list(self.input_size)
        props = {key: json.dumps(value) for key, value in lists.items()}
        return {**props, 'channel_order': self.channel_order}


def build_exportable(
    config: Union[str, Path, Config],
    checkpoint: Optional[Union[str, Path]],
    output: str = 'logits',
) -> ExportableModel:
    """Build a config's model and load its checkpoint, ready for export.

    A classifier exports images to ``output`` (logits or scores); a dense
    config (mmdet / mmseg) its backbone and, when its first neck is
    :class:`T2TFeaturePyramid`, the four levels FPN or UPerNet read. No
    checkpoint: random initialisation. Raises ValueError for a config that
    is not T2T-ViT or a checkpoint that does not fit; a missing or
    damaged file is :func:`read_checkpoint`'s one-line ``CheckpointError``
    (a ValueError too).
    """
    cfg = load_config(config)
    backbone_cfg = cfg.model.get('backbone') or {}
    backbone_type = str(backbone_cfg.get('type', '')).split('.')[-1]
    if backbone_type != 'T2TViT':
        raise ValueError(
            f'Only T2T-ViT models export here; the config builds a '
            f'{backbone_type or cfg.model.get("type")!r} backbone.'
        )
    # read once, before the model is built
    loaded = None if checkpoint is None else read_checkpoint(checkpoint)
    in_channels = backbone_cfg.get('in_channels', 3)
    preprocessor = (
        cfg.model.get('data_preprocessor')
        or cfg.get('data_preprocessor')
        or {}
    )
    mean = [float(v) for v in preprocessor.get('mean') or [0] * in_channels]
    std = [float(v) for v in preprocessor.get('std') or [1] * in_channels]
    # mmpretrain's preprocessor flips cv2's BGR to RGB before normalising
    to_rgb = preprocessor.get('to_rgb', preprocessor.get('bgr_to_rgb'))
    channel_order = 'L' if in_channels == 1 else ('RGB' if to_rgb else 'BGR')
    if cfg.model.get('type') == 'ImageClassifier':
        cfg.model.backbone.pop('init_cfg', None)  # the checkpoint replaces it
        classifier = MODELS.build(cfg.model)
        classes = _load_parts({'': classifier}, loaded, checkpoint)
        neck = getattr(classifier, 'neck', None)
        module = ModelForExport(
            classifier.backbone, neck, classifier.head, output
        )
        output_names = [output]
    else:
        # the parts are built on their own, from our registry, whatever
        # default scope (mmdet, mmseg) the config set
        with DefaultScope.overwrite_default_scope('mmpretrain'):
            module, output_names = _build_pyramid(cfg, backbone_cfg)
        parts = {'backbone.': module.backbone}
        if module.neck is not None:
            # a list of necks is an nn.Sequential in mmdet and mmseg
            listed = not isinstance(cfg.model.neck, dict)
            parts['neck.0.' if listed else 'neck.'] = module.neck
        classes = _load_parts(parts, loaded, checkpoint)
    backbone = module.backbone
    stride = backbone.tokens_to_token.total_stride
    size = tuple(side * stride for side in backbone.patch_resolution)
    return ExportableModel(
        module.eval(),
        size,
        in_channels,
        stride,
        output_names,
        mean,
        std,
        channel_order,
        classes,
    )


def _build_pyramid(
    cfg: Config, backbone_cfg: dict
) -> tuple[ModelForExport, list[str]]:
    """The backbone of a dense config, and its first neck if that is a
    T2TFeaturePyramid, with the names of their outputs."""
    backbone_cfg = dict(backbone_cfg, type='T2TViT')
    backbone_cfg.pop('init_cfg', None)
    backbone = MODELS.build(backbone_cfg)
    necks = cfg.model.get('neck') or [{}]
    neck_cfg = dict(necks if isinstance(necks, dict) else necks[0])
    if not str(neck_cfg.get('type', '')).endswith('T2TFeaturePyramid'):
        count = len(backbone.out_indices) + 2 * bool(backbone.out_t2t_maps)
        return ModelForExport(backbone), [f'out{i}' for i in range(count)]
    neck_cfg['type'] = 'T2TFeaturePyramid'
    # built apart from its backbone: give it the widths it would read off
    # that backbone inside the detector or segmentor
    if neck_cfg.get('in_channels') is None:
        neck_cfg['in_channels'] = T2TFeaturePyramid.backbone_widths(backbone)
    pyramid = MODELS.build(neck_cfg)
    names = [f'level{i}' for i in pyramid.out_indices]
    return ModelForExport(backbone, pyramid), names


def _load_parts(
    parts: dict[str, nn.Module],
    loaded: Optional[dict],
    checkpoint: Optional[Union[str, Path]],
) -> list[str]:
    """Load the parts from ``loaded``, what :func:`read_checkpoint` read
    from the file ``checkpoint`` (None: random initialisation); the class
    names of its meta."""
    if loaded is None:
        for part in parts.values():
            part.init_weights()
        return []
    state_dict = checkpoint_weights(loaded)
    for prefix, part in parts.items():
        own = {
            key[len(prefix) :]: value
            for key, value in state_dict.items()
            if key.startswith(prefix)
        }
        if prefix and not own:
            raise ValueError(
                f'{checkpoint} holds no {prefix}* weights; give the '
                'checkpoint of a detector or segmentor with this backbone.'
            )
        load_state_dict_strictly(part, {'state_dict': own}, str(checkpoint))
    meta = loaded.get('meta') or {}
    return [
        str(name)
        for name in (meta.get('dataset_meta') or {}).get('classes') or ()
    ]


def external_data_file(path: Union[str, Path]) -> Optional[Path]:
    """The file beside an ONNX model that holds its weights, or None for
    a self-contained model."""
    import onnx
    from onnx.external_data_helper import (
        ExternalDataInfo,
        uses_external_data,
    )

    path = Path(path)
    graph = onnx.load(str(path), load_external_data=False).graph
    for tensor in graph.initializer:
        if uses_external_data(tensor):
            return path.parent / ExternalDataInfo(tensor).location
    return None


def export_onnx(
    model: ExportableModel,
    path: Union[str, Path],
    opset: int = OPSET,
    dynamic_batch: bool = True,
    dynamic_size: bool = True,
    batch_size: int = 2,
    external_data: bool = False,
) -> Path:
    """Write ``model`` as an ONNX file with one input called ``images``.

    Batch, height and width (multiples of ``model.stride``) are symbolic
    unless made static; the graph is captured with a batch of
    ``batch_size``, the file's batch when that axis is static. The file
    holds its weights (it loads alone from any folder) unless
    ``external_data`` is True, or they are too large for protobuf's 2 GB
    (torch's exporter decides, from 1.5 GiB): then they go to
    ``<path>.data`` beside it
    (:func:`external_data_file`). Both are written beside ``path`` under
    temporary names (in ``.<name>.<random>.tmp/``, which the next export
    to ``path`` removes if a kill left it) and renamed into place at the
    end, so that an interrupted export leaves an earlier one intact.
    Raises ValueError if the model cannot be captured.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # written in a folder of its own beside the file, then renamed into
    # place: a kill or an error leaves an earlier export as it was
    for killed in path.parent.glob(f'.{glob.escape(path.name)}.*.tmp'):
        shutil.rmtree(killed, ignore_errors=True)  # an export killed before
    staging = Path(
        tempfile.mkdtemp(
            prefix=f'.{path.name}.', suffix='.tmp', dir=path.parent
        )
    )
    try:
        _export_to(
            model,
            staging / path.name,
            opset,
            dynamic_batch,
            dynamic_size,
            batch_size,
            external_data,
        )
        weights = external_data_file(staging / path.name)
        if weights is not None:
            os.replace(weights, path.parent / weights.name)
        os.replace(staging / path.name, path)
        if weights is None:
            # the weights of an earlier export to this path, left stale
            path.with_name(path.name + '.data').unlink(missing_ok=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return path


def _export_to(
    model: ExportableModel,
    path: Path,
    opset: int,
    dynamic_batch: bool,
    dynamic_size: bool,
    batch_size: int,
    external_data: bool,
) -> None:
    axes: dict[int, object] = {}
    if dynamic_batch:
        axes[0] = torch.export.Dim('batch', min=1, max=MAX_BATCH)
    size = model.input_size
    if dynamic_size:
        limit = MAX_SIDE // model.stride
        axes[2] = model.stride * torch.export.Dim('height', min=1, max=limit)
        axes[3] = model.stride * torch.export.Dim('width', min=1, max=limit)
        # captured off the position table's own size, so that its resize
        # (an identity there) is in the graph instead of skipped
        size = tuple(side + model.stride for side in size)
    images = torch.zeros(batch_size, model.in_channels, *size)
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
                dynamic_shapes=(axes,),
                external_data=external_data,
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
    # the soft splits, so that a runtime session refuses the sizes the
    # model refuses (the graph computes numbers for any)
    import onnx

    # a bare backbone exports too (.dev_scripts' deployed copies)
    t2t = getattr(model.module, 'backbone', model.module).tokens_to_token
    names = ('in_channels', 'kernel_sizes', 'strides', 'paddings')
    tiling = {name: getattr(t2t, name) for name in names}
    onnx_model = onnx.load(str(path), load_external_data=False)
    onnx.helper.set_model_props(
        onnx_model, {TILING_KEY: json.dumps(tiling), **model.metadata()}
    )
    onnx.save(onnx_model, str(path))


def is_onnx_model(path: Union[str, Path]) -> bool:
    """Whether ``path`` holds an ONNX model (an earlier export, which an
    export may replace)."""
    import onnx

    try:
        model = onnx.load(str(path), load_external_data=False)
    # protobuf's DecodeError, or what onnx raises for another file
    except Exception:
        return False
    return model.ir_version > 0 and len(model.graph.node) > 0


def check_input_size(model: ExportableModel, size: Sequence[int]) -> None:
    """Raise the model's own error for an ``(H, W)`` it cannot tile."""
    model.module.backbone.tokens_to_token.output_sizes(tuple(size))
