"""The arithmetic ceiling of a machine: a plain matrix product's GFLOP/s."""

import time
from typing import Optional

import torch

from t2t_plugin.analysis.speed import synchronize


def matmul_gflops(
    device: torch.device,
    dtype: Optional[torch.dtype] = None,
    size: int = 1024,
    repeats: int = 5,
) -> float:
    """GFLOP/s of a square matrix product: the arithmetic ceiling.

    Args:
        device (torch.device): Where to multiply.
        dtype (torch.dtype, optional): Element type. Defaults to float32.
        size (int): Side of the matrices. Defaults to 1024.
        repeats (int): Products timed; the fastest counts. Defaults to 5.

    Returns:
        float: ``2 * size**3`` FLOPs over the fastest product's seconds, in
        units of 1e9.
    """
    dtype = dtype or torch.float32
    a = torch.randn(size, size, device=device).to(dtype)
    b = torch.randn(size, size, device=device).to(dtype)
    a @ b
    best: list[float] = []
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        a @ b
        synchronize(device)
        best.append(time.perf_counter() - start)
    return 2 * size**3 / min(best) / 1e9
