"""Running exported T2T-ViT files with onnxruntime and OpenVINO, optional
dependencies (``pip install t2t-plugin[deploy]``) imported when a session
is opened."""

import functools
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Optional, Union

import numpy as np
import torch
from torch import nn

from ..models.t2t.t2t_module import soft_split_sizes

# metadata key of an exported file: the T2T module's soft splits (JSON)
TILING_KEY = 't2t_tiling'
RUNTIMES = ('onnxruntime', 'openvino')
# what each runtime offers beyond fp32 on a CPU: onnxruntime quantises the
# weights of MatMul/Gemm to int8 (activations quantised on the fly);
# OpenVINO computes in bfloat16 where the CPU has bf16 instructions
PRECISIONS = {'onnxruntime': ('fp32', 'int8'), 'openvino': ('fp32', 'bf16')}


def _import(name: str):
    try:
        return __import__(name)
    except ImportError:
        raise ImportError(
            f'{name} is not installed; install the deployment extras with '
            "pip install -e '.[deploy]'."
        ) from None


@functools.cache
def _openvino_core():
    """One OpenVINO ``Core`` for the process. Each Core loads a CPU plugin
    of its own, which points the calling thread's alternate signal stack
    at a buffer of its own, and at unloading back at the one it found,
    possibly an earlier plugin's freed buffer (OpenVINO 2026.4): the next
    signal handled on that thread, such as a data-loader worker's SIGCHLD
    in a training after an export, then ends the process with SIGSEGV.
    One Core loads the plugin once and keeps it."""
    return _import('openvino').Core()


def quantize_int8(src: Union[str, Path], dst: Union[str, Path]) -> Path:
    """onnxruntime's dynamic int8 quantisation of ``src`` into ``dst``:
    weights of matrix products become int8, activations are quantised per
    batch at run time, everything else stays float32; onnxruntime's two
    steps keep the metadata of ``src`` (its soft splits)."""
    ort = _import('onnxruntime')
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    dst = Path(dst)
    model = onnx.load(str(src))
    # the exporter's shape annotations of the unoptimised graph contradict
    # onnx's own shape inference, which the quantiser runs; they only serve
    # as hints, so they are dropped and inferred again
    del model.graph.value_info[:]
    with tempfile.TemporaryDirectory() as folder:
        plain = Path(folder) / 'plain.onnx'
        folded = Path(folder) / 'folded.onnx'
        onnx.save(model, str(plain))
        # the quantiser only converts products whose weight is an
        # initializer: fold the exported graph's weight transposes first
        options = ort.SessionOptions()
        options.graph_optimization_level = (
            ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        )
        options.optimized_model_filepath = str(folded)
        ort.InferenceSession(
            str(plain), options, providers=['CPUExecutionProvider']
        )
        quantize_dynamic(
            str(folded),
            str(dst),
            weight_type=QuantType.QInt8,
            op_types_to_quantize=['MatMul', 'Gemm'],
        )
    return dst


class RuntimeSession:
    """An exported file opened in onnxruntime or OpenVINO on the CPU.

    Called with a ``(B, C, H, W)`` float32 array, it returns the file's
    outputs as arrays. ``precision`` is ``'fp32'``, ``'int8'`` for a file
    from :func:`quantize_int8` (onnxruntime) or ``'bf16'`` (OpenVINO);
    ``threads`` the intra-op threads (None: the runtime's choice).
    """

    def __init__(
        self,
        path: Union[str, Path],
        runtime: str = 'onnxruntime',
        precision: str = 'fp32',
        threads: Optional[int] = None,
    ) -> None:
        if runtime not in PRECISIONS:
            raise ValueError(
                f'Unknown runtime {runtime!r}; choose one of {RUNTIMES}.'
            )
        if precision not in PRECISIONS[runtime]:
            raise ValueError(
                f'{runtime} runs {PRECISIONS[runtime]}, not {precision!r}.'
            )
        import onnx

        self.runtime = runtime
        self.precision = precision
        props = onnx.load(str(path), load_external_data=False).metadata_props
        # the soft splits export_onnx stored, None for a file without them
        self.tiling = next(
            (json.loads(p.value) for p in props if p.key == TILING_KEY), None
        )
        if runtime == 'onnxruntime':
            ort = _import('onnxruntime')
            options = ort.SessionOptions()
            if threads is not None:
                options.intra_op_num_threads = threads
                options.inter_op_num_threads = 1
            session = ort.InferenceSession(
                str(path), options, providers=['CPUExecutionProvider']
            )
            name = session.get_inputs()[0].name
            self._run = lambda images: session.run(None, {name: images})
            return
        # OpenVINO computes in bf16 by default on CPUs that have it
        hint = 'bf16' if precision == 'bf16' else 'f32'
        config = {
            'INFERENCE_PRECISION_HINT': hint,
            'PERFORMANCE_HINT': 'LATENCY',
        }
        if threads is not None:
            config['INFERENCE_NUM_THREADS'] = threads
        compiled = _openvino_core().compile_model(str(path), 'CPU', config)
        request = compiled.create_infer_request()
        outputs = list(compiled.outputs)

        def run(images: np.ndarray) -> list[np.ndarray]:
            results = request.infer([images])
            return [np.array(results[output]) for output in outputs]

        self._run = run

    def check_input(self, shape: Sequence[int]) -> None:
        """Refuse, with the model's own message (a ValueError), a batch
        shape the model refuses; the graph would compute numbers for it."""
        if self.tiling is None:
            return
        channels = self.tiling['in_channels']
        if len(shape) != 4 or shape[1] != channels:
            raise ValueError(
                f'T2T-ViT expects images of shape (B, {channels}, H, W), got '
                f'{tuple(shape)}.'
            )
        soft_split_sizes(
            tuple(shape[-2:]),
            self.tiling['kernel_sizes'],
            self.tiling['strides'],
            self.tiling['paddings'],
        )

    def __call__(
        self, images: Union[np.ndarray, torch.Tensor]
    ) -> list[np.ndarray]:
        if isinstance(images, torch.Tensor):
            images = images.detach().cpu().numpy()
        self.check_input(images.shape)
        return self._run(np.ascontiguousarray(images, dtype=np.float32))


def max_abs_diff(
    expected: Sequence[np.ndarray], actual: Sequence[np.ndarray]
) -> float:
    """Largest absolute difference over all outputs (a ValueError if the
    outputs differ in number or shape)."""
    if len(expected) != len(actual):
        raise ValueError(
            f'{len(actual)} outputs where {len(expected)} were expected.'
        )
    worst = 0.0
    for want, got in zip(expected, actual):
        if want.shape != got.shape:
            raise ValueError(
                f'An output of shape {got.shape} where '
                f'{want.shape} was expected.'
            )
        worst = max(worst, float(np.abs(want - got.astype(np.float32)).max()))
    return worst


def sample_images(
    batch_size: int,
    size: tuple[int, int],
    in_channels: int,
    mean: Sequence[float],
    std: Sequence[float],
) -> torch.Tensor:
    """Real photographs ``(batch_size, in_channels, H, W)`` resized to
    ``size`` and normalised: scikit-learn's two (``china.jpg``,
    ``flower.jpg``) in turn, or its digits for one-channel models."""
    if in_channels == 3:
        from sklearn.datasets import load_sample_images

        pictures = [
            torch.from_numpy(np.array(image)).permute(2, 0, 1)
            for image in load_sample_images().images
        ]
    elif in_channels == 1:
        from sklearn.datasets import load_digits

        pictures = [
            torch.from_numpy(image * (255 / 16))[None]
            for image in load_digits().images[:batch_size]
        ]
    else:
        raise ValueError(
            'Sample images are RGB or grey; the model takes '
            f'{in_channels} channels.'
        )
    resized = torch.nn.functional.interpolate(
        torch.stack(pictures).float(),
        size=tuple(size),
        mode='bilinear',
        align_corners=False,
    )
    batch = resized[torch.arange(batch_size) % len(resized)]
    mean_t = torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1)
    std_t = torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1)
    return (batch - mean_t) / std_t


def compare(
    module: nn.Module, session: RuntimeSession, inputs: dict[str, torch.Tensor]
) -> dict[str, float]:
    """Max absolute difference between PyTorch and a runtime per input."""
    diffs = {}
    for name, images in inputs.items():
        with torch.no_grad():
            outputs = module(images)
        if isinstance(outputs, torch.Tensor):
            outputs = (outputs,)
        expected = [output.float().numpy() for output in outputs]
        diffs[name] = max_abs_diff(expected, session(images))
    return diffs
