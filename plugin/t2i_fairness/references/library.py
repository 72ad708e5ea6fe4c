"""Reference sets as the session uses them: loaded from ``--t2i-reference``, encoded once, with each
group's k-NN radii cached so a second model (or run) re-encodes no reference image.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from t2i_fairness.base.cache import content_key
from t2i_fairness.metrics.manifold import ReferenceManifold
from t2i_fairness.references.sets import Record, ReferenceSet, open_image, reference_from_option, synthetic_reference

SYNTHETIC_NAME = "synthetic"
SYNTHETIC_PER_GROUP = 10


@dataclass(frozen=True)
class ReferenceImage:
    """A reference image with the cache key of its content (path, size and mtime for files)."""

    record: Record
    key: str

    def load(self):
        return open_image(self.record)


def reference_images(ref: ReferenceSet, records: Sequence[Record] | None = None) -> list[ReferenceImage]:
    out = []
    for rec in ref.records if records is None else records:
        if rec.path.startswith("synthetic:"):
            key = content_key(reference=rec.path)
        else:
            st = os.stat(rec.path)
            key = content_key(reference=rec.path, size=st.st_size, mtime_ns=st.st_mtime_ns)
        out.append(ReferenceImage(rec, key))
    return out


@functools.lru_cache(maxsize=8)
def load_references(references: tuple[tuple[str, str], ...], objects: tuple[str, ...],
                    per_group: int | None = None, seed: int = 0, sampler: str = "dig_in",
                    synthetic: tuple[int, tuple[str, ...] | None] = (SYNTHETIC_PER_GROUP, None)) -> dict[str, ReferenceSet]:
    """``--t2i-reference`` sets by name; with none given, a small synthetic GeoDE-labelled set.

    Args:
        references: ``(name, path)`` pairs.
        per_group, seed, sampler: GeoDE's balancing options.
        synthetic: the synthetic set's images per object-region and its regions (``None``: GeoDE's six).
    """
    if not references:
        size, regions = synthetic
        ref = synthetic_reference(list(objects), None if regions is None else list(regions), per_group=size, seed=0,
                                  name=SYNTHETIC_NAME)
        return {SYNTHETIC_NAME: ref}
    from t2i_fairness.references.sets import detect_kind

    out = {}
    for name, path in references:
        try:
            geode = detect_kind(path) == "geode"
        except ValueError:
            geode = False  # reference_from_option reports it
        balance = dict(per_group=per_group, seed=seed, sampler=sampler) if geode else dict(seed=0)
        ref = reference_from_option(f"{name}={path}", **balance)
        if ref.kind != "dollarstreet":
            keep = [r for r in ref.records if r.object in objects]
            if not keep:
                raise ValueError(f"--t2i-reference {name}={path}: none of the run's objects {list(objects)} is in it")
            ref = ReferenceSet(ref.name, tuple(keep), ref.synthetic, ref.description, ref.kind, ref.root)
        out[name] = ref
    return out


class ReferenceFeatures:
    """Features and manifolds of one reference set under one encoder, computed once and cached.

    ``scope="set"`` (DIG In's code) de-duplicates the whole set before grouping; ``"group"`` each group.
    """

    def __init__(self, bench, ref: ReferenceSet, encoder, nearest_k: int = 3, dedupe: str = "drop_all",
                 scope: str = "set"):
        if scope not in ("set", "group"):
            raise ValueError(f"scope must be 'set' or 'group', got {scope!r}")
        self.bench, self.ref, self.encoder = bench, ref, encoder
        self.nearest_k, self.dedupe, self.scope = nearest_k, dedupe, scope
        self.images = reference_images(ref)
        self._row = {img.record: i for i, img in enumerate(self.images)}
        self._features: np.ndarray | None = None
        self._survivors: set | None = None

    @property
    def features(self) -> np.ndarray:
        if self._features is None:
            self._features = self.bench.features(self.encoder, self.images, desc=f"encoding reference {self.ref.name}")
        return self._features

    def rows(self, records: Sequence[Record]) -> np.ndarray:
        return self.features[[self._row[r] for r in records]]

    @property
    def survivors(self) -> set:
        """The records left after the set-level de-duplication (``scope="set"``); every record otherwise."""
        if self._survivors is None:
            records = [img.record for img in self.images]
            if self.scope in ("set", "templates") and records:
                from t2i_fairness.metrics.manifold import dedupe_index

                keep = dedupe_index(self.features, self.dedupe, groups=[r.region for r in records])
                self._survivors = {records[i] for i in keep}
            else:
                self._survivors = set(records)
        return self._survivors

    def kept(self, records: Sequence[Record]) -> list[Record]:
        """``records`` without those the set-level de-duplication removed (order kept)."""
        alive = self.survivors
        return [r for r in records if r in alive]

    def manifold(self, group: str, records: Sequence[Record]) -> ReferenceManifold:
        """The group's manifold (features + radii), read from the cache when it was built before."""
        if self.scope in ("set", "templates"):
            records, dedupe = self.kept(records), "none"  # duplicates already left the whole set
        else:
            dedupe = self.dedupe
        key = content_key(reference=self.ref.fingerprint, encoder=self.encoder.fingerprint, group=group,
                          records=sorted(r.path for r in records), k=self.nearest_k, dedupe=dedupe)
        return manifold_memo(self.bench).get(key, lambda: ReferenceManifold.build(
            self.rows(records), self.nearest_k, dedupe=dedupe, device=self.bench.device,
            group=f"{self.ref.name}/{group}"))


def manifold_memo(bench):
    """Cached k-NN manifolds (features + radii); counted as ``radii`` in the summary."""
    return bench.memo("manifolds", "", ".npz", lambda m: m.to_bytes(), _decode_manifold, label="radii")


def _decode_manifold(data: bytes) -> ReferenceManifold:
    from t2i_fairness.base.cache import CorruptEntry

    try:
        return ReferenceManifold.from_bytes(data)
    except Exception as exc:  # unreadable: reported and rebuilt
        raise CorruptEntry(f"{type(exc).__name__}: {exc}") from exc


def references_for(options) -> dict[str, ReferenceSet]:
    """The run's reference sets (``--t2i-reference``, else the synthetic one), loaded once per process;
    an OptionError naming the file and the culprit when one cannot be loaded.
    """
    from t2i_fairness.errors import OptionError

    try:
        return load_references(options.references, options.objects, options.balance_per_group,
                               options.balance_seed, options.balance_sampler,
                               (options.synthetic_per_group, options.synthetic_regions))
    except ValueError as exc:
        raise OptionError("--t2i-reference", str(exc).removeprefix("--t2i-reference ")) from None


def reference_regions(options) -> list[str]:
    """GeoDE's region slugs and those of the run's reference sets (the report's region labels); a set
    that cannot be loaded adds nothing.
    """
    from t2i_fairness.vocab.geode import GEODE_REGIONS

    regions = [r.slug for r in GEODE_REGIONS]
    try:
        regions += [r for ref in references_for(options).values() for r in ref.regions]
    except ValueError:
        pass
    return list(dict.fromkeys(regions))


class ReferenceLibrary:
    """The session's reference sets and their features per encoder, shared by every study."""

    def __init__(self, bench):
        self.bench = bench
        self.sets = references_for(bench.options)
        self._features: dict[tuple[str, str], ReferenceFeatures] = {}

    @classmethod
    def of(cls, bench) -> "ReferenceLibrary":
        """The one library of this session."""
        return bench.shared("reference_library", lambda: cls(bench))

    def features(self, name: str, encoder_name: str = "inception", encoder=None) -> ReferenceFeatures:
        """Features and manifolds of set ``name`` under a scorer of the session (encoded once, cached)."""
        key = (name, encoder_name)
        if key not in self._features:
            o = self.bench.options
            enc = encoder if encoder is not None else self.bench.scorer(encoder_name)
            self._features[key] = ReferenceFeatures(self.bench, self.sets[name], enc, o.nearest_k, o.dedupe,
                                                    o.dedupe_scope)
        return self._features[key]
