"""Reference data: real images labelled with an object and a region, as DIG In uses them.

DIG In's realism and diversity indicators compare generated images with real ones of the same
region (Region Indicator) or the same object and region (Object-Region Indicator). This module
turns a dataset on disk into a :class:`ReferenceSet` (a flat list of labelled image paths) that
indicators can group:

* GeoDE as released (``index.csv`` + ``images/``): 6 regions, filtered to DIG In's 27 objects and,
  by default, balanced to the same number of images per object-region, as in the paper.
* DollarStreet's metadata CSV (``images_v2.csv``): 4 regions, topics as objects, single-label
  images only, kept in its original (imbalanced) distribution, as in the paper.
* A plain manifest CSV ``path,object,region[,country]`` for anything else.
* A generated synthetic set, so the gates run offline; it is labelled synthetic everywhere.

``--t2i-reference NAME=PATH`` is parsed by :func:`parse_reference_option`; :func:`load_reference`
guesses the kind from PATH unless ``kind`` says it. Loading reads only the metadata and checks
that the files exist; images are decoded lazily by :func:`open_image`, which names the file when
it cannot read it.
"""

from __future__ import annotations

import ast
import colorsys
import csv
import hashlib
import io
import os
import random
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np
from PIL import Image, ImageDraw

from t2i_fairness.base.files import atomic_write_bytes
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


def _compact(text: str) -> str:
    """Lower case letters and digits only, so "SouthEastAsia", "Southeast Asia" and
    "southeast_asia" compare equal."""
    return re.sub(r"[^a-z0-9]", "", text.lower())


# Region values as GeoDE's index.csv spells them ("EastAsia", "SouthEastAsia", ...), compacted.
_GEODE_REGION_VALUES: dict[str, str] = {
    "africa": "africa",
    "americas": "americas",
    "theamericas": "americas",
    "eastasia": "east_asia",
    "europe": "europe",
    "southeastasia": "southeast_asia",
    "westasia": "west_asia",
}
# DollarStreet's region.id codes (af, am, as, eu) and region names, compacted.
_DOLLARSTREET_REGION_VALUES: dict[str, str] = {
    "af": "africa",
    "africa": "africa",
    "am": "americas",
    "america": "americas",
    "americas": "americas",
    "theamericas": "americas",
    "as": "asia",
    "asia": "asia",
    "eu": "europe",
    "europe": "europe",
}
# A manifest may use either vocabulary, or our slugs.
_MANIFEST_REGION_VALUES: dict[str, str] = {
    **{_compact(s): s for s in REGION_SLUGS},
    **_GEODE_REGION_VALUES,
    **{k: v for k, v in _DOLLARSTREET_REGION_VALUES.items() if len(k) > 2},
}


def _read_vocabulary(filename: str) -> tuple[str, ...]:
    from t2i_fairness import DATA

    text = (DATA / filename).read_text(encoding="utf-8")
    return tuple(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))


# DollarStreet topics DIG In uses as objects, slugified; see data/dollarstreet_objects.txt.
DOLLARSTREET_OBJECTS: tuple[str, ...] = _read_vocabulary("dollarstreet_objects.txt")

# Object codes a manifest may use: GeoDE's 27 and DollarStreet's topics.
KNOWN_OBJECTS: tuple[str, ...] = tuple(sorted(set(GEODE_OBJECTS) | set(DOLLARSTREET_OBJECTS)))

# Column names each loader accepts for a field, first match wins. GeoDE's index.csv and
# DollarStreet's images_v2.csv use the first name of each list; the others are aliases seen in
# derived copies of these files (e.g. "script_name" in GeoDE's own training code).
GEODE_COLUMNS: dict[str, tuple[str, ...]] = {
    "path": ("file_path", "path", "image_path"),
    "object": ("object", "script_name"),
    "region": ("region",),
    "country": ("ip_country", "country"),
}
DOLLARSTREET_COLUMNS: dict[str, tuple[str, ...]] = {
    "path": ("imageRelPath", "file_path", "image_path", "path"),
    "object": ("topics", "topic", "object"),
    "region": ("region.id", "region", "region.name"),
    "country": ("country.name", "country"),
}
MANIFEST_COLUMNS: dict[str, tuple[str, ...]] = {
    "path": ("path", "file_path", "image_path"),
    "object": ("object",),
    "region": ("region",),
    "country": ("country",),
}
_REQUIRED_FIELDS = ("path", "object", "region")

# Files :func:`detect_kind` looks for when PATH is a folder.
GEODE_INDEX = "index.csv"
DOLLARSTREET_CSVS = ("images_v2.csv", "dataset_dollarstreet/images_v2.csv")
MANIFEST_CSV = "manifest.csv"

# Bumped whenever render_synthetic draws differently, so fingerprints and cached features change.
SYNTHETIC_VERSION = 1
_SYNTHETIC_SCHEME = f"synthetic:v{SYNTHETIC_VERSION}"

# How many culprits an error message lists before it says "and N more".
_SHOW = 5


@dataclass(frozen=True)
class Record:
    """One reference image and its labels.

    ``path`` is an absolute file path, or for an in-memory synthetic set a ``synthetic:`` URI that
    :func:`open_image` renders. ``object`` is an object code (GeoDE's, or a slugified DollarStreet
    topic), ``region`` a region slug (see :data:`REGION_SLUGS`).
    """

    path: str
    object: str
    region: str
    country: str | None = None


@dataclass(frozen=True)
class ReferenceSet:
    """A named, labelled set of reference images, grouped the ways DIG In's indicators need.

    Attributes:
        name: id of the set (the NAME of ``--t2i-reference NAME=PATH``).
        records: the images, in a deterministic order.
        synthetic: True for generated stand-in data; reports must never present it as real.
        description: one line saying what was loaded and how it was filtered and balanced.
        kind: which loader made it (one of :data:`KINDS`).
        root: folder the record paths are relative to in :attr:`fingerprint`.
    """

    name: str
    records: tuple[Record, ...]
    synthetic: bool = False
    description: str = ""
    kind: str = "manifest"
    root: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "records", tuple(self.records))

    def __len__(self) -> int:
        return len(self.records)

    @property
    def regions(self) -> list[str]:
        """Region slugs present, in :data:`REGION_SLUGS` order (unknown ones last, sorted)."""
        present = {r.region for r in self.records}
        return _ordered_regions(present)

    @property
    def objects(self) -> list[str]:
        """Object codes present, sorted."""
        return sorted({r.object for r in self.records})

    def groups_by_region(self) -> dict[str, list[Record]]:
        """Records per region: the regional datasets of DIG In's Region Indicator (section 4.2)."""
        out: dict[str, list[Record]] = {region: [] for region in self.regions}
        for rec in self.records:
            out[rec.region].append(rec)
        return out

    def groups_by_object_region(self) -> dict[tuple[str, str], list[Record]]:
        """Records per (object, region): the datasets of the Object-Region Indicator (section 4.3).

        Only groups with at least one image appear; keys are sorted by object, then region order.
        """
        order = {slug: i for i, slug in enumerate(self.regions)}
        out: dict[tuple[str, str], list[Record]] = {}
        for rec in sorted(self.records, key=lambda r: (r.object, order[r.region])):
            out.setdefault((rec.object, rec.region), []).append(rec)
        return out

    def object_mix(self, region: str) -> dict[str, int]:
        """How many images of each object the region has.

        DIG In samples the generations of the ``{object}`` prompt so that their object mix matches
        each regional reference dataset; this is the distribution to sample from.

        Args:
            region: a region slug present in the set.

        Raises:
            ValueError: the region has no images in this set (the message lists those that do).

        Example:
            >>> ref = synthetic_reference(["bag", "car"], ["africa", "europe"], per_group=2)
            >>> ref.object_mix("africa")
            {'bag': 2, 'car': 2}
        """
        if region not in {r.region for r in self.records}:
            raise ValueError(
                f"reference set {self.name!r} has no images for region {region!r}; "
                f"choose from {self.regions}"
            )
        counts: dict[str, int] = {}
        for rec in self.records:
            if rec.region == region:
                counts[rec.object] = counts.get(rec.object, 0) + 1
        return dict(sorted(counts.items()))

    def balanced(self, per_group: int | None = None, seed: int = 0, sampler: str = "dig_in") -> "ReferenceSet":
        """A copy with the same number of images in every (object, region) group.

        See :func:`balance_records` (over the records in their present order); the description
        records the balancing.
        """
        records = balance_records(self.records, per_group=per_group, seed=seed, sampler=sampler)
        note = _balance_note(records, seed, sampler)
        return ReferenceSet(self.name, records, self.synthetic, f"{self.description}; {note}", self.kind, self.root)

    @cached_property
    def fingerprint(self) -> str:
        """A content hash of the manifest: 16 hex digits, stable across machines and copies.

        It hashes, for every record sorted by path: the path relative to :attr:`root`, the labels
        and the file size in bytes (plus the synthetic flag). File modification times are left out
        on purpose: copying or restoring a dataset changes them without changing any image, and a
        spurious change of fingerprint means re-extracting features of every reference image.
        The size catches a replaced or truncated file at the cost of one ``stat`` per image;
        an in-place edit that keeps the size is not detected. Synthetic sets hash their renderer
        version, seed and size instead of file sizes (the renderer is deterministic), so a set
        rendered in memory and the same set written to a folder share a fingerprint.
        """
        h = hashlib.sha256()
        h.update(f"t2i-fairness reference v1 synthetic={self.synthetic}\n".encode())
        lines = []
        for rec in self.records:
            rel = _relative(rec.path, self.root)
            if self.synthetic:
                size = "-"
            else:
                try:
                    size = str(os.stat(rec.path).st_size)
                except OSError:
                    size = "missing"
            lines.append(f"{rel}\t{rec.object}\t{rec.region}\t{rec.country or ''}\t{size}\n")
        for line in sorted(lines):
            h.update(line.encode("utf-8"))
        return h.hexdigest()[:16]

    def check_images(self, limit: int | None = None) -> None:
        """Decode every image (or the first ``limit``) and report all that fail at once.

        Loading only checks that files exist; run this before a long evaluation to find corrupt
        files up front instead of in the middle of feature extraction.

        Raises:
            ValueError: naming the unreadable files (the first few) and how many there are.
        """
        bad = []
        for rec in self.records[:limit]:
            try:
                open_image(rec)
            except ValueError as exc:
                bad.append(str(exc))
        if bad:
            raise ValueError(
                f"reference set {self.name!r}: {len(bad)} unreadable image(s):\n  "
                + "\n  ".join(bad[:_SHOW])
                + (f"\n  ... and {len(bad) - _SHOW} more" if len(bad) > _SHOW else "")
            )


# ---------------------------------------------------------------------------------------------
# Option parsing and kind detection


_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def parse_reference_option(value: str) -> tuple[str, Path]:
    """Split a ``--t2i-reference NAME=PATH`` value.

    NAME becomes part of test ids, so it is restricted to letters, digits, ``_``, ``.`` and ``-``.
    PATH may itself contain ``=``; ``~`` is expanded.

    Args:
        value: the option value, e.g. ``"geode=/data/geode"``.

    Returns:
        ``(name, path)``.

    Raises:
        ValueError: no ``=``, an empty or malformed NAME, or an empty PATH.

    Example:
        >>> parse_reference_option("geode=/data/geode")
        ('geode', PosixPath('/data/geode'))
        >>> parse_reference_option("offline=synthetic")
        ('offline', PosixPath('synthetic'))
    """
    example = "e.g. --t2i-reference geode=/data/geode or --t2i-reference offline=synthetic"
    if not isinstance(value, str) or "=" not in value:
        raise ValueError(f"--t2i-reference expects NAME=PATH, got {value!r} ({example})")
    name, path = value.split("=", 1)
    name, path = name.strip(), path.strip()
    if not _NAME_RE.fullmatch(name):
        raise ValueError(
            f"--t2i-reference {value!r}: NAME {name!r} must start with a letter or digit and use only "
            f"letters, digits, '_', '.', '-' ({example})"
        )
    if not path:
        raise ValueError(f"--t2i-reference {value!r}: PATH is empty ({example})")
    return name, Path(path).expanduser()


def detect_kind(path: str | os.PathLike) -> str:
    """Guess which loader reads PATH.

    The literal PATH ``synthetic`` (when no such file exists) means the generated set. A folder
    is GeoDE if it holds ``index.csv``, DollarStreet if it holds ``images_v2.csv`` (or
    ``dataset_dollarstreet/images_v2.csv``), a manifest if it holds ``manifest.csv``. A CSV file is
    classified by its header: DollarStreet's columns (``imageRelPath``, ``topics``, ``region.id``),
    GeoDE's (``file_path`` or ``ip_country``), else a manifest's (``path,object,region``).

    Raises:
        ValueError: PATH does not exist, or matches no kind (the message lists what was looked for).
    """
    p = Path(path)
    if str(path) == "synthetic" and not p.exists():
        return "synthetic"
    if p.is_dir():
        if (p / GEODE_INDEX).is_file():
            return "geode"
        if any((p / name).is_file() for name in DOLLARSTREET_CSVS):
            return "dollarstreet"
        if (p / MANIFEST_CSV).is_file():
            return "manifest"
        raise ValueError(
            f"reference folder {p} holds none of {GEODE_INDEX} (GeoDE), {' or '.join(DOLLARSTREET_CSVS)} "
            f"(DollarStreet), {MANIFEST_CSV} (manifest); point PATH at the metadata CSV or pass "
            f"kind= one of {list(KINDS)}"
        )
    if p.is_file():
        header = set(_read_header(p))
        if header & {"imageRelPath", "topics", "region.id", "country.name"}:
            return "dollarstreet"
        if "ip_country" in header or ("file_path" in header and {"object", "region"} <= header):
            return "geode"
        if {"path", "object", "region"} <= header:
            return "manifest"
        raise ValueError(
            f"cannot tell what {p} is from its columns {sorted(header)}; expected GeoDE's "
            f"(file_path, object, region, ip_country), DollarStreet's (imageRelPath, topics, region.id, "
            f"country.name) or a manifest's (path, object, region[, country]); or pass kind= one of "
            f"{list(KINDS)}"
        )
    raise ValueError(f"reference path {p} does not exist (kinds: {list(KINDS)}; 'synthetic' needs no path)")


def load_reference(
    path: str | os.PathLike,
    *,
    kind: str | None = None,
    name: str | None = None,
    objects: Iterable[str] | None = None,
    regions: Iterable[str] | None = None,
    balance: bool | None = None,
    per_group: int | None = None,
    seed: int = 0,
    sampler: str = "dig_in",
    check_files: bool = True,
) -> ReferenceSet:
    """Load reference data of any kind, detected from PATH unless ``kind`` is given.

    Args:
        path: a dataset folder or metadata CSV; ``synthetic`` (or any folder with
            ``kind="synthetic"``, used as the cache) for the generated set.
        kind: one of :data:`KINDS`; default :func:`detect_kind`.
        name: name of the set; default the loader's (the kind; a manifest's file stem).
        objects, regions: restrict to these object codes and region slugs.
        balance: equal images per object-region; default on for GeoDE only (as in DIG In).
            Giving ``per_group`` turns it on. Synthetic sets are balanced by construction.
        per_group: images per object-region when balancing; default the smallest group.
        seed: seed of the balancing (and of the synthetic images).
        sampler: how a group is sampled when balancing (see :func:`balance_records`).
        check_files: check that every listed image exists.

    Raises:
        ValueError: unknown kind, or any loader error (see the loaders).
    """
    if kind is None:
        kind = detect_kind(path)
    elif kind not in KINDS:
        raise ValueError(f"unknown reference kind {kind!r}; choose from {list(KINDS)}")
    if kind == "synthetic":
        folder = None if str(path) == "synthetic" and not Path(path).exists() else Path(path)
        synth_kwargs: dict = dict(objects=objects, regions=regions, seed=seed, folder=folder)
        if per_group is not None:
            synth_kwargs["per_group"] = per_group
        if name is not None:
            synth_kwargs["name"] = name
        return synthetic_reference(**synth_kwargs)
    loader = {"geode": load_geode, "dollarstreet": load_dollarstreet, "manifest": load_manifest}[kind]
    kwargs: dict = dict(objects=objects, regions=regions, per_group=per_group, seed=seed, sampler=sampler,
                        check_files=check_files)
    if balance is not None:
        kwargs["balance"] = balance
    if name is not None:
        kwargs["name"] = name
    return loader(path, **kwargs)


def reference_from_option(value: str, **kwargs) -> ReferenceSet:
    """Parse ``--t2i-reference NAME=PATH`` and load it; errors are prefixed with the option.

    Keyword arguments go to :func:`load_reference`.
    """
    name, path = parse_reference_option(value)
    try:
        return load_reference(path, name=name, **kwargs)
    except ValueError as exc:
        raise ValueError(f"--t2i-reference {value}: {exc}") from exc


# ---------------------------------------------------------------------------------------------
# Loaders


def load_geode(
    path: str | os.PathLike,
    *,
    name: str = "geode",
    objects: Iterable[str] | None = None,
    regions: Iterable[str] | None = None,
    balance: bool = True,
    per_group: int | None = None,
    seed: int = 0,
    sampler: str = "dig_in",
    check_files: bool = True,
) -> ReferenceSet:
    """Load GeoDE as released: ``index.csv`` (one row per image) and the ``images/`` folder.

    Columns: ``file_path`` (relative to ``images/``, or to the CSV's folder), ``object`` (GeoDE's
    code, e.g. ``cooking_pot``), ``region`` (``Africa``, ``Americas``, ``EastAsia``, ``Europe``,
    ``SouthEastAsia``, ``WestAsia``) and ``ip_country``; aliases in :data:`GEODE_COLUMNS`.
    GeoDE has 40 objects; rows of the 13 that DIG In does not use are skipped (counted in the
    description). Balanced by default: DIG In samples the same number per object-region to
    remove correlations between objects and regions.

    Args:
        path: the GeoDE folder or its index CSV.
        objects: GeoDE object codes; default DIG In's 27.
        regions: region slugs; default all six.
        balance, per_group, seed, sampler: see :func:`balance_records` (balancing draws from each group's
            rows in ``index.csv`` order, as DIG In's ``sample_df`` draws from its DataFrame's order).
        check_files: check that every listed image exists.

    Raises:
        ValueError: missing columns, unknown region values, missing images, an object-region
            group with no images, or an impossible ``per_group``. Messages name the file, the
            lines and the bad values, and list the valid choices.
    """
    csv_path = _locate(path, "geode", (GEODE_INDEX,))
    wanted_objects = _choose(objects, tuple(GEODE_OBJECTS), "GeoDE object", slug=True)
    wanted_regions = _choose(regions, GEODE_REGION_SLUGS, "GeoDE region")
    bases = [csv_path.parent / "images", csv_path.parent]
    problems = _Problems(csv_path)
    records: list[Record] = []
    skipped: dict[str, int] = {}
    for line, row in _read_rows(csv_path, GEODE_COLUMNS, problems):
        region = _GEODE_REGION_VALUES.get(_compact(row["region"]))
        if region is None:
            problems.unknown("region", row["region"], line, ["Africa", "Americas", "EastAsia", "Europe",
                                                             "SouthEastAsia", "WestAsia"])
            continue
        obj = slugify(row["object"])
        if obj not in wanted_objects or region not in wanted_regions:
            if obj not in GEODE_OBJECTS:
                skipped[obj] = skipped.get(obj, 0) + 1
            continue
        file = _resolve(row["path"], bases, line, problems, check_files)
        if file is not None:
            records.append(Record(file, obj, region, row.get("country") or None))
    problems.raise_if_any()
    _check_pairs(records, wanted_objects, wanted_regions, csv_path)
    note = (
        f"GeoDE from {csv_path}: {len(wanted_objects)} objects x {len(wanted_regions)} regions, "
        f"{len(records)} images"
    )
    if skipped:
        note += f"; skipped {sum(skipped.values())} images of {len(skipped)} objects DIG In does not use"
    return _finish(name, records, note, "geode", os.path.abspath(csv_path.parent), balance or per_group is not None,
                   per_group, seed, sampler)


def load_dollarstreet(
    path: str | os.PathLike,
    *,
    name: str = "dollarstreet",
    objects: Iterable[str] | None = None,
    regions: Iterable[str] | None = None,
    balance: bool = False,
    per_group: int | None = None,
    seed: int = 0,
    sampler: str = "dig_in",
    require_all_regions: bool = True,
    check_files: bool = True,
) -> ReferenceSet:
    """Load DollarStreet from its metadata CSV (``images_v2.csv`` of the released dataset).

    Columns: ``imageRelPath`` (relative to the CSV's folder), ``topics`` (a list such as
    ``['toothbrush']``, or one topic), ``region.id`` (``af``, ``am``, ``as``, ``eu``; region names
    also work) and ``country.name``; aliases in :data:`DOLLARSTREET_COLUMNS`. Topics keep
    DollarStreet's own vocabulary, slugified (``"Stove/hob"`` -> ``stove_hob``). As in DIG In:
    images with several topics are dropped, only object-like topics are kept (default
    :data:`DOLLARSTREET_OBJECTS`), objects missing from any region are dropped, and the
    imbalanced distribution is kept (``balance=False``) because balancing would leave too few
    images per region.

    Args:
        path: the folder holding ``images_v2.csv`` or the CSV itself.
        objects: topic slugs to keep; default :data:`DOLLARSTREET_OBJECTS`.
        regions: slugs among ``africa``, ``americas``, ``asia``, ``europe``; default all four.
        balance, per_group, seed, sampler: see :func:`balance_records` (rows in file order).
        require_all_regions: drop objects without images in every selected region.
        check_files: check that every kept image exists.

    Raises:
        ValueError: missing columns, unknown region values, unreadable topics, missing images,
            a selected region or an explicitly requested object with no images.
    """
    csv_path = _locate(path, "dollarstreet", DOLLARSTREET_CSVS)
    explicit_objects = objects is not None
    wanted_objects = (
        {slugify(o) for o in _as_list(objects, "objects")} if explicit_objects else set(DOLLARSTREET_OBJECTS)
    )
    wanted_regions = _choose(regions, tuple(DOLLARSTREET_REGIONS), "DollarStreet region")
    problems = _Problems(csv_path)
    records: list[tuple[int, Record]] = []
    multi = other = 0
    seen_topics: set[str] = set()
    for line, row in _read_rows(csv_path, DOLLARSTREET_COLUMNS, problems):
        region = _DOLLARSTREET_REGION_VALUES.get(_compact(row["region"]))
        if region is None:
            problems.unknown("region", row["region"], line, ["af", "am", "as", "eu"])
            continue
        topics = _parse_topics(row["object"])
        if topics is None:
            problems.unknown("topics", row["object"], line, ["a list such as ['toothbrush']", "one topic"])
            continue
        slugs = sorted({slugify(t) for t in topics if slugify(t)})
        seen_topics.update(slugs)
        if len(slugs) != 1:
            multi += len(slugs) > 1
            continue
        if slugs[0] not in wanted_objects or region not in wanted_regions:
            other += 1
            continue
        records.append((line, Record(row["path"], slugs[0], region, row.get("country") or None)))
    problems.raise_if_any()
    # Objects in every region first, so files of dropped objects are not checked.
    dropped: list[str] = []
    if require_all_regions:
        regions_of: dict[str, set[str]] = {}
        for _, rec in records:
            regions_of.setdefault(rec.object, set()).add(rec.region)
        dropped = sorted(o for o, rs in regions_of.items() if not set(wanted_regions) <= rs)
        records = [(n, r) for n, r in records if r.object not in dropped]
    resolved = []
    for line, rec in records:
        file = _resolve(rec.path, [csv_path.parent], line, problems, check_files)
        if file is not None:
            resolved.append(Record(file, rec.object, rec.region, rec.country))
    problems.raise_if_any()
    present_regions = {r.region for r in resolved}
    empty = [r for r in wanted_regions if r not in present_regions]
    if empty:
        raise ValueError(f"{csv_path}: no usable images for region(s) {empty}; regions with images: "
                         f"{_ordered_regions(present_regions)}")
    if explicit_objects:
        present = {r.object for r in resolved}
        missing = sorted(wanted_objects - present)
        if missing:
            why = " (or not in every region; pass require_all_regions=False)" if require_all_regions else ""
            raise ValueError(
                f"{csv_path}: no single-topic images for object(s) {missing}{why}; topics in the file "
                f"include {sorted(seen_topics)[:40]}"
            )
    note = (
        f"DollarStreet from {csv_path}: {len({r.object for r in resolved})} topics x "
        f"{len(wanted_regions)} regions, {len(resolved)} images (original distribution); dropped "
        f"{multi} multi-topic images, {other} images of other topics or regions"
    )
    if dropped:
        note += f", {len(dropped)} objects not in every region"
    return _finish(name, resolved, note, "dollarstreet", os.path.abspath(csv_path.parent),
                   balance or per_group is not None, per_group, seed, sampler)


def load_manifest(
    path: str | os.PathLike,
    *,
    name: str | None = None,
    objects: Iterable[str] | None = None,
    regions: Iterable[str] | None = None,
    balance: bool = False,
    per_group: int | None = None,
    seed: int = 0,
    sampler: str = "dig_in",
    check_files: bool = True,
) -> ReferenceSet:
    """Load a manifest CSV with columns ``path,object,region[,country]``.

    Paths are relative to the CSV's folder (absolute paths are kept). Objects are GeoDE codes or
    DollarStreet topic slugs (:data:`KNOWN_OBJECTS`), spelled as codes or names ("cooking pot").
    Regions are slugs of :data:`REGION_SLUGS` or GeoDE/DollarStreet names ("EastAsia").

    Args:
        path: the CSV, or a folder holding ``manifest.csv``.
        name: name of the set; default the CSV's file stem.
        objects, regions: keep only these; each must have images.
        balance, per_group, seed, sampler: see :func:`balance_records` (rows in file order).
        check_files: check that every listed image exists.

    Raises:
        ValueError: missing columns, unknown objects or regions (with line numbers and the valid
            choices), missing images, a requested object or region with no images, an empty set.
    """
    csv_path = _locate(path, "manifest", (MANIFEST_CSV,))
    wanted_objects = _choose(objects, KNOWN_OBJECTS, "object", slug=True) if objects is not None else None
    wanted_regions = _choose(regions, REGION_SLUGS, "region") if regions is not None else None
    problems = _Problems(csv_path)
    records: list[Record] = []
    for line, row in _read_rows(csv_path, MANIFEST_COLUMNS, problems):
        obj = slugify(row["object"])
        region = _MANIFEST_REGION_VALUES.get(_compact(row["region"]))
        bad = False
        if obj not in KNOWN_OBJECTS:
            problems.unknown("object", row["object"], line, KNOWN_OBJECTS)
            bad = True
        if region is None:
            problems.unknown("region", row["region"], line, REGION_SLUGS)
            bad = True
        if bad:
            continue
        if wanted_objects and obj not in wanted_objects:
            continue
        if wanted_regions and region not in wanted_regions:
            continue
        file = _resolve(row["path"], [csv_path.parent], line, problems, check_files)
        if file is not None:
            records.append(Record(file, obj, region, row.get("country") or None))
    problems.raise_if_any()
    if not records:
        raise ValueError(
            f"{csv_path}: no images left of {problems.rows} data rows "
            f"(objects={wanted_objects}, regions={wanted_regions})"
        )
    for field_name, wanted, present in (
        ("object", wanted_objects, {r.object for r in records}),
        ("region", wanted_regions, {r.region for r in records}),
    ):
        if wanted and set(wanted) - present:
            raise ValueError(f"{csv_path}: no images for {field_name}(s) {sorted(set(wanted) - present)}; "
                             f"present: {sorted(present)}")
    note = (
        f"manifest {csv_path}: {len({r.object for r in records})} objects x "
        f"{len({r.region for r in records})} regions, {len(records)} images"
    )
    root = os.path.abspath(csv_path.parent)
    return _finish(name or csv_path.stem, records, note, "manifest", root, balance or per_group is not None,
                   per_group, seed, sampler)


# ---------------------------------------------------------------------------------------------
# Balancing


BALANCE_SAMPLERS = ("dig_in", "project")


def balance_records(records: Sequence[Record], per_group: int | None = None, seed: int = 0,
                    sampler: str = "dig_in") -> list[Record]:
    """Sample the same number of records from every (object, region) group, without replacement.

    This is DIG In's balancing of GeoDE (``utils.sample_df``): a fixed number of images per
    object-region, so that object and region are not correlated. Two samplers:

    * ``"dig_in"`` (default): DIG In's code, ``random.seed(seed); random.sample(list(hold.index), n)``
      per group, i.e. ``random.Random(seed).sample(rows, n)`` over the group's rows **in the order
      given** (a loader passes its file order, as DIG In's DataFrame order). The choice depends on
      that order and on the seed only (DIG In reseeds per group).
    * ``"project"``: each group with its own RNG seeded from ``seed`` and the group's labels, over
      the group sorted by path; the result does not depend on the input order.

    The chosen records keep their input order.

    Args:
        records: the records to balance.
        per_group: images per group; default the size of the smallest group.
        seed: the sampling seed.
        sampler: ``"dig_in"`` or ``"project"``.

    Returns:
        A subset of ``records`` with exactly ``per_group`` records in every group.

    Raises:
        ValueError: ``records`` is empty, ``per_group`` is not a positive integer, some group
            has fewer than ``per_group`` records (the message names them), or an unknown sampler.

    Example:
        >>> recs = [Record(f"/a/p{i}.png", "bag", "africa") for i in range(5)]
        >>> [r.path for r in balance_records(recs, per_group=3, seed=42)]  # DIG In's draw: p0, p4, p2
        ['/a/p0.png', '/a/p2.png', '/a/p4.png']
        >>> recs += [Record(f"/e/{i}.png", "bag", "europe") for i in range(3)]
        >>> out = balance_records(recs, seed=1)
        >>> [r.region for r in out].count("africa"), len(out)
        (3, 6)
    """
    if sampler not in BALANCE_SAMPLERS:
        raise ValueError(f"sampler must be one of {BALANCE_SAMPLERS}, got {sampler!r}")
    records = list(records)
    if not records:
        raise ValueError("balance_records: no records to balance")
    groups: dict[tuple[str, str], list[int]] = {}
    for i, rec in enumerate(records):
        groups.setdefault((rec.object, rec.region), []).append(i)
    smallest = min(len(v) for v in groups.values())
    if per_group is None:
        per_group = smallest
    if isinstance(per_group, bool) or not isinstance(per_group, int) or per_group < 1:
        raise ValueError(f"per_group must be a positive integer, got {per_group!r}")
    if per_group > smallest:
        short = sorted((len(v), k) for k, v in groups.items() if len(v) < per_group)
        listed = ", ".join(f"{o}/{r} ({n})" for n, (o, r) in short[:_SHOW])
        more = f" and {len(short) - _SHOW} more" if len(short) > _SHOW else ""
        raise ValueError(
            f"per_group={per_group} is more than {len(short)} object-region group(s) hold: {listed}{more}; "
            f"use per_group <= {smallest} (the smallest group) or leave it unset "
            f"(--t2i-balance-per-group smallest)"
        )
    chosen: set[int] = set()
    for (obj, region), idx in groups.items():
        if sampler == "dig_in":
            chosen.update(random.Random(seed).sample(idx, per_group))
        else:
            idx = sorted(idx, key=lambda i: (records[i].path, i))
            rng = random.Random(_stable_int("balance", seed, obj, region))
            chosen.update(rng.sample(idx, per_group))
    return [rec for i, rec in enumerate(records) if i in chosen]


def _balance_note(records: Sequence[Record], seed: int, sampler: str) -> str:
    groups = {(r.object, r.region) for r in records}
    n = len(records) // max(1, len(groups))
    return f"balanced to {n} per object-region (seed {seed}, {sampler} sampler)"


def _finish(name: str, records: list[Record], note: str, kind: str, root: str | None, balance: bool,
            per_group: int | None, seed: int, sampler: str) -> ReferenceSet:
    """The loaded set: balanced over the records in file order when asked, then sorted."""
    if balance:
        records = balance_records(records, per_group=per_group, seed=seed, sampler=sampler)
        note = f"{note}; {_balance_note(records, seed, sampler)}"
    return ReferenceSet(name, _sorted(records), False, note, kind, root)


# ---------------------------------------------------------------------------------------------
# Images


def open_image(record: Record) -> Image.Image:
    """Decode a reference image as RGB; synthetic URIs are rendered.

    Raises:
        ValueError: the file is missing, unreadable or corrupt (naming the file and its labels).
    """
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
    """Draw one synthetic reference image, a pure function of its arguments.

    The region sets the background palette (hue, brightness) and the object the foreground
    pattern (shape kind, count, colour), so region and object groups differ in simple image
    statistics; positions and sizes vary per image, so groups are not single points either.

    Example:
        >>> render_synthetic("bag", "africa", 0).size
        (64, 64)
    """
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


def synthetic_reference(
    objects: Iterable[str] | None = None,
    regions: Iterable[str] | None = None,
    per_group: int = 4,
    seed: int = 0,
    size: int = 64,
    *,
    folder: str | os.PathLike | None = None,
    name: str = "synthetic",
) -> ReferenceSet:
    """A small generated reference set, so the gates run offline. It is not real data.

    Every object-region group gets ``per_group`` images drawn by :func:`render_synthetic`; the
    same arguments give byte-identical PNGs. Without ``folder`` nothing is drawn until
    :func:`open_image` renders a record's ``synthetic:`` URI. With ``folder`` the PNGs are written
    to ``folder/seed{seed}-{size}px/{region}/{object}/{index:04d}.png``, each atomically (temporary
    file, then ``os.replace``), so concurrent workers never read half a file; files already there
    with the right bytes are left alone.

    The set is marked ``synthetic=True``, its description says so, and its name contains
    "synthetic" (``name`` gets a ``-synthetic`` suffix otherwise).

    Args:
        objects: object codes (GeoDE's, or DollarStreet topic slugs); default GeoDE's 27.
        regions: region slugs; default GeoDE's six.
        per_group: images per object-region.
        seed: drawing seed.
        size: image side in pixels.
        folder: cache folder to write PNGs into; None keeps the set virtual.
        name: name of the set.

    Raises:
        ValueError: unknown objects or regions (listing the choices), bad ``per_group`` or ``size``.

    Example:
        >>> ref = synthetic_reference(["bag", "car"], ["africa", "europe"], per_group=3, seed=7)
        >>> len(ref), ref.synthetic, ref.name
        (12, True, 'synthetic')
        >>> open_image(ref.records[0]).size
        (64, 64)
    """
    objs = list(GEODE_OBJECTS) if objects is None else _choose(objects, KNOWN_OBJECTS, "object", slug=True)
    regs = list(GEODE_REGION_SLUGS) if regions is None else _choose(regions, REGION_SLUGS, "region")
    if isinstance(per_group, bool) or not isinstance(per_group, int) or per_group < 1:
        raise ValueError(f"per_group must be a positive integer, got {per_group!r}")
    if not isinstance(size, int) or size < 8:
        raise ValueError(f"size must be an integer >= 8 pixels, got {size!r}")
    if "synthetic" not in name:
        name = f"{name}-synthetic"
    sub = f"seed{seed}-{size}px"
    root = Path(folder) if folder is not None else None
    records = []
    for region in regs:
        for obj in objs:
            for i in range(per_group):
                rel = f"{sub}/{region}/{obj}/{i:04d}.png"
                if root is None:
                    path = f"{_SYNTHETIC_SCHEME}/{rel}"
                else:
                    target = root / rel
                    atomic_write_bytes(target, skip_if_same=True, data=_png_bytes(render_synthetic(obj, region, i, seed, size)))
                    path = os.path.abspath(target)
                records.append(Record(path, obj, region, None))
    where = f"written to {root}" if root is not None else "rendered in memory"
    description = (
        f"SYNTHETIC stand-in reference data (not real images): {len(objs)} objects x {len(regs)} "
        f"regions x {per_group} generated {size}px images, seed {seed}, {where}"
    )
    return ReferenceSet(name, records, True, description, "synthetic",
                        os.path.abspath(root) if root is not None else _SYNTHETIC_SCHEME)


# ---------------------------------------------------------------------------------------------
# Helpers


class _Problems:
    """Collects every bad value and missing file of one CSV so a single error lists them all."""

    def __init__(self, source: Path):
        self.source = source
        self.unknowns: dict[str, tuple[dict[str, list[int]], Sequence[str]]] = {}
        self.missing: list[tuple[int | None, str]] = []
        self.empties: dict[str, list[int]] = {}
        self.rows = 0  # data rows read, counted by _read_rows

    def unknown(self, field: str, value: str, line: int, choices: Sequence[str]) -> None:
        values, _ = self.unknowns.setdefault(field, ({}, choices))
        values.setdefault(value, []).append(line)

    def empty(self, field: str, line: int) -> None:
        self.empties.setdefault(field, []).append(line)

    def raise_if_any(self) -> None:
        parts = []
        for field, lines in self.empties.items():
            at = ", ".join(str(n) for n in lines[:_SHOW])
            at += f" and {len(lines) - _SHOW} more" if len(lines) > _SHOW else ""
            parts.append(f"field {field!r} is empty on line(s) {at}")
        for field, (values, choices) in self.unknowns.items():
            shown = []
            for value, lines in list(values.items())[:_SHOW]:
                at = ", ".join(str(n) for n in lines[:3]) + (", ..." if len(lines) > 3 else "")
                shown.append(f"{value!r} (line{'s' if len(lines) > 1 else ''} {at})")
            more = f" and {len(values) - _SHOW} more" if len(values) > _SHOW else ""
            total = sum(len(v) for v in values.values())
            choice_text = list(choices)
            if len(choices) > 40:
                choice_text = f"{list(choices)[:40]} ... ({len(choices)} in all)"
            parts.append(
                f"field {field!r}: {total} row(s) with unknown value(s) {', '.join(shown)}{more}; "
                f"choose from {choice_text}"
            )
        if self.missing:
            shown = ", ".join(
                (f"{p} (line {n})" if n is not None else p) for n, p in self.missing[:_SHOW]
            )
            more = f" and {len(self.missing) - _SHOW} more" if len(self.missing) > _SHOW else ""
            parts.append(f"{len(self.missing)} listed image(s) are missing: {shown}{more}")
        if parts:
            raise ValueError(f"{self.source} ({self.rows} data rows): " + "; ".join(parts))


def _read_header(path: Path) -> list[str]:
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            return next(csv.reader(f), [])
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ValueError(f"cannot read CSV {path}: {exc}") from exc


def _read_rows(
    path: Path, columns: dict[str, tuple[str, ...]], problems: _Problems
) -> Iterator[tuple[int, dict[str, str]]]:
    """Yield ``(line, {field: value})`` for each row, mapping column aliases to field names.

    Rows with an empty required field are reported through ``problems``.
    """
    try:
        f = open(path, newline="", encoding="utf-8-sig")
    except OSError as exc:
        raise ValueError(f"cannot read CSV {path}: {exc}") from exc
    with f:
        reader = csv.reader(f)
        try:
            header = next(reader)
        except StopIteration:
            raise ValueError(
                f"{path} is empty; expected a header row with columns for {list(columns)}"
            ) from None
        except (csv.Error, UnicodeDecodeError) as exc:
            raise ValueError(f"cannot read CSV {path}: {exc}") from exc
        index = _map_columns(path, header, columns)
        try:
            for row in reader:
                if not any(cell.strip() for cell in row):
                    continue
                line = reader.line_num
                problems.rows += 1
                values = {f: (row[i].strip() if i < len(row) else "") for f, i in index.items()}
                empty = [f for f in _REQUIRED_FIELDS if not values[f]]
                for f in empty:
                    problems.empty(f, line)
                if not empty:
                    yield line, values
        except (csv.Error, UnicodeDecodeError) as exc:
            raise ValueError(f"cannot read CSV {path} near line {reader.line_num}: {exc}") from exc


def _map_columns(path: Path, header: list[str], columns: dict[str, tuple[str, ...]]) -> dict[str, int]:
    stripped = [h.strip() for h in header]
    lower = [h.lower() for h in stripped]
    index: dict[str, int] = {}
    missing = []
    for field, aliases in columns.items():
        for alias in aliases:
            if alias in stripped:
                index[field] = stripped.index(alias)
                break
            if alias.lower() in lower:
                index[field] = lower.index(alias.lower())
                break
        else:
            if field in _REQUIRED_FIELDS:
                missing.append(f"{field} (one of {list(aliases)})")
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(missing)}; found columns {stripped}")
    return index


def _locate(path: str | os.PathLike, kind: str, names: Sequence[str]) -> Path:
    """The metadata CSV of ``path``: the path itself if a file, else the first of ``names`` in it."""
    p = Path(path)
    if p.is_file():
        return p
    if p.is_dir():
        for name in names:
            if (p / name).is_file():
                return p / name
        raise ValueError(f"{kind} folder {p} holds none of {list(names)}; point PATH at the metadata CSV")
    raise ValueError(f"{kind} reference path {p} does not exist")


def _resolve(
    rel: str, bases: Sequence[Path], line: int | None, problems: _Problems, check: bool
) -> str | None:
    """Absolute path of a listed image: the first base it exists under (or the first base)."""
    rel = rel.replace("\\", "/")
    p = Path(rel)
    if p.is_absolute():
        candidates = [p]
    else:
        candidates = [base / p for base in bases]
    if not check:
        return os.path.abspath(candidates[0])
    for c in candidates:
        if c.is_file():
            return os.path.abspath(c)
    problems.missing.append((line, str(candidates[0])))
    return None


def _check_pairs(records: list[Record], objects: Sequence[str], regions: Sequence[str], source: Path) -> None:
    present = {(r.object, r.region) for r in records}
    empty = [(o, r) for o in objects for r in regions if (o, r) not in present]
    if empty:
        listed = ", ".join(f"{o}/{r}" for o, r in empty[:_SHOW])
        more = f" and {len(empty) - _SHOW} more" if len(empty) > _SHOW else ""
        raise ValueError(
            f"{source}: no images for {len(empty)} object-region group(s): {listed}{more}; every selected "
            f"object needs images in every selected region (narrow objects=/regions= or fix the file)"
        )


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


def _parse_topics(raw: str) -> list[str] | None:
    """DollarStreet's ``topics``: a Python list literal ("['toothbrush']") or one plain topic."""
    raw = raw.strip()
    if raw.startswith("["):
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            return None
        if not isinstance(value, (list, tuple)):
            return None
        return [str(v) for v in value]
    return [raw] if raw else []


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


def _png_bytes(image: Image.Image) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


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


__all__ = [
    "DOLLARSTREET_COLUMNS", "DOLLARSTREET_OBJECTS", "DOLLARSTREET_REGIONS", "GEODE_COLUMNS",
    "GEODE_REGION_SLUGS", "KINDS", "KNOWN_OBJECTS", "MANIFEST_COLUMNS", "REGION_SLUGS",
    "Record", "ReferenceSet", "balance_records", "detect_kind", "load_dollarstreet", "load_geode",
    "load_manifest", "load_reference", "open_image", "parse_reference_option",
    "reference_from_option", "render_synthetic", "synthetic_reference",
]
