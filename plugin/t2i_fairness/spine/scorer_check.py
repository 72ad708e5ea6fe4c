"""Scorers checked before any gate: each scorer kind a run uses scores a small golden set shipped with
the package (procedural images and fixed texts), its outputs are stored beside the bounds when bounds are
written (``thresholds/<name>.scorers.json``), and every later run compares before its first gate.

A scorer that no longer gives the numbers it gave when the bounds were written moves every bound that
rests on it (a GPU, a precision, a library version or new weights: docs/decisions.md). Beyond the
tolerance of its precision (:data:`TOLERANCE`, relative to the output's largest magnitude), the check
names the scorer, the largest difference, the output and what differs from the record (device,
precision, library versions, weights); ``--t2i-scorer-check stop`` stops such a run before it generates.

Example:
    >>> [im.size for im in golden_images()], len(golden_texts())
    ([(64, 64), (64, 64), (64, 64), (64, 64)], 4)
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

__all__ = [
    "GOLDEN_VERSION", "TOLERANCE", "ScorerCheck", "ScorerDifference", "check_scorers", "compare", "golden_images",
    "golden_outputs", "golden_texts", "read_record", "record_of", "scorers_path", "write_record",
]

#: Bumped whenever the golden set or what is stored of it changes (an older record is then re-recorded).
GOLDEN_VERSION = 1
#: The largest difference a precision allows, relative to the output's largest magnitude (the tighter of
#: the recorded and the current precision applies): float32 kernels differ across devices and libraries by
#: ~1e-6, half precisions by ~1e-3 (docs/precision.md).
TOLERANCE = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 3e-2}
_PROJECTED = 32  # an image or text output is stored as its projection on 32 fixed random directions
_CONTEXT = ("device", "precision", "fingerprint", "libraries")


def golden_images() -> list:
    """Four 64-pixel images: two of the synthetic reference's (an object in a region's palette), two CIS tiles."""
    from t2i_fairness.references.sets import render_synthetic

    return [render_synthetic("bag", "africa", 0, 0, 64), render_synthetic("chair", "europe", 1, 0, 64),
            render_synthetic("crab", "cis:crab", 2, 0, 64), render_synthetic("macaw", "cis:macaw", 3, 0, 64)]


def golden_texts() -> list[str]:
    """Four texts: a DIG In prompt, a CIS prompt, a word-level group text, the empty lookup entry's stand-in."""
    return ["a photo of a bag in Africa", "A photo of a crab and a macaw", "a photo of a female", "a photo"]


def golden_mask() -> np.ndarray:
    """A centred square mask for the masked encoders."""
    mask = np.zeros((64, 64), bool)
    mask[16:48, 16:48] = True
    return mask


@functools.lru_cache(maxsize=8)
def _directions(width: int) -> np.ndarray:
    rng = np.random.default_rng([GOLDEN_VERSION, width])
    d = rng.standard_normal((width, _PROJECTED))
    return d / np.linalg.norm(d, axis=0, keepdims=True)


def _projected(rows: Any) -> list[list[float]]:
    x = np.asarray(rows, dtype=np.float64)
    x = x.reshape(x.shape[0], -1)
    return np.round(x @ _directions(x.shape[1]), 7).tolist()


def golden_outputs(scorer: Any) -> dict[str, Any]:
    """What ``scorer`` gives on the golden set, by output: image and text embeddings (projected), masks'
    coverage, captions, replacements; each method the scorer has."""
    images, texts = golden_images(), golden_texts()
    out: dict[str, Any] = {}
    if hasattr(scorer, "encode_images"):
        out["images"] = _projected(scorer.encode_images(images))
    if hasattr(scorer, "encode_texts"):
        out["texts"] = _projected(scorer.encode_texts(texts))
    if hasattr(scorer, "encode") and hasattr(scorer, "object_patches"):  # the masked ViT: object and background
        for mode in ("obj", "bg"):
            out[f"masked_{mode}"] = _projected(scorer.encode(images[:2], [golden_mask()] * 2, mode=mode))
    if hasattr(scorer, "segment"):
        out["mask_share"] = [[float(np.mean(scorer.segment(im, name)))] for im, name in zip(images[:2], ("bag", "chair"))]
    if hasattr(scorer, "caption"):
        out["captions"] = list(scorer.caption(images[:2]))
    if hasattr(scorer, "replacements"):
        out["replacements"] = list(scorer.replacements("a respected doctor at the hospital".split(), 2, 3))
    return out


def record_of(kind: str, scorer: Any, device: str, precision: str, libraries: Mapping[str, Any]) -> dict:
    """One kind's record: its golden outputs and the context they were measured in."""
    return {"device": device, "precision": precision, "fingerprint": getattr(scorer, "fingerprint", None),
            "libraries": dict(sorted(libraries.items())), "outputs": golden_outputs(scorer)}


@dataclass(frozen=True)
class ScorerDifference:
    """A scorer kind whose golden outputs moved beyond its tolerance (or cannot be compared)."""

    kind: str
    largest: float  # the largest difference, relative to the output's largest magnitude (inf: text or shape)
    tolerance: float
    output: str  # which output differs most
    differs: tuple[str, ...]  # what differs from the record: "precision float32 -> bfloat16", "weights ..."

    def line(self) -> str:
        what = "; ".join(self.differs) if self.differs else "nothing recorded differs (same device, precision, libraries and weights)"
        size = "its text differs" if self.largest == float("inf") else f"largest difference {self.largest:.3g} (tolerance {self.tolerance:g})"
        return f"scorer {self.kind} differs from its record: {size} in its {self.output}; what differs: {what}"


def _context_changes(recorded: Mapping, now: Mapping) -> list[str]:
    changes = []
    for key in ("device", "precision"):
        if recorded.get(key) != now.get(key):
            changes.append(f"{key} {recorded.get(key)} -> {now.get(key)}")
    old, new = recorded.get("libraries") or {}, now.get("libraries") or {}
    changes += [f"library {name} {old.get(name)} -> {new.get(name)}" for name in sorted(set(old) | set(new))
                if old.get(name) != new.get(name)]
    if recorded.get("fingerprint") != now.get("fingerprint"):
        changes.append(f"weights {recorded.get('fingerprint')} -> {now.get('fingerprint')}")
    return changes


def _largest(a: Any, b: Any) -> float:
    if isinstance(a, list) and a and isinstance(a[0], str) or isinstance(b, list) and b and isinstance(b[0], str):
        return 0.0 if a == b else float("inf")
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape:
        return float("inf")
    scale = max(float(np.abs(x).max(initial=0.0)), 1e-12)
    return float(np.abs(x - y).max(initial=0.0)) / scale


def compare(kind: str, recorded: Mapping, now: Mapping) -> tuple[ScorerDifference | None, float]:
    """``(difference or None, largest)``: ``kind``'s current golden outputs against its record."""
    tolerance = min(TOLERANCE.get(recorded.get("precision"), 1e-4), TOLERANCE.get(now.get("precision"), 1e-4))
    old, new = recorded.get("outputs") or {}, now.get("outputs") or {}
    diffs = {name: _largest(old.get(name), new.get(name)) if name in old and name in new else float("inf")
             for name in sorted(set(old) | set(new))}
    output, largest = max(diffs.items(), key=lambda kv: kv[1]) if diffs else ("outputs", 0.0)
    if largest <= tolerance:
        return None, largest
    return ScorerDifference(kind, largest, tolerance, output, tuple(_context_changes(recorded, now))), largest


@dataclass
class ScorerCheck:
    """The run's check: each kind's record now, the stored records (``None``: none stored) and what moved."""

    path: Path
    now: dict[str, dict]
    recorded: dict[str, dict] | None
    differences: list[ScorerDifference] = field(default_factory=list)
    largest: dict[str, float] = field(default_factory=dict)
    unrecorded: list[str] = field(default_factory=list)  # kinds this run uses that the record lacks
    moved_context: list[str] = field(default_factory=list)  # what differs from the record where outputs still match

    @property
    def ok(self) -> bool:
        return not self.differences

    def lines(self) -> list[str]:
        """The header's and the summary's lines: one when the scorers match."""
        if self.recorded is None:
            return [f"t2i-fairness: scorer check: no record of the scorers' golden outputs at {self.path} "
                    "(written with the bounds by --t2i-update-thresholds); not checked"]
        if self.ok:
            worst = ", ".join(f"{k} {self.largest[k]:.2g}" for k in sorted(self.largest))
            extra = f"; not recorded: {', '.join(self.unrecorded)}" if self.unrecorded else ""
            extra += f"; recorded under other settings, outputs within tolerance: {'; '.join(self.moved_context)}" if self.moved_context else ""
            return [f"t2i-fairness: scorer check: the scorers match their record of {self.path.name} "
                    f"(largest relative differences: {worst or 'none compared'}){extra}"]
        return [f"t2i-fairness: scorer check FAILED: {d.line()}" for d in self.differences]

    def transfer(self) -> dict:
        """Everything, as JSON-able data (an xdist worker hands its check to the controller)."""
        return {"path": str(self.path), "now": self.now, "recorded": self.recorded, "largest": self.largest,
                "unrecorded": self.unrecorded, "moved_context": self.moved_context,
                "differences": [dict(vars(d), differs=list(d.differs)) for d in self.differences]}

    @classmethod
    def from_transfer(cls, data: Mapping) -> "ScorerCheck":
        """The check :meth:`transfer` gave."""
        return cls(Path(data["path"]), dict(data["now"]), data["recorded"],
                   [ScorerDifference(**dict(d, differs=tuple(d["differs"]))) for d in data["differences"]],
                   dict(data["largest"]), list(data["unrecorded"]), list(data["moved_context"]))

    def payload(self) -> dict:
        return {"path": str(self.path), "recorded": self.recorded is not None, "ok": self.ok,
                "largest": self.largest, "unrecorded": self.unrecorded,
                "differences": [dict(kind=d.kind, largest=d.largest, tolerance=d.tolerance, output=d.output,
                                     differs=list(d.differs)) for d in self.differences]}


def scorers_path(thresholds: Path | str) -> Path:
    """Where the golden outputs live: beside the thresholds file, ``<name>.scorers.json``."""
    path = Path(thresholds)
    return path.with_name(path.name.rsplit(".", 1)[0] + ".scorers.json")


def read_record(path: Path) -> dict[str, dict] | None:
    """The stored records by kind (``None`` when the file is absent).

    Raises:
        ValueError: the file is not a record of this golden set, naming the file.
    """
    path = Path(path)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a scorer record ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("scorers"), dict):
        raise ValueError(f"{path}: not a scorer record (no 'scorers' object)")
    if data.get("golden_version") != GOLDEN_VERSION:
        return None  # another golden set: nothing to compare with until the bounds are written again
    return data["scorers"]


def write_record(path: Path, records: Mapping[str, dict], keep: Mapping[str, dict] | None = None) -> None:
    """Write ``records`` (and the ``keep`` kinds this run did not measure) to ``path``."""
    merged = dict(keep or {})
    merged.update(records)
    text = json.dumps({"golden_version": GOLDEN_VERSION, "scorers": dict(sorted(merged.items()))}, indent=1, sort_keys=True)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(text + "\n", encoding="utf-8")


def check_scorers(bench: Any, kinds: Iterable[str], path: Path | str) -> ScorerCheck:
    """Score the golden set with each of ``kinds`` (built by the workbench, on the run's device and
    precision) and compare with the record at ``path``."""
    from t2i_fairness.base import identity
    from t2i_fairness.models.precision import AUTO_ON_CUDA, resolve

    path = Path(path)
    recorded = read_record(path)
    versions = {k: v for k, v in identity.library_versions().items() if v is not None}
    check = ScorerCheck(path, {}, recorded)
    for kind in kinds:
        scorer = bench.scorer(kind)
        precision = resolve(kind, bench.device, bench.run.precision) if kind in AUTO_ON_CUDA else "float32"
        now = record_of(kind, scorer, identity.device_class(bench.device), precision, versions)
        check.now[kind] = now
        if recorded is None:
            continue
        if kind not in recorded:
            check.unrecorded.append(kind)
            continue
        difference, check.largest[kind] = compare(kind, recorded[kind], now)
        if difference is not None:
            check.differences.append(difference)
        else:
            check.moved_context += [f"{kind}: {c}" for c in _context_changes(recorded[kind], now)]
    return check
