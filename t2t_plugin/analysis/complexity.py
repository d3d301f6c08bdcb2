"""Parameters and multiply-accumulates of a model, attention included:
mmengine's ``FlopAnalyzer`` has no formula for the fused attention kernel,
whose ``q @ k^T`` and ``attn @ v`` (1.3G of T2T-ViT-t-14's 6.1G MACs) the
handle below counts. Normalisation, resizing and pooling are left out, as
in the paper's MACs."""

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from math import prod
from typing import Any, Optional

import torch
from mmengine.analysis import FlopAnalyzer
from mmengine.analysis.jit_handles import (
    addmm_flop_jit,
    bmm_flop_jit,
    conv_flop_jit,
    einsum_flop_jit,
    get_shape,
    linear_flop_jit,
    matmul_flop_jit,
)
from torch import nn
from torch.nn import functional as F

from ..models.heads import T2TClsHead
from ..models.layers import SelfAttention
from ..models.t2t import PerformerAttention

# the paper's Table 2 and 4 ("MACs"), keyed by (arch, input side)
PAPER_MACS: dict[tuple[str, int], float] = {
    ('7', 224): 1.1e9,
    ('10', 224): 1.5e9,
    ('12', 224): 1.8e9,
    ('14', 224): 4.8e9,
    ('19', 224): 8.5e9,
    ('24', 224): 13.8e9,
    ('t-14', 224): 6.1e9,
    ('t-19', 224): 9.8e9,
    ('t-24', 224): 15.0e9,
    ('14', 384): 17.1e9,
}


@dataclass
class ModelComplexity:
    """What one forward pass of one ``(H, W)`` image costs: parameters
    (not buffers such as the fixed position table, as in the paper, nor
    training-only parts), MACs,
    and the part of them spent in attention outside any linear layer
    (``q @ k^T``, ``attn @ v``, the performer's kernel products)."""

    params: int
    macs: int
    attention_macs: int
    input_shape: tuple[int, int]
    # the counts of the submodules asked for by name, from the same trace
    parts: dict[str, 'ModelComplexity'] = field(default_factory=dict)


def attention_macs_jit(inputs: list[Any], outputs: list[Any]) -> int:
    """MACs of ``scaled_dot_product_attention``: ``q @ k^T`` and
    ``attn @ v``, i.e. ``batch * heads * L * S * (E + Ev)``."""
    query, key, value = (get_shape(v) for v in inputs[:3])
    return prod(query[:-1]) * key[-2] * (query[-1] + value[-1])


# What the attention kernel becomes while a model is counted: an operator of
# the same inputs that only makes an output of the right shape. The count
# is a formula of the shapes, and the real kernel was half the time of a
# detector's count (at 800x1344 the first T2T layer attends over 67,200
# tokens, 578G MACs; RetinaNet t-14 counted in 35 s on one thread with it,
# in 17 s without).
_LIBRARY = torch.library.Library('t2t_plugin', 'DEF')
_LIBRARY.define(
    'attention_shape(Tensor query, Tensor key, Tensor value) -> Tensor'
)
_LIBRARY.impl(
    'attention_shape',
    lambda query, key, value: query.new_zeros(
        *query.shape[:-1], value.shape[-1]
    ),
    'CompositeExplicitAutograd',
)


@contextmanager
def _attention_by_shape() -> Iterator[None]:
    kernel = F.scaled_dot_product_attention
    F.scaled_dot_product_attention = (
        lambda query, key, value, *args, **kwargs: (
            torch.ops.t2t_plugin.attention_shape(query, key, value)
        )
    )
    try:
        yield
    finally:
        F.scaled_dot_product_attention = kernel


def flop_analyzer(model: nn.Module, inputs: tuple) -> FlopAnalyzer:
    """mmengine's FlopAnalyzer with our attention handle, silent, counting
    only matrix products and convolutions, as the paper does."""
    analyzer = FlopAnalyzer(model, inputs).clear_op_handles()
    analyzer.set_op_handle(
        **{
            'aten::addmm': addmm_flop_jit,
            'aten::bmm': bmm_flop_jit,
            'aten::mm': matmul_flop_jit,
            'aten::matmul': matmul_flop_jit,
            'aten::linear': linear_flop_jit,
            'aten::einsum': einsum_flop_jit,
            'aten::_convolution': conv_flop_jit,
            'aten::scaled_dot_product_attention': attention_macs_jit,
            't2t_plugin::attention_shape': attention_macs_jit,
        }
    )
    analyzer.unsupported_ops_warnings(False)
    analyzer.uncalled_modules_warnings(False)
    analyzer.tracer_warnings('none')
    return analyzer


class _ModelInputs(nn.Module):
    """``model(images, **kwargs)`` as a module of the images alone (the
    tracer takes tensors only)."""

    def __init__(self, model: nn.Module, kwargs: dict[str, Any]) -> None:
        super().__init__()
        self.model = model
        self.kwargs = kwargs

    def forward(self, images: torch.Tensor) -> Any:
        return self.model(images, **self.kwargs)


@torch.no_grad()
def inference_parameters(model: nn.Module) -> int:
    """The parameters of ``model`` that serve inference: those of a
    head's training-only parts (``aux_*``, e.g. a localisation loss's MLP)
    left out."""
    return sum(
        param.numel()
        for name, param in model.named_parameters()
        if not any(
            part.startswith(T2TClsHead.AUX_PREFIX) for part in name.split('.')
        )
    )


def count_complexity(
    model: nn.Module,
    input_shape: tuple[int, int] = (224, 224),
    in_channels: int = 3,
    forward_kwargs: Optional[dict[str, Any]] = None,
    parts: Sequence[str] = (),
) -> ModelComplexity:
    """Count parameters (:func:`inference_parameters`) and MACs of
    ``model`` on one random image.

    ``model(images, **forward_kwargs)`` must run (mmpretrain classifiers
    and mmseg segmentors do, in ``'tensor'`` mode); ``forward_kwargs`` are
    e.g. the data samples a detector needs. ``parts`` names submodules
    (``'backbone'``) whose own counts the same trace gives, in ``parts``.
    """
    device = next(model.parameters()).device
    images = torch.randn(1, in_channels, *input_shape, device=device)
    was_training = model.training
    model.eval()
    traced, prefix = model, ''
    if forward_kwargs:
        traced, prefix = _ModelInputs(model, forward_kwargs), 'model.'
    try:
        with _attention_by_shape():
            analyzer = flop_analyzer(traced, (images,))
            by_module = analyzer.by_module()
    finally:
        model.train(was_training)
    attention = {}  # attention products outside linear layers, per module
    for name, module in model.named_modules():
        if isinstance(module, (SelfAttention, PerformerAttention)):
            linear = sum(
                by_module.get(f'{prefix}{name}.{child_name}', 0)
                for child_name, child in module.named_children()
                if isinstance(child, nn.Linear)
            )
            attention[name] = by_module.get(prefix + name, 0) - linear
    counts = {}
    for part in parts:
        counts[part] = ModelComplexity(
            inference_parameters(model.get_submodule(part)),
            by_module.get(prefix + part, 0),
            sum(v for k, v in attention.items() if k.startswith(part + '.')),
            tuple(input_shape),
        )
    return ModelComplexity(
        inference_parameters(model),
        analyzer.total(),
        sum(attention.values()),
        tuple(input_shape),
        counts,
    )
