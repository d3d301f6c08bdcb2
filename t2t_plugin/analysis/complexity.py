"""Parameters and multiply-accumulates of a model, attention included.

Hook-based counters (mmengine's ``get_model_complexity_info``, fvcore) see
modules, so they miss the matrix products inside attention: ``q @ k^T`` and
``attn @ v``, and the performer's random-feature kernels. For T2T-ViT-t-14
this is 1.3G of its 6.1G MACs (the first T2T layer attends over 3136
tokens). Here the forward pass runs under :class:`FlopCounterMode`, which
sees every operator, with one formula added: torch's CPU flash-attention
kernel is not in its table and would otherwise count as zero.
"""

from dataclasses import dataclass
from typing import Any, Optional

import torch
from torch import nn
from torch.utils.flop_counter import sdpa_flop_count

from ..compat import cpu_attention_flop_formulas, flop_counter
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

ATTENTION_MODULES = (SelfAttention, PerformerAttention)


@dataclass
class ModelComplexity:
    """What one forward pass of one image costs.

    Attributes:
        params (int): Trainable and frozen parameters; buffers (the fixed
            position table and performer matrix) are not parameters, as in
            the paper's counts.
        macs (int): Multiply-accumulates of the whole forward pass.
        attention_macs (int): The part of ``macs`` spent in attention
            products (``q @ k^T``, ``attn @ v``, the performer's feature
            maps and kernel products), i.e. outside any linear layer.
        input_shape (Tuple[int, int]): The ``(H, W)`` counted.
    """

    params: int
    macs: int
    attention_macs: int
    input_shape: tuple[int, int]


def _sdpa_cpu_flops(
    query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs
) -> int:
    return sdpa_flop_count(query_shape, key_shape, value_shape)


def _flops_of(counts: dict[str, dict], name: str) -> int:
    return sum(counts.get(name, {}).values())


@torch.no_grad()
def count_complexity(
    model: nn.Module,
    input_shape: tuple[int, int] = (224, 224),
    in_channels: int = 3,
    forward_kwargs: Optional[dict[str, Any]] = None,
) -> ModelComplexity:
    """Count parameters and MACs of ``model`` on one random image.

    Args:
        model (nn.Module): A backbone or a whole model;
            ``model(images, **forward_kwargs)`` must run (mmpretrain
            classifiers and mmseg segmentors do, in their ``'tensor'``
            mode).
        input_shape (Tuple[int, int]): Image ``(H, W)``. Defaults to
            ``(224, 224)``.
        in_channels (int): Image channels. Defaults to 3.
        forward_kwargs (dict, optional): More arguments of the forward
            pass, e.g. the data samples a detector needs. Defaults to None.

    Returns:
        ModelComplexity: The counts.
    """
    params = sum(param.numel() for param in model.parameters())
    device = next(model.parameters()).device
    images = torch.randn(1, in_channels, *input_shape, device=device)
    custom = cpu_attention_flop_formulas(_sdpa_cpu_flops)
    was_training = model.training
    model.eval()
    with flop_counter(model, custom) as counter:
        model(images, **(forward_kwargs or {}))
    model.train(was_training)
    counts = counter.get_flop_counts()
    root = type(model).__name__
    attention_flops = 0
    for name, module in model.named_modules():
        if not isinstance(module, ATTENTION_MODULES):
            continue
        full_name = f'{root}.{name}'
        linear_flops = sum(
            _flops_of(counts, f'{full_name}.{child_name}')
            for child_name, child in module.named_children()
            if isinstance(child, nn.Linear)
        )
        attention_flops += _flops_of(counts, full_name) - linear_flops
    # FlopCounterMode counts a multiply-accumulate as two FLOPs
    return ModelComplexity(
        params=params,
        macs=counter.get_total_flops() // 2,
        attention_macs=attention_flops // 2,
        input_shape=tuple(input_shape),
    )
