"""The labels of reference images: dataset kinds, region slugs, object vocabularies, and one labelled
image (:class:`Record`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Iterable, Sequence

from t2i_fairness.vocab.geode import GEODE_OBJECTS, GEODE_REGIONS, slugify


KINDS = ("geode", "dollarstreet", "manifest", "synthetic")

GEODE_REGION_SLUGS: tuple[str, ...] = tuple(r.slug for r in GEODE_REGIONS)

# DollarStreet splits the world into four regions; DIG In keeps them as they are.
DOLLARSTREET_REGIONS: dict[str, str] = {
    "africa": "Africa",
    "americas": "the Americas",
    "asia": "Asia",
    "europe": "Europe",
}

# Every region slug a reference set may carry, in a fixed order (GeoDE's, then DollarStreet's own).
REGION_SLUGS: tuple[str, ...] = GEODE_REGION_SLUGS + tuple(
    s for s in DOLLARSTREET_REGIONS if s not in GEODE_REGION_SLUGS
)


def _read_vocabulary(filename: str) -> tuple[str, ...]:
    from t2i_fairness import DATA

    text = (DATA / filename).read_text(encoding="utf-8")
    return tuple(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))


# DollarStreet topics DIG In uses as objects, slugified; see data/dollarstreet_objects.txt.
DOLLARSTREET_OBJECTS: tuple[str, ...] = _read_vocabulary("dollarstreet_objects.txt")

# Object codes a manifest may use: GeoDE's 27 and DollarStreet's topics.
KNOWN_OBJECTS: tuple[str, ...] = tuple(sorted(set(GEODE_OBJECTS) | set(DOLLARSTREET_OBJECTS)))

# How many culprits an error message lists before it says "and N more".
_SHOW = 5


@dataclass(frozen=True)
class Record:
    """One reference image: an absolute path (or a ``synthetic:`` URI), an object code and a region slug."""

    path: str
    object: str
    region: str
    country: str | None = None


def _choose(values: Iterable[str] | None, choices: Sequence[str], what: str, slug: bool = False) -> list[str]:
    """Validate a user's selection against ``choices``; None means all of them."""
    if values is None:
        return list(choices)
    out = [slugify(v) if slug else v for v in _as_list(values, what)]
    unknown = [v for v in out if v not in choices]
    if unknown:
        raise ValueError(f"unknown {what}(s) {unknown}; choose from {list(choices)}")
    if not out:
        raise ValueError(f"empty {what} selection; choose from {list(choices)}")
    return list(dict.fromkeys(out))


def _as_list(values: Iterable[str], what: str) -> list[str]:
    if isinstance(values, str):
        raise ValueError(f"{what} selection must be a list of names, got the string {values!r}")
    return [str(v) for v in values]


def _ordered_regions(present: Iterable[str]) -> list[str]:
    present = set(present)
    return [s for s in REGION_SLUGS if s in present] + sorted(present - set(REGION_SLUGS))


def _sorted(records: list[Record]) -> list[Record]:
    order = {slug: i for i, slug in enumerate(REGION_SLUGS)}
    return sorted(records, key=lambda r: (order.get(r.region, len(order)), r.region, r.object, r.path))


def _relative(path: str, root: str | None) -> str:
    if root and (path == root or path.startswith(root.rstrip("/") + "/")):
        return path[len(root.rstrip("/")) + 1:]
    return path


def _stable_int(*parts: object) -> int:
    """A 64-bit integer from the parts, the same in every process (unlike ``hash``)."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big")
