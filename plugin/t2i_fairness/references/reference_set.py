"""A reference set: real images labelled with an object and a region, as DIG In uses them, and its
balancing to the same number of images per object-region.
"""

from __future__ import annotations

import hashlib
import os
import random
from dataclasses import dataclass
from functools import cached_property
from typing import Sequence

from t2i_fairness.references.images import open_image
from t2i_fairness.references.labels import Record, _SHOW, _ordered_regions, _relative, _stable_int



@dataclass(frozen=True)
class ReferenceSet:
    """A named, labelled set of reference images, grouped the ways DIG In's indicators need.

    Attributes:
        synthetic: True for generated stand-in data; reports must never present it as real.
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
        """How many images of each object ``region`` has: the mix DIG In samples ``{object}`` generations to."""
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
        """A copy with the same number of images in every (object, region) group (:func:`balance_records`)."""
        records = balance_records(self.records, per_group=per_group, seed=seed, sampler=sampler)
        note = _balance_note(records, seed, sampler)
        return ReferenceSet(self.name, records, self.synthetic, f"{self.description}; {note}", self.kind, self.root)

    @cached_property
    def fingerprint(self) -> str:
        """A content hash of the manifest (relative paths, labels, sizes; no times): 16 hex digits."""
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
        """Decode every image (or the first ``limit``) and report all that fail at once, before a long run."""
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


BALANCE_SAMPLERS = ("dig_in", "project")


def balance_records(records: Sequence[Record], per_group: int | None = None, seed: int = 0,
                    sampler: str = "dig_in") -> list[Record]:
    """Sample the same number of records from every (object, region) group, without replacement.

    ``sampler="dig_in"`` is DIG In's ``random.Random(seed).sample`` over each group in input order;
    ``"project"`` seeds each group from its labels, independent of input order.

    Example:
        >>> recs = [Record(f"/a/p{i}.png", "bag", "africa") for i in range(5)]
        >>> [r.path for r in balance_records(recs, per_group=3, seed=42)]  # DIG In's draw: p0, p4, p2
        ['/a/p0.png', '/a/p2.png', '/a/p4.png']
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
