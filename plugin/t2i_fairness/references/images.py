"""The pixels of a reference image: a real file decoded lazily (naming the file it cannot read), or a
synthetic image rendered from its URI.
"""

from __future__ import annotations

import colorsys
import re

import numpy as np
from PIL import Image, ImageDraw

from t2i_fairness.references.labels import Record, _stable_int


# Bumped whenever render_synthetic draws differently, so fingerprints and cached features change.
SYNTHETIC_VERSION = 1

_SYNTHETIC_SCHEME = f"synthetic:v{SYNTHETIC_VERSION}"


def open_image(record: Record) -> Image.Image:
    """Decode a reference image as RGB; synthetic URIs are rendered."""
    if record.path.startswith("synthetic:"):
        return _render_uri(record.path)
    where = f"reference image {record.path} ({record.object}, {record.region})"
    try:
        with Image.open(record.path) as im:
            im.load()
            return im.convert("RGB")
    except FileNotFoundError as exc:
        raise ValueError(f"{where} is missing") from exc
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        raise ValueError(f"cannot read {where}: {exc}") from exc


# Hues per region slug (fractions of the colour wheel), far apart so regional means differ.
_REGION_HUES = {
    "africa": 0.06, "americas": 0.33, "east_asia": 0.58, "europe": 0.75,
    "southeast_asia": 0.16, "west_asia": 0.92, "asia": 0.47,
}

_PATTERNS = ("discs", "boxes", "stripes", "triangles", "checks")


def render_synthetic(object: str, region: str, index: int, seed: int = 0, size: int = 64) -> Image.Image:
    """Draw one synthetic reference image: region sets the background palette, object the foreground pattern."""
    if not isinstance(size, int) or size < 8:
        raise ValueError(f"size must be an integer >= 8 pixels, got {size!r}")
    rng = np.random.default_rng(_stable_int("synthetic", SYNTHETIC_VERSION, seed, region, object, index))
    hue = _REGION_HUES.get(region, _stable_int("hue", region) % 1000 / 1000)
    value = 0.45 + 0.4 * (_stable_int("value", region) % 100) / 100
    top = np.array(colorsys.hsv_to_rgb(hue, 0.55, value))
    bottom = np.array(colorsys.hsv_to_rgb((hue + 0.06) % 1, 0.75, value * 0.7))
    ramp = np.linspace(0, 1, size)[:, None, None]
    background = (top * (1 - ramp) + bottom * ramp) * 255
    background = np.broadcast_to(background, (size, size, 3)) + rng.normal(0, 6, (size, size, 3))
    image = Image.fromarray(np.clip(background, 0, 255).astype(np.uint8), "RGB")

    code = _stable_int("object", object)
    pattern = _PATTERNS[code % len(_PATTERNS)]
    obj_hue = (hue + 0.5 + (code % 97) / 97 * 0.3) % 1
    colour = tuple(int(c * 255) for c in colorsys.hsv_to_rgb(obj_hue, 0.85, 0.95))
    draw = ImageDraw.Draw(image)
    count = 2 + code % 4 + int(rng.integers(0, 2))
    for _ in range(count):
        w, h = (int(v) for v in rng.integers(size // 8, size // 3, 2))
        x, y = (int(v) for v in rng.integers(0, size - size // 8, 2))
        if pattern == "discs":
            draw.ellipse([x, y, x + w, y + w], fill=colour)
        elif pattern == "boxes":
            draw.rectangle([x, y, x + w, y + h], fill=colour, outline=(20, 20, 20))
        elif pattern == "stripes":
            draw.line([0, y, size, y + h // 2], fill=colour, width=max(1, size // 16))
        elif pattern == "triangles":
            draw.polygon([(x, y + h), (x + w // 2, y), (x + w, y + h)], fill=colour)
        else:
            step = max(2, size // 16)
            for cx in range(x, min(size, x + w), 2 * step):
                for cy in range(y, min(size, y + h), 2 * step):
                    draw.rectangle([cx, cy, cx + step - 1, cy + step - 1], fill=colour)
    return image


def _render_uri(uri: str) -> Image.Image:
    m = re.fullmatch(r"synthetic:v(\d+)/seed(-?\d+)-(\d+)px/([^/]+)/([^/]+)/(\d+)\.png", uri)
    if not m:
        raise ValueError(f"malformed synthetic image URI {uri!r}")
    version, seed, size, region, obj, index = m.groups()
    if int(version) != SYNTHETIC_VERSION:
        raise ValueError(
            f"synthetic image {uri!r} was made by renderer v{version}; this is v{SYNTHETIC_VERSION}, "
            f"rebuild the reference set"
        )
    return render_synthetic(obj, region, int(index), int(seed), int(size))
