import torch
import torch.nn.functional as F


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


def resize_pos_embed(
    pos_embed: torch.Tensor,
    src_shape: tuple[int, int],
    dst_shape: tuple[int, int],
    mode: str = 'bicubic',
    num_extra_tokens: int = 1,
) -> torch.Tensor:
    """Resize a ``(1, extra + H*W, C)`` position table to another grid,
    interpolating the grid part as an image (as the official 384px weights
    were made)."""
    if tuple(src_shape) == tuple(dst_shape):
        return pos_embed
    extra = pos_embed[:, :num_extra_tokens]
    grid = pos_embed[:, num_extra_tokens:].reshape(1, *src_shape, -1)
    grid = grid.permute(0, 3, 1, 2)
    # bicubic interpolation is only implemented for float32
    grid = F.interpolate(
        grid.float(), size=tuple(dst_shape), mode=mode, align_corners=False
    )
    grid = grid.flatten(2).transpose(1, 2).to(pos_embed.dtype)
    return torch.cat((extra, grid), dim=1)
