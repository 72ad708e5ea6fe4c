"""Image grids for reports: a gate's lowest-scoring images, the evidence beside a failing gate, masks outlined.

``t2i_report.png("lowest_scoring", image_grid(images, captions))`` attaches a grid to Allure and
the HTML report; ``masks`` outlines each image's object.
"""

from __future__ import annotations

import io
from typing import Sequence

import numpy as np
from PIL import Image, ImageDraw

OUTLINE = (255, 40, 200)


def mask_outline(mask: np.ndarray) -> np.ndarray:
    """Pixels of a boolean mask that touch a pixel outside it (4-neighbourhood; the border counts as outside)."""
    m = np.asarray(mask, dtype=bool)
    if m.ndim != 2:
        raise ValueError(f"mask must be 2-D (height, width), got shape {m.shape}")
    p = np.pad(m, 1, constant_values=False)
    inner = p[:-2, 1:-1] & p[2:, 1:-1] & p[1:-1, :-2] & p[1:-1, 2:]
    return m & ~inner


def caption_font(size: int = 11):
    """A scalable font for captions: Pillow's bundled FreeType font (Aileron) at ``size`` px, or Pillow's
    bitmap font where FreeType is missing."""
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=size)
    except (TypeError, OSError, ImportError):  # Pillow < 10.1 or built without FreeType
        return ImageFont.load_default()


def wrap_text(text: str, width: float, measure, max_lines: int = 3) -> list[str]:
    """``text`` in lines no wider than ``width`` (as ``measure(str)`` says), broken between words (or
    inside a word wider than a line); an ellipsis ends text past ``max_lines``.

    Example:
        >>> wrap_text("bag in Southeast Asia, seed 12345", 12, len)
        ['bag in', 'Southeast', 'Asia, seed…']
    """
    lines: list[str] = []
    for paragraph in str(text).split("\n"):
        line = ""
        for word in paragraph.split():
            trial = f"{line} {word}".strip()
            if measure(trial) <= width:
                line = trial
                continue
            if line:
                lines.append(line)
            while measure(word) > width and len(word) > 1:  # a word longer than a line: cut it
                cut = 1
                while cut < len(word) and measure(word[: cut + 1]) <= width:
                    cut += 1
                lines.append(word[:cut])
                word = word[cut:]
            line = word
        lines.append(line)
    lines = [ln for ln in lines if ln] or [""]
    if len(lines) > max_lines:
        last = lines[max_lines - 1]
        while last and measure(last + "…") > width:
            last = last[:-1]
        lines = lines[: max_lines - 1] + [last + "…"]
    return lines


def image_grid(images: Sequence[Image.Image], captions: Sequence[str] = (), masks: Sequence[np.ndarray | None] | None = None,
               columns: int = 8, thumb: int = 96, caption_lines: int = 3, upscale: bool = False, title: str = "",
               font_size: int = 11, gap: int = 0) -> bytes:
    """The images as ``thumb``-pixel thumbnails in rows of ``columns``, each captioned below, as PNG bytes.

    Captions wrap between words (``\\n`` starts a line), at most ``caption_lines`` each; small images
    are enlarged only with ``upscale`` (nearest neighbour).

    Args:
        captions: one text per image (may be empty).
        masks: one boolean (height, width) array or None per image; outlined in magenta.

    Raises:
        ValueError: no images, or captions/masks of another length than images.

    Example:
        >>> png = image_grid([Image.new("RGB", (64, 64))] * 3, ["a", "b", "c"], columns=2, thumb=16, caption_lines=1)
        >>> Image.open(io.BytesIO(png)).size
        (32, 68)
    """
    if not images:
        raise ValueError("image_grid needs at least one image, got none")
    for name, seq in (("captions", captions), ("masks", masks or ())):
        if seq and len(seq) != len(images):
            raise ValueError(f"{name} must have one entry per image: {len(seq)} {name} for {len(images)} images")
    if not upscale:
        thumb = min(thumb, max(max(im.size) for im in images))  # never upscale: noise grows the file, not the detail
    columns = max(1, min(columns, len(images)))
    rows = -(-len(images) // columns)
    font = caption_font(font_size)
    line_h = font_size + 3
    label_h = (caption_lines * line_h + 4) if captions else 0
    title_h = (line_h + 6) if title else 0
    width = columns * thumb + (columns - 1) * gap
    out = Image.new("RGB", (width, title_h + rows * (thumb + label_h) + (rows - 1) * gap), "white")
    draw = ImageDraw.Draw(out)
    if title:
        draw.text((2, 3), wrap_text(title, width - 4, font.getlength, 1)[0], fill=(0, 0, 0), font=font)
    for i, im in enumerate(images):
        tile = im.convert("RGB").resize((thumb, thumb), Image.NEAREST if upscale and max(im.size) < thumb else Image.BICUBIC)
        if masks is not None and masks[i] is not None:
            mask = Image.fromarray(np.asarray(masks[i], dtype=bool).astype(np.uint8) * 255).resize((thumb, thumb), Image.NEAREST)
            edge = mask_outline(np.asarray(mask) > 127)
            pixels = np.array(tile)
            pixels[edge] = OUTLINE
            tile = Image.fromarray(pixels)
        x = (i % columns) * (thumb + gap)
        y = title_h + (i // columns) * (thumb + label_h + gap)
        out.paste(tile, (x, y))
        if captions:
            for j, line in enumerate(wrap_text(str(captions[i]), thumb - 4, font.getlength, caption_lines)):
                draw.text((x + 2, y + thumb + 2 + line_h * j), line, fill=(0, 0, 0), font=font)
    buf = io.BytesIO()
    out.save(buf, format="PNG", optimize=True)
    return buf.getvalue()
