import torch
from mmpretrain.registry import MODELS
from torch import nn

from t2t_plugin.models.t2t import TokenConvolution


@MODELS.register_module()
class ConvStemTokenLayer(TokenConvolution):
    """The convolutional stem of Xiao et al. 2021 ("Early convolutions help
    transformers see better") as a T2T token layer: the convolution of
    ``token_layer='convolution'`` followed by a BatchNorm and a ReLU,
    which makes small ViTs less sensitive to schedule and optimiser.

    ``model.backbone.arch.token_layer='ConvStemTokenLayer'``: the T2T
    module builds its two token layers with it and projects with a plain
    convolution, as for ``'convolution'``.
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.norm_act = nn.Sequential(
            nn.BatchNorm2d(self.out_channels), nn.ReLU()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm_act(super().forward(x))
