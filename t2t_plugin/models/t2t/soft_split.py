from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from ...compat import is_view


class _SoftSplitFunction(torch.autograd.Function):
    """Patch gather of a channels-last map, with a scatter-add of the
    patches' gradients as backward: autograd through the strided view is
    several times slower, and so is ``F.fold`` (col2im, which needs the
    gradients transposed to channels-first first)."""

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
        return tokens.clone() if is_view(tokens) else tokens

    @staticmethod
    def backward(
        ctx, grad: torch.Tensor
    ) -> tuple[torch.Tensor, Optional[int], Optional[int], Optional[int]]:
        height, width, kernel_size, stride, padding = ctx.geometry
        rows = (height + 2 * padding - kernel_size) // stride + 1
        cols = (width + 2 * padding - kernel_size) // stride + 1
        batch, channels = grad.shape[0], grad.shape[-1] // kernel_size**2
        windows = grad.reshape(
            batch, rows, cols, channels, kernel_size, kernel_size
        )
        grad_map = grad.new_zeros(
            batch, height + 2 * padding, width + 2 * padding, channels
        )
        # one strided add per kernel offset, each on whole channel rows
        for row in range(kernel_size):
            for col in range(kernel_size):
                grad_map[
                    :,
                    row : row + stride * (rows - 1) + 1 : stride,
                    col : col + stride * (cols - 1) + 1 : stride,
                ] += windows[..., row, col]
        grad_map = grad_map[
            :, padding : padding + height, padding : padding + width
        ]
        return grad_map, None, None, None


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
