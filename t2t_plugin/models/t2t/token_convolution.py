from mmpretrain.registry import MODELS
from torch import nn


@MODELS.register_module()
class TokenConvolution(nn.Conv2d):
    """The convolution ablation of the T2T layers (Table 7 of the paper):
    a soft split and its T2T layer together as one convolution of the
    split's geometry, ``(in_channels, out_channels, kernel_size, stride,
    padding)``, reading the map ``(B, C, H, W)``."""

    # replaces the soft split (see T2TModule)
    reads_map = True
