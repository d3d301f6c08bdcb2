"""Pictures of feature maps and attention, as PNG files of exact sizes:
panels are composed with numpy and labelled with PIL, so that a figure's
size follows from its panels alone; matplotlib only lends its colour maps.
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
FONT_SIZE = 11
# pictures are drawn at least this wide and high: an 8 or 32 px input is
# scaled up by a whole factor, so that its pixels stay square and visible
MIN_PICTURE_SIDE = 224


def colorize(
    values: Union[np.ndarray, torch.Tensor], cmap: str = 'viridis'
) -> np.ndarray:
    """Map a 2-D array to ``(h, w, 3)`` uint8 RGB, its own minimum and
    maximum at the ends of the colour map."""
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


def upscale(image: np.ndarray, min_side: int = MIN_PICTURE_SIDE) -> np.ndarray:
    """An ``(h, w, C)`` image repeated by the smallest whole factor that
    makes both sides at least ``min_side`` (nearest neighbour: the pixels
    stay sharp); larger images unchanged."""
    factor = -(-min_side // min(image.shape[:2]))
    if factor <= 1:
        return image
    return image.repeat(factor, axis=0).repeat(factor, axis=1)


def text_width(text: str) -> int:
    """Width in pixels of ``text`` in the figures' font."""
    return int(np.ceil(_font().getlength(text)))


def _font() -> ImageFont.ImageFont:
    return ImageFont.load_default(size=FONT_SIZE)


def overlay(
    image: np.ndarray, heat: torch.Tensor, alpha: float = 0.5
) -> np.ndarray:
    """Blend a heat map ``(h, w)``, smoothly resized to the image, over an
    ``(H, W, 3)`` uint8 RGB image, with weight ``alpha``."""
    colours = colorize(resize_map(heat, image.shape[:2]), 'jet')
    blended = (1 - alpha) * image.astype(np.float32) + alpha * colours
    return blended.round().astype(np.uint8)


def save_panel_grid(
    rows: Sequence[Sequence[tuple[str, np.ndarray]]],
    path: Union[str, Path],
    title: Optional[str] = None,
) -> Path:
    """Write rows of ``(label, image)`` panels (``(h, w, 3)`` uint8, all
    of one size; short rows left-aligned) under an optional title line to
    the PNG ``path`` (folders created; returned). Columns are widened to
    their labels and the figure to its title."""
    height, width = panel_size = rows[0][0][1].shape[:2]
    cols = max(len(row) for row in rows)
    # columns as wide as their widest label and the figure as wide as its
    # title, so that no text is cut
    column = max(
        width, *(text_width(label) for row in rows for label, _ in row)
    )
    canvas = Image.new(
        'RGB',
        (
            max(
                cols * column + (cols + 1) * GAP,
                text_width(title or '') + 2 * GAP,
            ),
            int(bool(title)) * TITLE_HEIGHT
            + len(rows) * (height + LABEL_HEIGHT)
            + (len(rows) + 1) * GAP,
        ),
        'white',
    )
    draw = ImageDraw.Draw(canvas)
    font = _font()
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
            left = GAP + col * (column + GAP)
            draw.text((left, top), label, fill='black', font=font)
            canvas.paste(Image.fromarray(image), (left, top + LABEL_HEIGHT))
        top += LABEL_HEIGHT + height + GAP
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    canvas.save(path)
    return path
