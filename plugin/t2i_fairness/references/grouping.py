"""DIG In's grouping of generated and real images (sections 4.2-4.3), without pytest or models."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Hashable, Mapping, Sequence, TypeVar

import numpy as np

from t2i_fairness.vocab.geode import GEODE_OBJECTS, REGIONS_BY_SLUG, TEMPLATES, Prompt, Region

T = TypeVar("T")

# Regions of DollarStreet (and any other set) that GeoDE lacks.
EXTRA_REGIONS = {"asia": Region("asia", "Asia", "Asian", ())}


@dataclass(frozen=True)
class PromptSpace:
    """Objects (code -> words) and regions (with countries) to build prompts from."""

    objects: Mapping[str, str]
    regions: tuple[Region, ...]

    @classmethod
    def from_reference(cls, reference, objects: Sequence[str] | None = None) -> "PromptSpace":
        """The reference set's objects (optionally restricted) and regions; each region's countries are
        GeoDE's three, else its three most represented in the set (DIG In 3.3).
        """
        present = reference.objects
        chosen = [o for o in present if objects is None or o in objects or reference.kind == "dollarstreet"]
        names = {o: GEODE_OBJECTS.get(o, o.replace("_", " ")) for o in chosen}
        regions = []
        for slug in reference.regions:
            base = REGIONS_BY_SLUG.get(slug) or EXTRA_REGIONS.get(slug) or Region(slug, slug.replace("_", " ").title(), slug.replace("_", " ").title(), ())
            if slug not in REGIONS_BY_SLUG:
                counts = Counter(r.country for r in reference.records if r.region == slug and r.country)
                base = Region(base.slug, base.name, base.adjective, tuple(c for c, _ in counts.most_common(3)))
            regions.append(base)
        return cls(names, tuple(regions))

    def prompts(self, template: str) -> list[Prompt]:
        """The template's prompts over objects x regions (x countries), in a fixed order."""
        if template not in TEMPLATES:
            raise ValueError(f"unknown template {template!r}; choose from {sorted(TEMPLATES)}")
        fmt = TEMPLATES[template]
        out: list[Prompt] = []
        for code, name in self.objects.items():
            if template == "object":
                out.append(Prompt(fmt.format(object=name), template, code))
                continue
            for reg in self.regions:
                if template == "object_in_country":
                    if not reg.countries:
                        raise ValueError(f"region {reg.slug!r} has no countries for the {{object}} in {{country}} template")
                    out += [Prompt(fmt.format(object=name, country=c), template, code, reg.slug, c) for c in reg.countries]
                else:
                    out.append(Prompt(fmt.format(object=name, region=reg.name, adjective=reg.adjective), template, code, reg.slug))
        return out


def sample_object_mix(by_object: Mapping[str, Sequence[T]], mix: Mapping[str, int], seed: int) -> list[T]:
    """Sample ``{object}`` generations so their object proportions match ``mix`` (DIG In 4.2).

    The most frequent object keeps all its generations, the others ``round(n * share)``.

    Example:
        >>> sample_object_mix({"bag": list(range(4)), "car": list(range(10, 14))}, {"bag": 2, "car": 1}, seed=0)
        [0, 1, 2, 3, 12, 13]
    """
    missing = [o for o in mix if not by_object.get(o)]
    if missing:
        raise ValueError(f"no generated images for object(s) {missing} of the reference mix")
    top = max(mix.values())
    n = min(len(by_object[o]) for o in mix)
    rng = np.random.default_rng(seed)
    out: list[T] = []
    for obj, count in mix.items():
        take = max(1, round(n * count / top))
        items = list(by_object[obj])
        idx = rng.choice(len(items), size=min(take, len(items)), replace=False) if take < len(items) else range(len(items))
        out += [items[i] for i in idx]
    return out


def group_generated(
    items: Sequence[tuple[Prompt, Sequence[T]]],
    template: str,
    reference,
    by: str,
    seed: int = 0,
) -> dict[Hashable, list[T]]:
    """Generated images grouped as DIG In compares them with the reference groups.

    Args:
        by: ``"region"`` -> {region: images}; ``"object_region"`` -> {(object, region): images}.
    """
    if by not in ("region", "object_region"):
        raise ValueError(f"by must be 'region' or 'object_region', got {by!r}")
    by_object: dict[str, list[T]] = {}
    by_pair: dict[tuple[str, str], list[T]] = {}
    for prompt, images in items:
        if template == "object":
            by_object.setdefault(prompt.object, []).extend(images)
        else:
            by_pair.setdefault((prompt.object, prompt.region), []).extend(images)
    groups: dict[Hashable, list[T]] = {}
    if by == "region":
        for i, region in enumerate(reference.regions):
            if template == "object":
                mix = {o: c for o, c in reference.object_mix(region).items() if o in by_object}
                groups[region] = sample_object_mix(by_object, mix, seed + i)
            else:
                groups[region] = [im for (o, r), ims in by_pair.items() if r == region for im in ims]
        return groups
    for obj, region in reference.groups_by_object_region():
        if template == "object":
            if obj in by_object:
                groups[(obj, region)] = list(by_object[obj])
        elif (obj, region) in by_pair:
            groups[(obj, region)] = by_pair[(obj, region)]
    return groups


def images_per_prompt_for(template: str, n: int, country_index: int = 0, countries: int = 3) -> int:
    """Images of one prompt when an object-region gets ``n``: image ``j`` goes to country ``j % countries`` (DIG In 3.3).

    Example:
        >>> [images_per_prompt_for("object_in_country", 4, i) for i in range(3)]
        [2, 1, 1]
    """
    if template != "object_in_country":
        return n
    if not 0 <= country_index < countries:
        raise ValueError(f"country_index must be in [0, {countries}), got {country_index}")
    return (n - country_index + countries - 1) // countries


def group_prompts(prompts: Sequence[Prompt], template: str, region: str | None = None,
                  object: str | None = None) -> list[Prompt]:
    """The prompts whose images :func:`group_generated` can put in the group of ``region`` and ``object``."""
    if template == "object":
        return [p for p in prompts if object is None or p.object == object]
    return [p for p in prompts if (region is None or p.region == region) and (object is None or p.object == object)]


@dataclass(frozen=True)
class PromptImages:
    """A prompt with its generated images."""

    prompt: Prompt
    images: list


def _slice(options, template: str, space: PromptSpace | None, region: str | None,
           object: str | None, n: int | None = None) -> tuple[list[Prompt], list[int]]:
    """The prompts of a template's group (all of them by default) and each prompt's image count
    (a country prompt takes its turn of its region's n images: :func:`images_per_prompt_for`);
    ``n``: images per object-region (default ``--t2i-images-per-prompt``)."""
    from t2i_fairness.vocab.geode import GEODE_REGIONS

    n = options.images_per_prompt if n is None else n
    space = space or PromptSpace({o: GEODE_OBJECTS[o] for o in options.objects}, GEODE_REGIONS)
    prompts = group_prompts(space.prompts(template), template, region, object)
    countries = {r.slug: r.countries for r in space.regions}
    counts = [images_per_prompt_for(template, n, countries[p.region].index(p.country), len(countries[p.region]))
              if p.country else images_per_prompt_for(template, n)
              for p in prompts]
    return prompts, counts


def whole_batches(counts: Sequence[int], planned: Sequence[int], batch: int) -> list[int]:
    """The images to make for a sequential look: ``counts`` rounded up to whole batches (at most ``planned``).

    Every batch made is then a canonical batch of the fixed-N run, cached byte for byte.

    Example:
        >>> whole_batches([3, 3, 2], [6, 5, 5], 4), whole_batches([5, 5, 5], [6, 5, 5], 4)
        ([4, 4, 4], [6, 5, 5])
    """
    if batch < 1:
        raise ValueError(f"`batch` must be >= 1, but got {batch}")
    return [min(int(p), -(-int(c) // batch) * batch) for c, p in zip(counts, planned)]


def look_of(bench) -> tuple[int, int] | None:
    """``(planned images per prompt, batch size)`` of a look of ``--t2i-sequential`` (``bench``: the workbench a
    look's study reads, ``Workbench.at_images``), or ``None`` for the fixed-N run (or a batch size it does not know)."""
    planned = int(getattr(bench, "planned_images_per_prompt", bench.options.images_per_prompt))
    batch = getattr(getattr(bench, "factory", None), "batch_size", None)
    return (planned, int(batch)) if planned > bench.options.images_per_prompt and batch else None


def _made(options, template: str, space, region, object, counts: list[int], look: tuple[int, int] | None) -> list[int]:
    """The images to make for ``counts``: at a look, whole canonical batches (:func:`whole_batches`)."""
    if look is None:
        return counts
    return whole_batches(counts, _slice(options, template, space, region, object, n=look[0])[1], look[1])


def _image_calls(counts: Sequence[int]) -> list[tuple[list[int], int]]:
    """The ``bench.images`` calls for prompts with these image counts, largest first."""
    return [([i for i, c in enumerate(counts) if c == n], n) for n in sorted(set(counts) - {0}, reverse=True)]


def prompt_images(bench, template: str, space: PromptSpace | None = None, region: str | None = None,
                  object: str | None = None) -> list[PromptImages]:
    """The images of a template's prompts over ``space`` (default: the run's GeoDE objects and regions),
    restricted to the group of ``region`` / ``object`` when given; generated once and shared by every
    study. :func:`prompt_calls` lists them without generating.
    """
    prompts, counts = _slice(bench.options, template, space, region, object)
    made = _made(bench.options, template, space, region, object, counts, look_of(bench))
    key = ("prompt_images", template, tuple(p.text for p in prompts), tuple(counts), tuple(made))

    def make() -> list[PromptImages]:
        refs: dict[int, list] = {i: [] for i in range(len(prompts))}  # a country prompt may get 0 images
        for idx, n in _image_calls(made):
            refs.update(zip(idx, bench.images([prompts[i].text for i in idx], n, desc=f"generating {template}")))
        return [PromptImages(p, refs[i][:c]) for (i, p), c in zip(enumerate(prompts), counts)]

    return bench.shared(key, make)


def template_truncation(bench, template: str, space: PromptSpace | None = None, *, count):
    """How the generator's tokenizer truncates a template's prompts, counted once per session and warned
    about when any is truncated. ``count(source, texts, what)`` is handed down (the families pass
    :func:`~t2i_fairness.generators.tokens.counted_truncation`), so this layer imports no generator.
    """
    from t2i_fairness.vocab.geode import GEODE_REGIONS

    space = space or PromptSpace({o: GEODE_OBJECTS[o] for o in bench.options.objects}, GEODE_REGIONS)
    key = ("template_truncation", template, tuple(space.objects.items()), space.regions)

    def make():
        from t2i_fairness.metrics.truncation import Truncation

        texts = list(dict.fromkeys(p.text for p in space.prompts(template)))
        source = getattr(bench, "source", None)
        if source is None:
            return Truncation.not_counted("no generator source", len(texts))
        return count(source, texts, f"template {template}")

    return bench.shared(key, make)


def truncation_line(truncation) -> str:
    """One report line: ``generator's tokenizer: 0/12 prompts truncated (tokenizer (CLIPTokenizer, 77))``."""
    if not truncation.counted:
        return f"generator's tokenizer: truncation not counted ({truncation.encoder})"
    lost = f", up to {truncation.max_lost} tokens lost" if truncation.truncated else ""
    return f"generator's tokenizer: {truncation.cell()} prompts truncated ({truncation.encoder}){lost}"


def prompt_calls(options, template: str, space: PromptSpace | None = None, region: str | None = None,
                 object: str | None = None, look: tuple[int, int] | None = None) -> tuple[tuple[list[str], int], ...]:
    """The ``(texts, n)`` calls :func:`prompt_images` would make, without generating."""
    prompts, counts = _slice(options, template, space, region, object)
    made = _made(options, template, space, region, object, counts, look)
    return tuple(([prompts[i].text for i in idx], n) for idx, n in _image_calls(made))
