import torch
from torch import nn


class FFN(nn.Module):
    """Two-layer feed-forward network with GELU, dropout after the
    activation (``hidden_drop``) and at the end (``out_drop``); the keys
    (``layers.0.0``, ``layers.1``) are those of mmcv's ``FFN``."""

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
