"""Pictures of feature maps and attention, as PNG files of exact sizes.

Panels are composed with numpy and labelled with PIL, so that the size of
a figure follows from its panels alone (``panel_grid_size``); matplotlib
only lends its colour maps.
"""

from collections.abc import Sequence
from pathlib import Path
from typing import Optional, Union

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image, ImageDraw, ImageFont

GAP = 4
LABEL_HEIGHT = 16
TITLE_HEIGHT = 22

Panel = tuple[str, np.ndarray]


def colorize(
    values: Union[np.ndarray, torch.Tensor], cmap: str = 'viridis'
) -> np.ndarray:
    """Map a 2-D array to RGB, its own minimum and maximum at the ends.

    Returns:
        np.ndarray: ``(h, w, 3)`` uint8.
    """
    from matplotlib import colormaps

    values = torch.as_tensor(values, dtype=torch.float32).cpu().numpy()
    low, high = values.min(), values.max()
    scaled = (
        (values - low) / (high - low) if high > low else np.zeros_like(values)
    )
    return (colormaps[cmap](scaled)[..., :3] * 255).astype(np.uint8)


def resize_map(
    values: torch.Tensor, size: tuple[int, int], mode: str = 'bilinear'
) -> torch.Tensor:
    """Resize a 2-D map ``(h, w)`` to ``size`` (``'nearest'`` keeps the
    token grid visible, ``'bilinear'`` smooths it)."""
    kwargs = {} if mode == 'nearest' else dict(align_corners=False)
    return F.interpolate(
        values[None, None].float(), size=tuple(size), mode=mode, **kwargs
    )[0, 0]


def overlay(
    image: np.ndarray,
    heat: torch.Tensor,
    alpha: float = 0.5,
    cmap: str = 'jet',
) -> np.ndarray:
    """Blend a heat map, smoothly resized to the image, over an RGB image.

    Args:
        image (np.ndarray): ``(H, W, 3)`` uint8 RGB.
        heat (torch.Tensor): ``(h, w)`` values, e.g. attention weights.
        alpha (float): Weight of the heat map. Defaults to 0.5.
        cmap (str): Matplotlib colour map. Defaults to ``'jet'``.
    """
    colours = colorize(resize_map(heat, image.shape[:2]), cmap)
    blended = (1 - alpha) * image.astype(np.float32) + alpha * colours
    return blended.round().astype(np.uint8)


def panel_grid_size(
    rows: int, cols: int, panel_size: tuple[int, int], title: bool
) -> tuple[int, int]:
    """``(width, height)`` in pixels of :func:`save_panel_grid`'s figure.

    Args:
        rows (int): Rows of panels.
        cols (int): Panels per row.
        panel_size (Tuple[int, int]): ``(height, width)`` of one panel.
        title (bool): Whether the figure has a title line.
    """
    height, width = panel_size
    return (
        cols * width + (cols + 1) * GAP,
        int(title) * TITLE_HEIGHT
        + rows * (height + LABEL_HEIGHT)
        + (rows + 1) * GAP,
    )


def save_panel_grid(
    rows: Sequence[Sequence[Panel]],
    path: Union[str, Path],
    title: Optional[str] = None,
) -> Path:
    """Write labelled RGB panels of one size, row by row, to a PNG.

    Args:
        rows (Sequence[Sequence[tuple]]): Rows of ``(label, image)``, each
            image ``(h, w, 3)`` uint8 of the same size; short rows are
            left-aligned.
        path (str | Path): The PNG to write (folders are created).
        title (str, optional): A line above the panels.

    Returns:
        Path: ``path``.
    """
    panel_size = rows[0][0][1].shape[:2]
    cols = max(len(row) for row in rows)
    width, height = panel_grid_size(len(rows), cols, panel_size, bool(title))
    canvas = Image.new('RGB', (width, height), 'white')
    draw = ImageDraw.Draw(canvas)
    font = ImageFont.load_default(size=11)
    top = GAP
    if title:
        draw.text((GAP, GAP), title, fill='black', font=font)
        top += TITLE_HEIGHT
    for row in rows:
        for col, (label, image) in enumerate(row):
            if image.shape[:2] != panel_size:
                raise ValueError(
                    f'Panel {label!r} is {image.shape[:2]}, the others '
                    f'{panel_size}; give panels of one size.'
                )
            left = GAP + col * (panel_size[1] + GAP)
            draw.text((left, top), label, fill='black', font=font)
            canvas.paste(Image.fromarray(image), (left, top + LABEL_HEIGHT))
        top += LABEL_HEIGHT + panel_size[0] + GAP
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    canvas.save(path)
    return path
