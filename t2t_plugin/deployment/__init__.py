"""Export to ONNX and inference with onnxruntime and OpenVINO."""

from .onnx_export import (
    OPSET,
    ClassifierForExport,
    ExportableModel,
    PyramidForExport,
    build_exportable,
    check_input_size,
    dynamic_shapes,
    export_onnx,
)
from .runtimes import (
    PRECISIONS,
    RUNTIMES,
    RuntimeSession,
    compare,
    max_abs_diff,
    quantize_int8,
    sample_images,
    torch_outputs,
)

__all__ = [
    'OPSET',
    'PRECISIONS',
    'RUNTIMES',
    'ClassifierForExport',
    'ExportableModel',
    'PyramidForExport',
    'RuntimeSession',
    'build_exportable',
    'check_input_size',
    'compare',
    'dynamic_shapes',
    'export_onnx',
    'max_abs_diff',
    'quantize_int8',
    'sample_images',
    'torch_outputs',
]
