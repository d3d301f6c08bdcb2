import torch
from torch import nn


class FFN(nn.Module):
    """Two-layer feed-forward network with GELU.

    The module tree (``layers.0.0`` and ``layers.1``) is the one of mmcv's
    ``FFN``, so mmpretrain-format T2T-ViT checkpoints load unchanged.

    Args:
        embed_dims (int): Input and output dimension.
        feedforward_channels (int): Hidden dimension.
        hidden_drop (float): Dropout after the activation. Defaults to 0.
        out_drop (float): Dropout after the second linear layer.
            Defaults to 0.
    """

    def __init__(
        self,
        embed_dims: int,
        feedforward_channels: int,
        hidden_drop: float = 0.0,
        out_drop: float = 0.0,
    ) -> None:
        super().__init__()
        self.layers = nn.Sequential(
            nn.Sequential(
                nn.Linear(embed_dims, feedforward_channels),
                nn.GELU(),
                nn.Dropout(hidden_drop),
            ),
            nn.Linear(feedforward_channels, embed_dims),
            nn.Dropout(out_drop),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)
