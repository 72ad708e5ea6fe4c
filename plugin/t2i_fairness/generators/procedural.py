"""A procedural generator of the synthetic reference's own world: ``--t2i-model procedural``.

A seeded simulator, not a model, for measuring false-alarm rates, coverage and power of the gates;
each image is a pure function of (prompt, seed, size, world, multilingual set).
docs/calibration.md describes the simulated world.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from PIL import Image

from t2i_fairness.base.truth import attach_truth
from t2i_fairness.vocab.geode import GEODE_OBJECTS, GEODE_REGIONS, Region
from t2i_fairness.references.sets import DOLLARSTREET_OBJECTS, SYNTHETIC_VERSION, render_synthetic

__all__ = [
    "DEFAULT_WORLD",
    "PROCEDURAL_VERSION",
    "REGIONS",
    "REGION_STYLES",
    "UNKNOWN_REGION_STYLE",
    "ProceduralGenerator",
    "PromptReading",
    "RegionStyle",
    "cis_keep_probability",
    "find_region",
    "read_prompt",
    "smoke_procedural",
]

#: Bumped whenever the generator draws differently; part of the fingerprint (and so of cache keys).
PROCEDURAL_VERSION = 1
#: Bumped whenever what an image's attached truth records changes (the pixels do not); in the fingerprint.
TRUTH_VERSION = 1


@dataclass(frozen=True)
class RegionStyle:
    """How well the simulated model knows a region.

    Attributes:
        fidelity: probability that an image is drawn in the region's own palette.
        pool: distinct layouts per (object, region): its diversity.
        jitter: standard deviation of the hue shift (fraction of the hue circle).
        miss: probability of drawing the wrong object.
    """

    fidelity: float
    pool: int
    jitter: float
    miss: float


#: Per-region styles: the model knows Europe and the Americas best and Africa least, the order
#: DIG In reports for real models (not its numbers).
REGION_STYLES: dict[str, RegionStyle] = {
    "europe": RegionStyle(0.93, 40, 0.02, 0.05),
    "americas": RegionStyle(0.9, 32, 0.025, 0.06),
    "east_asia": RegionStyle(0.85, 24, 0.03, 0.08),
    "asia": RegionStyle(0.8, 18, 0.03, 0.1),
    "southeast_asia": RegionStyle(0.75, 14, 0.035, 0.1),
    "west_asia": RegionStyle(0.72, 12, 0.04, 0.12),
    "africa": RegionStyle(0.65, 10, 0.04, 0.14),
}
#: The style of a place the tables do not know.
UNKNOWN_REGION_STYLE = RegionStyle(0.8, 16, 0.03, 0.1)
#: Where the simulated model's images land without a region (``{object}`` prompts) or when it
#: falls back on its default imagery: region -> weight.
#: Every region has some weight, so ``{object}`` images are never absent from a region's manifold.
DEFAULT_WORLD: dict[str, float] = {
    "europe": 0.35, "americas": 0.3, "east_asia": 0.15, "west_asia": 0.08, "southeast_asia": 0.07, "africa": 0.05,
}

_WORLD_REGIONS = tuple(DEFAULT_WORLD)
_WORLD_WEIGHTS = np.array([DEFAULT_WORLD[r] for r in _WORLD_REGIONS]) / sum(DEFAULT_WORLD.values())
_CIS_DROP = 0.085  # inclusion probability lost per added component (the CIS paper: 8.53% per component)
_TEXT_POOL = 16
_PHOTO_PREFIX = "a photo of "


def _stable_int(*parts: object) -> int:
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big")


def _compact(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


#: The regions prompts may name: GeoDE's six and DollarStreet's Asia (as ``dig.EXTRA_REGIONS``
#: spells it; not imported from there so that this module depends on no paper's code).
REGIONS: tuple[Region, ...] = tuple(GEODE_REGIONS) + (Region("asia", "Asia", "Asian", ()),)


def _regions() -> tuple[Region, ...]:
    return REGIONS


def _place_table() -> dict[str, tuple[str, str | None]]:
    """Compacted place word -> (region slug, country or None); names with and without "the"."""
    out: dict[str, tuple[str, str | None]] = {}
    for reg in _regions():
        for name in (reg.slug, reg.name, reg.name.removeprefix("the ")):
            out[_compact(name)] = (reg.slug, None)
        for country in reg.countries:
            out[_compact(country)] = (reg.slug, country)
            out[_compact(country.removeprefix("the "))] = (reg.slug, country)
    return out


_PLACES = _place_table()
_ADJECTIVES: dict[str, str] = {reg.adjective.lower(): reg.slug for reg in _regions()}
# Object words as prompts spell them -> object code: GeoDE's names, DollarStreet topics with spaces.
_OBJECTS: dict[str, str] = {
    **{code.replace("_", " "): code for code in DOLLARSTREET_OBJECTS},
    **{name: code for code, name in GEODE_OBJECTS.items()},
}
_OBJECT_CODES: tuple[str, ...] = tuple(GEODE_OBJECTS) + tuple(o for o in DOLLARSTREET_OBJECTS if o not in GEODE_OBJECTS)


def find_region(name: str) -> str | None:
    """The region slug a place word names (slug, name, adjective or country), else ``None``.

    Example:
        >>> [find_region(n) for n in ("Africa", "African", "Nigeria", "east_asia", "the United Kingdom", "Mars")]
        ['africa', 'africa', 'africa', 'east_asia', 'europe', None]
    """
    if not isinstance(name, str):
        return None
    hit = _PLACES.get(_compact(name))
    if hit is not None:
        return hit[0]
    return _ADJECTIVES.get(name.strip().lower())


@dataclass(frozen=True)
class PromptReading:
    """What the procedural generator (and the canaries) read in a prompt: ``family`` ``dig_in``, ``cis`` or ``text``."""

    family: str
    template: str | None = None
    object: str | None = None
    region: str | None = None
    country: str | None = None
    components: tuple[str, ...] = ()


def _cis_components(text: str) -> tuple[str, ...] | None:
    """Components of ``a photo of a X, a Y, and an Z.`` (the inverse of metrics.cis.render_prompt)."""
    low = text.strip()
    if not low.lower().startswith(_PHOTO_PREFIX):
        return None
    body = low[len(_PHOTO_PREFIX):].rstrip().removesuffix(".").strip()
    # A separator is followed by an article, so "mortar and pestle" stays one component.
    parts = [p.strip() for p in re.split(r"(?:,\s+and\s+|,\s+|\s+and\s+)(?=an?\s)", body) if p.strip()]
    out = []
    for part in parts:
        m = re.fullmatch(r"(?:an?|the)\s+(.+)", part, flags=re.IGNORECASE)
        out.append((m.group(1) if m else part).strip())
    return tuple(out) if out else None


def read_prompt(text: str) -> PromptReading:
    """Parse a prompt into the labels the procedural world draws from.

    Example:
        >>> read_prompt("a photo of a mortar and pestle and an Otterhound.").components
        ('mortar and pestle', 'Otterhound')
    """
    if not isinstance(text, str):
        raise TypeError(f"prompt must be a string, got {type(text).__name__} {text!r}")
    stripped = text.strip()
    low = stripped.lower()
    if low in _OBJECTS:
        return PromptReading("dig_in", "object", _OBJECTS[low])
    head, sep, place = stripped.rpartition(" in ")
    if sep and head.strip().lower() in _OBJECTS:
        obj = _OBJECTS[head.strip().lower()]
        hit = _PLACES.get(_compact(place))
        if hit is None:
            return PromptReading("dig_in", "object_in_place", obj, _compact(place) or "nowhere")
        region, country = hit
        if country is None:
            return PromptReading("dig_in", "object_in_region", obj, region)
        return PromptReading("dig_in", "object_in_country", obj, region, country)
    for adjective in sorted(_ADJECTIVES, key=len, reverse=True):
        if low.startswith(adjective + " ") and low[len(adjective) + 1:].strip() in _OBJECTS:
            return PromptReading("dig_in", "regional_adjective", _OBJECTS[low[len(adjective) + 1:].strip()],
                                 _ADJECTIVES[adjective])
    components = _cis_components(stripped)
    if components is not None:
        return PromptReading("cis", components=components)
    return PromptReading("text")


def _recolour(image: Image.Image, hue_shift: float, gain: float = 1.0) -> Image.Image:
    """Rotate the hue by ``hue_shift`` of the circle and scale the brightness by ``gain``."""
    hsv = np.asarray(image.convert("HSV"), dtype=np.float64)
    hsv[..., 0] = np.mod(hsv[..., 0] + hue_shift * 256.0, 256.0)
    hsv[..., 2] = np.clip(hsv[..., 2] * gain, 0, 255)
    return Image.fromarray(np.round(hsv).astype(np.uint8), "HSV").convert("RGB")


def cis_keep_probability(component: str, k: int) -> float:
    """Probability that a CIS image shows ``component`` among ``k`` requested components:
    ``max(0.05, 1 - 0.085 (k - 1) - penalty)``, the penalty hashed per class into ``[0, 0.15)``.
    """
    penalty = (_stable_int("cis-penalty", component) % 1000) / 1000 * 0.15
    return max(0.05, 1.0 - _CIS_DROP * (k - 1) - penalty)


def _grade(image: Image.Image, rng: np.random.Generator, jitter: float) -> Image.Image:
    """Colour grade and crop: hue shift, brightness scale, a crop of 85-100% resized back."""
    out = _recolour(image, rng.normal(0.0, jitter), math.exp(rng.normal(0.0, 2.0 * jitter)))
    w, h = out.size
    scale = rng.uniform(0.85, 1.0)
    cw, ch = max(1, round(w * scale)), max(1, round(h * scale))
    x, y = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
    return out.crop((x, y, x + cw, y + ch)).resize((w, h), Image.BILINEAR)


class ProceduralGenerator:
    """A seeded simulator of a text-to-image model over the synthetic reference's world.

    Args:
        world: seed of the simulated model's layouts (the synthetic reference uses 0).
        multilingual: a prompt set whose non-English texts are "understood" with a per-language probability.

    Example:
        >>> a, b = ProceduralGenerator().generate(["bag in Africa", "bag in Africa"], [0, 1])
        >>> a.size, a.tobytes() == b.tobytes()
        ((64, 64), False)
    """

    def __init__(self, size: int | tuple[int, int] = 64, world: int = 1, multilingual=None, batch_size: int = 16):
        height, width = (size, size) if isinstance(size, (int, np.integer)) else tuple(size)
        for name, v in (("height", height), ("width", width)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 8:
                raise ValueError(f"procedural generator: {name} must be an integer >= 8 pixels, got {v!r}")
        if isinstance(world, bool) or not isinstance(world, (int, np.integer)):
            raise ValueError(f"procedural generator: world must be an integer seed, got {world!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"procedural generator: batch_size must be a positive integer, got {batch_size!r}")
        self.height, self.width, self.world = int(height), int(width), int(world)
        self.batch_size = int(batch_size)
        self._side = max(self.height, self.width)
        self._translations: dict[str, tuple[str, str]] = {}
        if multilingual is not None:
            for p in multilingual:
                if p.text != p.english:
                    self._translations.setdefault(p.text, (p.english, p.lang))
        fp = f"procedural:v{PROCEDURAL_VERSION}:truth{TRUTH_VERSION}:world{self.world}:{self.height}x{self.width}:synthetic-v{SYNTHETIC_VERSION}"
        if self._translations:
            h = hashlib.sha256()
            for text, (english, lang) in sorted(self._translations.items()):
                h.update(f"{text}\x1f{english}\x1f{lang}\n".encode("utf-8"))
            fp += f":ml{h.hexdigest()[:12]}"
        self.fingerprint = fp

    # -------------------------------------------------------------------------- protocol

    def generate(self, prompts: Sequence[str], seeds: Sequence[int]) -> list[Image.Image]:
        """One RGB image per (prompt, seed), each a pure function of the pair and the settings."""
        prompts, seeds = list(prompts), list(seeds)
        if len(prompts) != len(seeds):
            raise ValueError(f"procedural generator: got {len(prompts)} prompts but {len(seeds)} seeds")
        for s in seeds:
            if isinstance(s, bool) or not isinstance(s, (int, np.integer)):
                raise ValueError(f"procedural generator: seeds must be integers, got {s!r}")
        return [self.image(p, int(s)) for p, s in zip(prompts, seeds)]

    def image(self, prompt: str, seed: int) -> Image.Image:
        """The image of one (prompt, seed), carrying what it shows (:func:`t2i_fairness.base.truth.truth_of`:
        ``concepts`` are the CIS components drawn, or the object and region drawn)."""
        rng = np.random.default_rng(_stable_int("procedural", PROCEDURAL_VERSION, self.world, prompt, seed))
        reading = read_prompt(prompt)
        if reading.family == "dig_in":
            im, concepts = self._dig_in(reading, rng)
        elif reading.family == "cis":
            concepts = list(self.cis_plan(prompt, seed))
            im = self._cis(concepts, rng)
        else:
            im, concepts = self._text(prompt, rng)
        if im.size != (self.width, self.height):
            im = im.resize((self.width, self.height), Image.BILINEAR)
        return attach_truth(im, {"concepts": concepts, "prompt": prompt, "seed": int(seed), "family": reading.family})

    # -------------------------------------------------------------------------- families

    def _dig_in(self, r: PromptReading, rng: np.random.Generator) -> tuple[Image.Image, list[str]]:
        region = r.region
        if region is None:  # {object}: the model's default world
            region = _WORLD_REGIONS[int(rng.choice(len(_WORLD_REGIONS), p=_WORLD_WEIGHTS))]
        style = REGION_STYLES.get(region, UNKNOWN_REGION_STYLE)
        pool = style.pool * 3 // 2 if r.template == "regional_adjective" else style.pool
        drawn_region = region
        if rng.random() >= style.fidelity:
            drawn_region = _WORLD_REGIONS[int(rng.choice(len(_WORLD_REGIONS), p=_WORLD_WEIGHTS))]
        obj = r.object
        if rng.random() < style.miss:
            others = [o for o in (GEODE_OBJECTS if obj in GEODE_OBJECTS else _OBJECT_CODES) if o != obj]
            obj = others[int(rng.integers(len(others)))]
        layout = int(rng.integers(pool))
        im = render_synthetic(obj, drawn_region, layout, self.world, self._side)
        if r.country is not None and drawn_region == region:  # countries differ a little within a region
            im = _recolour(im, ((_stable_int("country", r.country) % 1000) / 1000 - 0.5) * 0.04)
        return _grade(im, rng, style.jitter), [obj, drawn_region]

    def cis_plan(self, prompt: str, seed: int) -> tuple[str, ...]:
        """The components a CIS prompt's image shows at this seed, in drawing order (empty for other prompts)."""
        reading = read_prompt(prompt)
        if reading.family != "cis":
            return ()
        rng = np.random.default_rng(_stable_int("cis-plan", PROCEDURAL_VERSION, self.world, prompt, seed))
        k = len(reading.components)
        kept = [c for c in reading.components if rng.random() < cis_keep_probability(c, k)]
        return tuple(kept[i] for i in rng.permutation(len(kept)))

    def _cis(self, kept: Sequence[str], rng: np.random.Generator) -> Image.Image:
        side = self._side
        if not kept:
            grey = 128 + rng.normal(0, 10, (side, side, 3))
            return Image.fromarray(np.clip(grey, 0, 255).astype(np.uint8), "RGB")
        cols = math.ceil(math.sqrt(len(kept)))
        rows = math.ceil(len(kept) / cols)
        cell_w, cell_h = max(1, side // cols), max(1, side // rows)
        canvas = Image.new("RGB", (side, side), (128, 128, 128))
        for i, c in enumerate(kept):
            tile = render_synthetic(c, f"cis:{c}", int(rng.integers(_TEXT_POOL)), self.world, max(8, min(side, 64)))
            tile = _grade(tile, rng, 0.03).resize((cell_w, cell_h), Image.BILINEAR)
            canvas.paste(tile, ((i % cols) * cell_w, (i // cols) * cell_h))
        return canvas

    def _text(self, prompt: str, rng: np.random.Generator) -> tuple[Image.Image, list[str]]:
        known = self._translations.get(prompt)
        if known is not None:
            english, lang = known
            understanding = 0.35 + 0.6 * (_stable_int("understanding", lang) % 1000) / 1000
            if rng.random() < understanding:
                r = read_prompt(english)
                if r.family == "dig_in":
                    return self._dig_in(r, rng)
                if r.family == "cis":
                    kept = list(self.cis_plan(english, int(rng.integers(2**32))))
                    return self._cis(kept, rng), kept
                prompt = english
        key = f"text:{prompt}"
        im = render_synthetic(key, key, int(rng.integers(_TEXT_POOL)), self.world, self._side)
        return _grade(im, rng, 0.03), []


def smoke_procedural(size: int | tuple[int, int] = 64, batch_size: int = 16) -> ProceduralGenerator:
    """The ``--t2i-model procedural`` generator: world 1, the bundled IndicTTI smoke sample understood."""
    from t2i_fairness.vocab.multilingual import load_smoke_sample

    return ProceduralGenerator(size, 1, load_smoke_sample(), batch_size)
