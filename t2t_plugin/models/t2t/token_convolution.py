from mmpretrain.registry import MODELS
from torch import nn

from ..option_checks import check_int


@MODELS.register_module()
class TokenConvolution(nn.Conv2d):
    """The convolution ablation of the T2T layers (Table 7 of the paper):
    a soft split and its T2T layer together as one convolution of the
    split's geometry, reading the map ``(B, C, H, W)``.

    Args:
        in_channels (int): Width of the map it reads.
        out_channels (int): Width of the map it gives (``token_dims``).
        kernel_size (int): The soft split's kernel.
        stride (int): Its stride.
        padding (int): Its padding.
    """

    # replaces the soft split (see T2TModule)
    reads_map = True

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int,
        padding: int,
    ) -> None:
        owner = type(self).__name__
        check_int(owner, 'in_channels', in_channels)
        check_int(owner, 'out_channels', out_channels)
        check_int(owner, 'kernel_size', kernel_size)
        check_int(owner, 'stride', stride)
        check_int(owner, 'padding', padding, minimum=0)
        super().__init__(
            in_channels, out_channels, kernel_size, stride, padding
        )
