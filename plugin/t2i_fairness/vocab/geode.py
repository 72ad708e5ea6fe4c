"""Prompt sets of DIG In and Decomposed-DIG: GeoDE's objects, regions, countries and templates; a
:class:`Prompt` carries its labels, so indicators group images without parsing text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

# GeoDE's 27 objects as DIG In's code names them, and how they read in a prompt.
GEODE_OBJECTS: dict[str, str] = {
    "bag": "bag",
    "bicycle": "bicycle",
    "candle": "candle",
    "car": "car",
    "chair": "chair",
    "cleaning_equipment": "cleaning equipment",
    "cooking_pot": "cooking pot",
    "dog": "dog",
    "dustbin": "dustbin",
    "front_door": "front door",
    "hairbrush_comb": "hairbrush or comb",
    "hand_soap": "hand soap",
    "hat": "hat",
    "jug": "jug",
    "light_fixture": "light fixture",
    "light_switch": "light switch",
    "lighter": "lighter",
    "medicine": "medicine",
    "plate_of_food": "plate of food",
    "spices": "spices",
    "storefront": "storefront",
    "stove": "stove",
    "toothbrush": "toothbrush",
    "toothpaste_toothpowder": "toothpaste or toothpowder",
    "toy": "toy",
    "tree": "tree",
    "waste_container": "waste container",
}


@dataclass(frozen=True)
class Region:
    slug: str  # id used in test ids and thresholds: lower case, underscores
    name: str  # as it reads after "in": "the Americas"
    adjective: str  # Decomposed-DIG's regional adjective: "African"
    countries: tuple[str, ...]  # DIG In: the top three GeoDE countries of the region, in its prompt file's order


GEODE_REGIONS: tuple[Region, ...] = (
    Region("africa", "Africa", "African", ("Nigeria", "South Africa", "Egypt")),
    Region("americas", "the Americas", "American", ("Colombia", "Argentina", "Mexico")),
    Region("east_asia", "East Asia", "East Asian", ("Japan", "South Korea", "China")),
    Region("europe", "Europe", "European", ("Italy", "Spain", "the United Kingdom")),
    Region("southeast_asia", "Southeast Asia", "Southeast Asian", ("Indonesia", "the Philippines", "Thailand")),
    Region("west_asia", "West Asia", "West Asian", ("Turkey", "the United Arab Emirates", "Saudi Arabia")),
)
REGIONS_BY_SLUG = {r.slug: r for r in GEODE_REGIONS}

# Templates: slug -> format string. The slug is the id used in test ids and thresholds.
TEMPLATES: dict[str, str] = {
    "object": "{object}",
    "object_in_region": "{object} in {region}",
    "object_in_country": "{object} in {country}",
    "regional_adjective": "{adjective} {object}",
}


@dataclass(frozen=True)
class Prompt:
    """One prompt and the labels indicators group by."""

    text: str
    template: str
    object: str
    region: str | None = None  # region slug, also for country prompts (countries merge into regions)
    country: str | None = None


def slugify(text: str) -> str:
    """Lower case with underscores, the form of every id in test names and threshold files."""
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def resolve_objects(names: Iterable[str] | None) -> list[str]:
    """Validate object names (GeoDE codes); ``None`` means all 27."""
    if names is None:
        return list(GEODE_OBJECTS)
    names = list(names)
    unknown = [n for n in names if n not in GEODE_OBJECTS]
    if unknown:
        raise ValueError(f"unknown GeoDE object(s) {unknown}; choose from {sorted(GEODE_OBJECTS)}")
    return names


def resolve_regions(slugs: Iterable[str] | None) -> list[Region]:
    if slugs is None:
        return list(GEODE_REGIONS)
    out = []
    for s in slugs:
        if s not in REGIONS_BY_SLUG:
            raise ValueError(f"unknown region {s!r}; choose from {sorted(REGIONS_BY_SLUG)}")
        out.append(REGIONS_BY_SLUG[s])
    return out


def geode_prompts(
    template: str,
    objects: Sequence[str] | None = None,
    regions: Sequence[str] | None = None,
) -> list[Prompt]:
    """The prompts of one template over objects x regions (x countries), in a fixed order (default all
    27 objects and 6 regions; regions are ignored by ``object``).

    Raises:
        ValueError: unknown template, object or region (the message lists the choices).

    Example:
        >>> [p.text for p in geode_prompts("object_in_country", ["cooking_pot"], ["europe"])]
        ['cooking pot in Italy', 'cooking pot in Spain', 'cooking pot in the United Kingdom']
        >>> geode_prompts("regional_adjective", ["bag"], ["africa"])[0].text
        'African bag'
    """
    if template not in TEMPLATES:
        raise ValueError(f"unknown template {template!r}; choose from {sorted(TEMPLATES)}")
    objs = resolve_objects(objects)
    regs = resolve_regions(regions)
    fmt = TEMPLATES[template]
    out: list[Prompt] = []
    for code in objs:
        name = GEODE_OBJECTS[code]
        if template == "object":
            out.append(Prompt(fmt.format(object=name), template, code))
            continue
        for reg in regs:
            if template == "object_in_country":
                for country in reg.countries:
                    out.append(Prompt(fmt.format(object=name, country=country), template, code, reg.slug, country))
            else:
                text = fmt.format(object=name, region=reg.name, adjective=reg.adjective)
                out.append(Prompt(text, template, code, reg.slug))
    return out
