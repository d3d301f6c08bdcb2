from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn


class _SoftSplitFunction(torch.autograd.Function):
    """Patch gather of a channels-last map, with ``F.fold`` as backward:
    autograd through the strided view is several times slower."""

    @staticmethod
    def forward(
        ctx, x: torch.Tensor, kernel_size: int, stride: int, padding: int
    ) -> torch.Tensor:
        batch, height, width, channels = x.shape
        ctx.geometry = (height, width, kernel_size, stride, padding)
        if padding:
            x = F.pad(x, (0, 0, padding, padding, padding, padding))
        # unfold appends the window dims: (B, h, w, C, k_row, k_col)
        patches = x.unfold(1, kernel_size, stride).unfold(
            2, kernel_size, stride
        )
        tokens = patches.reshape(batch, -1, channels * kernel_size**2)
        # a 1x1 split without padding would hand out a view of the input
        return tokens.clone() if tokens._base is not None else tokens

    @staticmethod
    def backward(
        ctx, grad: torch.Tensor
    ) -> tuple[torch.Tensor, Optional[int], Optional[int], Optional[int]]:
        height, width, kernel_size, stride, padding = ctx.geometry
        grad_map = F.fold(
            grad.transpose(1, 2),
            (height, width),
            kernel_size,
            padding=padding,
            stride=stride,
        )
        return grad_map.permute(0, 2, 3, 1), None, None, None


class SoftSplit(nn.Module):
    """Soft split: the overlapping ``k x k`` patches of a map as tokens.

    The tokens of ``nn.Unfold(...)`` then ``transpose(1, 2)``, computed
    from a channels-last map ``(B, H, W, C)``, the layout of a T2T layer's
    tokens (so re-structuring them is a view), and written in one pass
    where ``nn.Unfold`` needs a second copy; the backward is ``F.fold``.
    """

    def __init__(self, kernel_size: int, stride: int, padding: int) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Split a ``(B, H, W, C)`` map into ``(B, h*w, C*k*k)`` tokens."""
        return _SoftSplitFunction.apply(
            x, self.kernel_size, self.stride, self.padding
        )

    def extra_repr(self) -> str:
        return (
            f'kernel_size={self.kernel_size}, stride={self.stride}, '
            f'padding={self.padding}'
        )
