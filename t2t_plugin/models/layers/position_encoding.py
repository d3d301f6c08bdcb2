import torch


def sinusoid_position_table(
    num_positions: int, embed_dims: int
) -> torch.Tensor:
    """The fixed sinusoidal table of "Attention Is All You Need", shape
    ``(1, num_positions, embed_dims)``: ``sin(p / 10000 ** (2 * (i // 2) /
    embed_dims))`` for even channels ``i``, the cosine for odd ones."""
    position = torch.arange(num_positions, dtype=torch.float64)[:, None]
    exponent = 2 * (torch.arange(embed_dims) // 2) / embed_dims
    angle = position / torch.pow(10000.0, exponent.double())[None, :]
    table = torch.empty_like(angle)
    table[:, 0::2] = torch.sin(angle[:, 0::2])
    table[:, 1::2] = torch.cos(angle[:, 1::2])
    return table.float().unsqueeze(0)
