"""DIG In's canaries: a planted regression in one region's images (``collapse_region``, ``degrade_region``).

A region (slug, name, adjective or one of its countries) holds the DIG In prompts that name it:
``{object} in {region or country}`` and ``{adjective} {object}``. ``{object}`` prompts name no
region and are never touched. The slice's gates include Decomposed-DIG's region gates.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from PIL import Image, ImageEnhance, ImageFilter

from t2i_fairness.generators.canary import (
    CANARY_VERSION, Canary, CanaryInfo, CanarySlice, SliceKind, check_call, fraction, split_gate, stable_int,
)

__all__ = ["CANARIES", "REGION", "CollapseRegion", "DegradeRegion"]

# Gate tests (names before "[") that measure one region's images, and those pooling all regions.
REGION_GATES = frozenset({
    "test_region_precision", "test_region_coverage", "test_object_region_precision",
    "test_object_region_coverage", "test_obj_precision", "test_obj_coverage", "test_bg_precision",
    "test_bg_coverage", "test_object_consistency",
})
REGION_AGGREGATES = frozenset({
    "test_worst_region_precision", "test_worst_region_coverage", "test_region_disparity_precision",
    "test_region_disparity_coverage", "test_object_worst_region_precision",
    "test_object_worst_region_coverage", "test_object_region_disparity_coverage",
    "test_worst_region_bg_coverage", "test_region_spread", "test_template_improvement",
    "test_object_consistency",
})


def region_role(value: str, gate_id: str) -> str:
    """The role of a gate for the region slice ``value``.

    Example:
        >>> s = CanarySlice("region", "africa")
        >>> [s.gate_role(g) for g in ("test_region_coverage[synthetic-object_in_region-africa]",
        ...     "test_region_coverage[synthetic-object-africa]", "test_worst_region_coverage[synthetic-object_in_region]",
        ...     "test_region_coverage[synthetic-object_in_region-europe]", "test_cis[k2]")]
        ['slice', 'other', 'aggregate', 'other', 'other']
    """
    from t2i_fairness.generators.procedural import find_region

    name, params = split_gate(gate_id)
    if "object" in params:  # the {object} template: no prompt names a region
        return "other"
    if name in REGION_GATES and value in params:
        return "slice"
    if name in REGION_AGGREGATES and not any(find_region(p) for p in params):
        return "aggregate"
    return "other"


REGION = SliceKind("region", region_role, "region {value}")


def region_choices() -> str:
    """What a region SLICE may be (quoted in errors)."""
    from t2i_fairness.generators.procedural import REGIONS

    return ("give a region slug, name, adjective or country, one of: " + ", ".join(r.slug for r in REGIONS)
            + " (e.g. Africa, African, Nigeria)")


def read_region(value: str) -> str:
    """A region's slug from its slug, name, adjective or one of its countries (a ValueError listing the
    choices for an unknown one).
    """
    from t2i_fairness.generators.procedural import find_region

    slug = find_region(value) if isinstance(value, str) else None
    if slug is None:
        raise ValueError(f"unknown region {value!r}; {region_choices()}")
    return slug


class _RegionCanary(Canary):
    def __init__(self, inner, region: str, param: str = ""):
        from t2i_fairness.generators.procedural import REGIONS

        try:
            slug = read_region(region)
        except ValueError as exc:
            raise ValueError(f"canary {self.name}: {exc}") from None
        self.region = {r.slug: r for r in REGIONS}[slug]
        super().__init__(inner, CanarySlice("region", self.region.slug), param)

    def targets(self, prompt: str) -> bool:
        from t2i_fairness.generators.procedural import read_prompt

        reading = read_prompt(prompt)
        return reading.family == "dig_in" and reading.region == self.region.slug

    def _replacement(self, prompt: str, seed: int) -> str | None:
        return None  # region canaries edit images, they never change a prompt


class CollapseRegion(_RegionCanary):
    """Mode collapse: every prompt of one region returns the same image.

    The image is the inner generator's image of ``anchor`` (default ``"{anchor object} in {region
    name}"``) at seed ``anchor_seed``, generated once, alone, and kept.

    Raises:
        ValueError: an unknown region (the message lists the choices).
        TypeError: ``inner`` is not a generator.

    Example:
        >>> from t2i_fairness.generators.procedural import ProceduralGenerator
        >>> gen = ProceduralGenerator()
        >>> a, b, c = CollapseRegion(gen, "African").generate(["bag in Nigeria", "stove in Africa", "bag in Europe"], [1, 2, 3])
        >>> a.tobytes() == b.tobytes(), c.tobytes() == gen.generate(["bag in Europe"], [3])[0].tobytes()
        (True, True)
    """

    name = "collapse_region"

    def __init__(self, inner, region: str, anchor: str | None = None, anchor_seed: int = 0):
        from t2i_fairness.vocab.geode import GEODE_OBJECTS

        super().__init__(inner, region)
        self.anchor = anchor if anchor is not None else f"{GEODE_OBJECTS['bag']} in {self.region.name}"
        self.anchor_seed = int(anchor_seed)
        if anchor is not None or anchor_seed != 0:
            self.fingerprint += f":{self.anchor}@{self.anchor_seed}"
        self._anchor_image: Image.Image | None = None

    def describe(self) -> str:
        return (f"{super().describe()}: every prompt of {self.region.name} returns one image "
                f"(of {self.anchor!r}, seed {self.anchor_seed})")

    def anchor_image(self) -> Image.Image:
        """The one image of the region (generated on first use, alone in its batch)."""
        if self._anchor_image is None:
            self._anchor_image = self._inner([self.anchor], [self.anchor_seed])[0]
        return self._anchor_image

    def generate(self, prompts: Sequence[str], seeds: Sequence[int]) -> list[Image.Image]:
        prompts, seeds = check_call(self.name, prompts, seeds)
        hit = [self.targets(p) for p in prompts]
        if not any(hit):
            return self._inner(prompts, seeds)
        base = self._inner(prompts, seeds) if not all(hit) else [None] * len(prompts)
        return [self.anchor_image().copy() if h else im for h, im in zip(hit, base)]

    def check_available(self, prompts: Sequence[str], seeds: Sequence[int]) -> None:
        check = getattr(self.inner, "check_available", None)
        if check is not None:
            keep = [(p, s) for p, s in zip(prompts, seeds) if not self.targets(p)] + [(self.anchor, self.anchor_seed)]
            check([p for p, _ in keep], [s for _, s in keep])


class DegradeRegion(_RegionCanary):
    """One region's images degraded: Gaussian blur, pixel noise and desaturation, by a strength in ``(0, 1]``.

    At strength ``s``: blur radius ``3 s`` pixels per 64 of the short side, seeded noise of standard
    deviation ``48 s`` grey levels, saturation scaled by ``1 - s``.

    Raises:
        ValueError: an unknown region, a strength outside ``(0, 1]``.
        TypeError: ``inner`` is not a generator.

    Example:
        >>> from t2i_fairness.generators.procedural import ProceduralGenerator
        >>> gen = ProceduralGenerator()
        >>> canary = DegradeRegion(gen, "west_asia", 0.8)
        >>> a, b = canary.generate(["bag in Turkey", "bag in Italy"], [5, 5])
        >>> a.tobytes() == gen.generate(["bag in Turkey"], [5])[0].tobytes(), b.tobytes() == gen.generate(["bag in Italy"], [5])[0].tobytes()
        (False, True)
    """

    name = "degrade_region"

    def __init__(self, inner, region: str, strength: float = 0.5):
        strength = fraction(strength, f"canary {self.name}: strength", low_open=True)
        self.strength = strength
        super().__init__(inner, region, f"{strength:g}")

    def describe(self) -> str:
        return f"{super().describe()}: {self.region.name}'s images blurred, noised and desaturated (strength {self.strength:g})"

    def degrade(self, image: Image.Image, prompt: str, seed: int) -> Image.Image:
        """The degraded copy of one image (a pure function of the image, prompt, seed and strength)."""
        s = self.strength
        rgb = image.convert("RGB")
        out = rgb.filter(ImageFilter.GaussianBlur(3.0 * s * min(rgb.size) / 64))
        rng = np.random.default_rng(stable_int("degrade", CANARY_VERSION, s, prompt, seed))
        noisy = np.asarray(out, dtype=np.float64) + rng.normal(0.0, 48.0 * s, (rgb.size[1], rgb.size[0], 3))
        out = Image.fromarray(np.clip(np.round(noisy), 0, 255).astype(np.uint8), "RGB")
        return ImageEnhance.Color(out).enhance(1.0 - s)

    def generate(self, prompts: Sequence[str], seeds: Sequence[int]) -> list[Image.Image]:
        prompts, seeds = check_call(self.name, prompts, seeds)
        images = self._inner(prompts, seeds)
        return [self.degrade(im, p, s) if self.targets(p) else im for im, p, s in zip(images, prompts, seeds)]


def _build_collapse(inner, slice_: str, params: dict, multilingual) -> Canary:
    return CollapseRegion(inner, slice_, **params)


def _build_degrade(inner, slice_: str, params: dict, multilingual) -> Canary:
    return DegradeRegion(inner, slice_, **params)


def _read_strength(param: str) -> dict:
    return {"strength": fraction(param, "STRENGTH", low_open=True)}


def _info(name, param_help, summary, build, read_param=None) -> CanaryInfo:
    return CanaryInfo(name, "region", "a region: slug, name, adjective or country (e.g. africa, African, Nigeria)",
                      param_help, summary, build=build, read_slice=read_region, read_param=read_param)


#: DIG In's canaries, in the order ``--t2i-canary`` lists them (listed on :data:`~t2i_fairness.families.dig_in.FAMILY`).
CANARIES: tuple[CanaryInfo, ...] = (
    _info("collapse_region", "none", "every prompt of the region returns one identical image (mode collapse)",
          _build_collapse),
    _info("degrade_region", "STRENGTH in (0, 1], default 0.5", "the region's images blurred, noised and desaturated",
          _build_degrade, _read_strength),
)
