"""Loaders of reference sets: GeoDE, DollarStreet's metadata CSV, a manifest CSV, and ``--t2i-reference``."""

from __future__ import annotations

import ast
import csv
import os
import re
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from t2i_fairness.references.labels import (
    DOLLARSTREET_OBJECTS,
    DOLLARSTREET_REGIONS,
    GEODE_REGION_SLUGS,
    KINDS,
    KNOWN_OBJECTS,
    REGION_SLUGS,
    Record,
    _SHOW,
    _as_list,
    _choose,
    _ordered_regions,
    _sorted,
)
from t2i_fairness.references.reference_set import ReferenceSet, _balance_note, balance_records
from t2i_fairness.references.synthetic import synthetic_reference
from t2i_fairness.vocab.geode import GEODE_OBJECTS, slugify



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

_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def parse_reference_option(value: str) -> tuple[str, Path]:
    """Split a ``--t2i-reference NAME=PATH`` value into ``(name, path)``; PATH may contain ``=``.

    Example:
        >>> parse_reference_option("geode=/data/geode")
        ('geode', PosixPath('/data/geode'))
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
    """Guess which loader reads PATH: ``index.csv`` GeoDE, ``images_v2.csv`` DollarStreet, ``manifest.csv``."""
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
        path: a dataset folder or metadata CSV; ``synthetic`` for the generated set.
        balance: equal images per object-region; default on for GeoDE only (as in DIG In).
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
    """Load GeoDE as released: ``index.csv`` and ``images/``; DIG In's objects, balanced as its ``sample_df``."""
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
    """Load DollarStreet from ``images_v2.csv``, filtered as DIG In does (single object-like topics), not balanced."""
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
    """Load a manifest CSV with columns ``path,object,region[,country]`` (paths relative to the CSV)."""
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


def _finish(name: str, records: list[Record], note: str, kind: str, root: str | None, balance: bool,
            per_group: int | None, seed: int, sampler: str) -> ReferenceSet:
    """The loaded set: balanced over the records in file order when asked, then sorted."""
    if balance:
        records = balance_records(records, per_group=per_group, seed=seed, sampler=sampler)
        note = f"{note}; {_balance_note(records, seed, sampler)}"
    return ReferenceSet(name, _sorted(records), False, note, kind, root)


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
