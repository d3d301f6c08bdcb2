"""Export to ONNX and inference with onnxruntime and OpenVINO."""

from .onnx_export import (
    OPSET,
    ExportableModel,
    build_exportable,
    check_input_size,
    export_onnx,
    external_data_file,
    is_onnx_model,
)
from .runtimes import (
    RuntimeSession,
    compare,
    max_abs_diff,
    quantize_int8,
    sample_images,
)

__all__ = [
    'OPSET',
    'ExportableModel',
    'RuntimeSession',
    'build_exportable',
    'check_input_size',
    'compare',
    'export_onnx',
    'external_data_file',
    'is_onnx_model',
    'max_abs_diff',
    'quantize_int8',
    'sample_images',
]
