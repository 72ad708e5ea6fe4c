"""Image grids for reports: the lowest-scoring images of a gate, with masks outlined when given.

``t2i_report.png("lowest_scoring", image_grid(images, captions))`` attaches a grid to Allure and
the HTML report; Decomposed-DIG passes ``masks`` (one boolean array per image, True on the object)
and each mask's outline is drawn over its image.
"""

from __future__ import annotations

import io
from typing import Sequence

import numpy as np
from PIL import Image, ImageDraw

OUTLINE = (255, 40, 200)


def mask_outline(mask: np.ndarray) -> np.ndarray:
    """Pixels of a boolean mask that touch a pixel outside it (4-neighbourhood; the border counts as outside).

    Example:
        >>> m = np.zeros((5, 5), bool); m[1:4, 1:4] = True
        >>> int(mask_outline(m).sum()), bool(mask_outline(m)[2, 2])
        (8, False)
    """
    m = np.asarray(mask, dtype=bool)
    if m.ndim != 2:
        raise ValueError(f"mask must be 2-D (height, width), got shape {m.shape}")
    p = np.pad(m, 1, constant_values=False)
    inner = p[:-2, 1:-1] & p[2:, 1:-1] & p[1:-1, :-2] & p[1:-1, 2:]
    return m & ~inner


def image_grid(images: Sequence[Image.Image], captions: Sequence[str] = (), masks: Sequence[np.ndarray | None] | None = None,
               columns: int = 8, thumb: int = 96) -> bytes:
    """The images as thumbnails (at most ``thumb`` pixels, never enlarged) in rows of ``columns``,
    each with its caption below, as PNG bytes.

    Args:
        images: PIL images (any size; each is resized to ``thumb`` x ``thumb``).
        captions: one short text per image (e.g. ``"0.213 bag"``), cut to two lines; may be empty.
        masks: one boolean (height, width) array per image, or None per image; outlined in magenta.

    Raises:
        ValueError: no images, or captions/masks of another length than images.

    Example:
        >>> png = image_grid([Image.new("RGB", (64, 64))] * 3, ["a", "b", "c"], columns=2, thumb=16)
        >>> Image.open(io.BytesIO(png)).size
        (32, 84)
    """
    if not images:
        raise ValueError("image_grid needs at least one image, got none")
    for name, seq in (("captions", captions), ("masks", masks or ())):
        if seq and len(seq) != len(images):
            raise ValueError(f"{name} must have one entry per image: {len(seq)} {name} for {len(images)} images")
    thumb = min(thumb, max(max(im.size) for im in images))  # never upscale: noise grows the file, not the detail
    columns = max(1, min(columns, len(images)))
    rows = -(-len(images) // columns)
    per_line = max(4, thumb // 6)  # PIL's default font is about 6 px a character
    label_h = 26 if captions else 0
    out = Image.new("RGB", (columns * thumb, rows * (thumb + label_h)), "white")
    draw = ImageDraw.Draw(out)
    for i, im in enumerate(images):
        tile = im.convert("RGB").resize((thumb, thumb))
        if masks is not None and masks[i] is not None:
            mask = Image.fromarray(np.asarray(masks[i], dtype=bool).astype(np.uint8) * 255).resize((thumb, thumb), Image.NEAREST)
            edge = mask_outline(np.asarray(mask) > 127)
            pixels = np.array(tile)
            pixels[edge] = OUTLINE
            tile = Image.fromarray(pixels)
        x, y = (i % columns) * thumb, (i // columns) * (thumb + label_h)
        out.paste(tile, (x, y))
        if captions:
            text = str(captions[i])
            for j, line in enumerate((text[:per_line], text[per_line:2 * per_line])):
                draw.text((x + 2, y + thumb + 1 + 12 * j), line, fill=(0, 0, 0))
    buf = io.BytesIO()
    out.save(buf, format="PNG", optimize=True)
    return buf.getvalue()
