"""Decomposed-DIG (Sureddy et al.): the bookkeeping around object / background precision and coverage.

Pure functions for the ``obj``, ``bg`` and ``full`` setups (a NaN row: no patch for the setup):
which real images enter, generated images without a feature as misses, Table 1 and the
failure-mode diagnostics. docs/fidelity.md compares them with the authors' fork.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Mapping, Sequence

import numpy as np

from t2i_fairness.families.decomposed.limits import (  # noqa: F401  (re-exported)
    DEFAULT_FAILURE_LIMIT,
    FORK_MIN_BG_PATCHES,
    PAPER_FAILURE_LIMIT_TEXT,
    UNSEGMENTED_CHOICES,
    exceeds_failure_limit,
    parse_failure_limit,
)
from t2i_fairness.metrics.manifold import ball_membership, dedupe_index  # noqa: F401  (re-exported)
from t2i_fairness.report.grids import mask_outline  # noqa: F401  (re-exported: the grids draw it)

SETUPS: tuple[str, ...] = ("obj", "bg", "full")
SETUP_NAMES: dict[str, str] = {"obj": "Obj-only", "bg": "BG-only", "full": "Full-image"}
METRICS: tuple[str, ...] = ("precision", "coverage")
TABLE1_SETUPS: tuple[str, ...] = ("obj", "bg")
TABLE1_COLUMNS: tuple[tuple[str, str], ...] = (
    ("precision", "avg"), ("precision", "worst"), ("coverage", "avg"), ("coverage", "worst"),
)

__all__ = [
    "DEFAULT_FAILURE_LIMIT",
    "background_misses",
    "exceeds_failure_limit",
    "parse_failure_limit",
    "Diagnostics",
    "RealSelection",
    "SETUPS",
    "SETUP_NAMES",
    "SetupScore",
    "ball_membership",
    "dedupe_index",
    "diagnose",
    "has_features",
    "mask_grid",
    "score_setup",
    "sample_membership",
    "select_real",
    "spread",
    "summarize",
    "table1_lines",
]


# --------------------------------------------------------------------------------------------
# Real images: failed segmentations and excluded classes
# --------------------------------------------------------------------------------------------


def has_features(features: Any) -> np.ndarray:
    """bool (n,): rows that are features, not the NaN row of "no patch in this setup"."""
    x = np.asarray(features, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"features must be 2-D (n_images, dim), got shape {x.shape}")
    return np.isfinite(x).all(axis=1)


@dataclass(frozen=True)
class RealSelection:
    """Which real images enter the manifolds, and why the others do not.

    Attributes:
        keep: bool (n,) used in every setup: not failed and of a kept class.
        keep_bg: bool (n,) used in BG-only: ``keep`` and at least ``min_bg_patches`` background patches.
    """

    failed: np.ndarray
    excluded_classes: dict[str, float]
    counts: dict[str, tuple[int, int]]
    limit: Fraction
    keep: np.ndarray = field(repr=False)
    keep_bg: np.ndarray | None = field(default=None, repr=False)
    min_bg_patches: int = 1
    limit_text: str = PAPER_FAILURE_LIMIT_TEXT

    def __post_init__(self) -> None:
        if self.keep_bg is None:
            object.__setattr__(self, "keep_bg", self.keep)

    @property
    def below_bg_min(self) -> np.ndarray:
        """bool (n,): kept images left out of BG-only for too few background patches."""
        return self.keep & ~self.keep_bg

    def report(self) -> dict:
        """JSON-ready summary: failures per class, excluded classes, images kept."""
        return {
            "limit": self.limit_text,
            "limit_rate": float(self.limit),
            "failures_by_class": {o: {"failed": f, "images": n, "rate": f / n} for o, (f, n) in self.counts.items()},
            "excluded_classes": dict(self.excluded_classes),
            "failed_images": int(self.failed.sum()),
            "kept_images": int(self.keep.sum()),
            "images": int(self.failed.size),
            "min_bg_patches": self.min_bg_patches,
            "real_below_bg_min_patches": int(self.below_bg_min.sum()),
        }


def select_real(objects: Sequence[str], has_object: Any, has_background: Any,
                limit: Any = DEFAULT_FAILURE_LIMIT, *, bg_patches: Any = None,
                min_bg_patches: int = 1) -> RealSelection:
    """Apply the paper's rules to the real images: a failed image leaves all three setups.

    Args:
        limit: the class-exclusion limit; default the paper's 100/1020.
        min_bg_patches: background patches an image needs to enter BG-only (paper: 1; fork: 25).

    Example:
        >>> sel = select_real(["bag", "bag", "car", "car"], [True, False, True, True], [True, True, True, True], 0.1)
        >>> sel.keep.tolist(), sel.excluded_classes
        ([False, False, True, True], {'bag': 0.5})
    """
    objects = list(objects)
    has_object = np.asarray(has_object, dtype=bool)
    has_background = np.asarray(has_background, dtype=bool)
    if not (len(objects) == has_object.shape[0] == has_background.shape[0]) or has_object.ndim != 1 \
            or has_background.ndim != 1:
        raise ValueError(f"objects, has_object and has_background must be 1-D of one length, got "
                         f"{len(objects)}, {has_object.shape} and {has_background.shape}")
    text = str(limit) if isinstance(limit, str) else (
        PAPER_FAILURE_LIMIT_TEXT if limit == DEFAULT_FAILURE_LIMIT else
        (f"{limit.numerator}/{limit.denominator}" if isinstance(limit, Fraction) else repr(limit)))
    fraction = parse_failure_limit(limit)
    if isinstance(min_bg_patches, bool) or not isinstance(min_bg_patches, (int, np.integer)) or min_bg_patches < 1:
        raise ValueError(f"min_bg_patches must be an integer >= 1, got {min_bg_patches!r}")
    failed = ~(has_object & has_background)
    labels = np.asarray(objects, dtype=object)
    counts: dict[str, tuple[int, int]] = {}
    for obj in sorted(set(objects)):
        rows = labels == obj
        counts[obj] = (int(failed[rows].sum()), int(rows.sum()))
    excluded = {o: f / n for o, (f, n) in counts.items() if exceeds_failure_limit(f, n, fraction)}
    keep = ~failed & ~np.isin(labels, list(excluded))
    keep_bg = keep
    if min_bg_patches > 1:
        keep_bg = keep & (_bg_counts(bg_patches, min_bg_patches, has_object.shape) >= min_bg_patches)
    return RealSelection(failed, excluded, counts, fraction, keep, keep_bg, int(min_bg_patches), text)


def _bg_counts(bg_patches: Any, min_bg_patches: int, shape: tuple) -> np.ndarray:
    """``bg_patches`` as an array of ``shape``, checked (needed whenever ``min_bg_patches > 1``)."""
    if bg_patches is None:
        raise ValueError(f"min_bg_patches={min_bg_patches} needs bg_patches (background patches per image)")
    n_bg = np.asarray(bg_patches)
    if n_bg.shape != shape:
        raise ValueError(f"bg_patches must have shape {shape}, got {n_bg.shape}")
    return n_bg


def background_misses(has_object: Any, bg_patches: Any = None, min_bg_patches: int = 1,
                      unsegmented: str = "whole") -> np.ndarray:
    """bool (n,): generated images whose BG-only feature counts as a miss.

    Args:
        unsegmented: ``"whole"`` (the paper: no object mask, used whole) or ``"miss"`` (the fork).
    """
    if unsegmented not in UNSEGMENTED_CHOICES:
        raise ValueError(f"unsegmented must be one of {UNSEGMENTED_CHOICES}, got {unsegmented!r}")
    has_object = np.asarray(has_object, dtype=bool)
    miss = np.zeros(has_object.shape, bool)
    if unsegmented == "miss":
        miss |= ~has_object
    if min_bg_patches > 1:
        miss |= has_object & (_bg_counts(bg_patches, min_bg_patches, has_object.shape) < min_bg_patches)  # an unsegmented image is the whole image: all patches
    return miss


# --------------------------------------------------------------------------------------------
# Scores of one setup in one region
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SetupScore:
    """Precision and coverage of one setup in one group; ``n_fake``: rows kept after dedupe plus ``n_missing``."""

    precision: float
    coverage: float
    n_fake: int
    n_used: int
    n_missing: int
    n_duplicates: int
    n_real: int
    used: np.ndarray = field(repr=False, compare=False)

    def report(self) -> dict:
        return {k: getattr(self, k) for k in ("precision", "coverage", "n_fake", "n_used", "n_missing",
                                             "n_duplicates", "n_real")}


def score_setup(manifold, fake: Any, *, dedupe: str = "none", device: Any = None,
                group: str | None = None, duplicates: Any = None) -> SetupScore:
    """Decomposed precision and coverage of generated ``fake`` rows against a real ``manifold``.

    NaN rows count as misses for precision: ``round(p * n_used) / (n_used + n_missing)``.

    Example:
        >>> from t2i_fairness.metrics.manifold import ReferenceManifold
        >>> m = ReferenceManifold.build(np.arange(10.0).reshape(5, 2), nearest_k=1)
        >>> s = score_setup(m, np.array([[0.5, 1.5], [np.nan, np.nan], [50.0, 50.0], [np.nan, np.nan]]))
        >>> s.precision, s.n_fake, s.n_used, s.n_missing
        (0.25, 4, 2, 2)
    """
    from t2i_fairness.metrics.manifold import precision_coverage

    x = np.asarray(fake)
    if x.ndim != 2:
        raise ValueError(f"fake features{_in(group)} must be 2-D (n_images, dim), got shape {x.shape}")
    if x.shape[0] == 0:
        raise ValueError(f"no generated images{_in(group)}: precision needs at least one")
    valid = has_features(x)
    if duplicates is not None:
        gone = np.asarray(duplicates, dtype=bool)
        if gone.shape != valid.shape:
            raise ValueError(f"duplicates must have shape {valid.shape}{_in(group)}, got {gone.shape}")
        dropped_before = int((valid & gone).sum())
        rows = np.flatnonzero(valid & ~gone)
    else:
        dropped_before = 0
        rows = np.flatnonzero(valid)
    used = rows[dedupe_index(x[rows], dedupe)]
    n_missing = int((~valid).sum())
    if used.size:
        pc = precision_coverage(manifold, x[used], dedupe="none", device=device, group=group)
        inside, coverage = int(round(pc["precision"] * used.size)), float(pc["coverage"])
    else:
        inside, coverage = 0, 0.0
    total = int(used.size) + n_missing
    if total == 0:
        raise ValueError(f"every generated image{_in(group)} was dropped as a duplicate: precision needs one")
    return SetupScore(inside / total, coverage, total, int(used.size), n_missing,
                      int(rows.size - used.size) + dropped_before, int(len(manifold.radii)), used)


def sample_membership(manifold, fake: Any, score: SetupScore) -> np.ndarray:
    """bool (score.n_fake, n_real): ball membership with an all-False row per image without a feature."""
    x = np.asarray(fake)
    inside = ball_membership(manifold.features, manifold.radii, x[score.used])
    return np.concatenate([inside, np.zeros((score.n_missing, inside.shape[1]), bool)])


def _in(group: str | None) -> str:
    return "" if group is None else f" (group {group!r})"


# --------------------------------------------------------------------------------------------
# Ball membership (for the diagnostics)
# --------------------------------------------------------------------------------------------

# --------------------------------------------------------------------------------------------
# Diagnostics (section 4.3)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Diagnostics:
    """Indices of the images behind each of the paper's failure modes in one region."""

    low_diversity_backgrounds: list[int]
    low_diversity_objects: list[int]
    low_realism_backgrounds: list[int]
    crowded_backgrounds: list[tuple[int, int]]
    covered_full: list[bool]


def diagnose(member: Mapping[str, np.ndarray], present: Mapping[str, np.ndarray],
             bg_rows: Sequence[int], top: int = 5) -> Diagnostics:
    """Select the images behind the paper's three failure modes from membership matrices.

    Args:
        member: setup -> bool (n_generated_used, n_real), columns in one order for every setup.
        present: setup -> bool (n_real,) the real image is in that setup's manifold.
    """
    missing = [s for s in SETUPS if s not in member or s not in present]
    if missing:
        raise ValueError(f"member and present need the setups {list(SETUPS)}; missing {missing}")
    n_real = len(present["bg"])
    for s in SETUPS:
        if member[s].ndim != 2 or member[s].shape[1] != n_real or len(present[s]) != n_real:
            raise ValueError(f"member[{s!r}] must be (n_generated, {n_real}) and present[{s!r}] ({n_real},), "
                             f"got {member[s].shape} and {np.shape(present[s])}")
    if member["bg"].shape[0] != len(bg_rows):
        raise ValueError(f"bg_rows has {len(bg_rows)} entries for {member['bg'].shape[0]} rows of member['bg']")
    covered = {s: member[s].any(axis=0) & np.asarray(present[s], bool) for s in SETUPS}
    here = {s: np.asarray(present[s], bool) for s in SETUPS}
    ld_bg = np.flatnonzero(here["obj"] & here["bg"] & covered["obj"] & ~covered["bg"])
    ld_obj = np.flatnonzero(here["obj"] & here["bg"] & here["full"] & covered["bg"] & ~covered["obj"] & ~covered["full"])
    bg_in = (member["bg"] & here["bg"][None, :]).any(axis=1)
    lr_bg = [int(bg_rows[i]) for i in np.flatnonzero(~bg_in)]
    counts = member["bg"].sum(axis=0)
    order = [int(j) for j in np.argsort(-counts, kind="stable") if counts[j] > 0][:top]
    return Diagnostics([int(j) for j in ld_bg], [int(j) for j in ld_obj], lr_bg,
                       [(j, int(counts[j])) for j in order], [bool(covered["full"][j]) for j in ld_bg])


# --------------------------------------------------------------------------------------------
# Summaries: Table 1 and region spreads
# --------------------------------------------------------------------------------------------


def spread(values: Mapping[str, float]) -> float:
    """Best minus worst value over regions (the paper's span of per-region values, Sec. 4.2)."""
    vals = [float(v) for v in values.values()]
    if not vals:
        raise ValueError("spread of no values: at least one region is needed")
    return max(vals) - min(vals)


def summarize(per_region: Mapping[str, Mapping[str, Mapping[str, float]]]) -> dict:
    """Setup -> metric -> {"avg", "worst", "worst_region", "best", "spread"} over regions."""
    out: dict = {}
    for setup, regions in per_region.items():
        if not regions:
            raise ValueError(f"setup {setup!r} has no region")
        out[setup] = {}
        for metric in METRICS:
            values = {r: float(v[metric]) for r, v in regions.items()}
            worst = min(values, key=values.get)
            out[setup][metric] = {
                "avg": float(np.mean(list(values.values()))),
                "worst": values[worst],
                "worst_region": worst,
                "best": max(values.values()),
                "spread": spread(values),
            }
    return out


def _delta_percent(new: float, old: float) -> str:
    if old == 0:
        return "n/a"
    pct = 100.0 * (new - old) / old
    return f"{pct:+.0f}%" if math.isfinite(pct) else "n/a"


def table1_lines(summaries: Mapping[str, Mapping], original: str, new: str | None = None,
                 labels: Mapping[str, str] | None = None) -> list[str]:
    """Table 1 of the paper as text: one row per template, then Delta and Delta (%) rows."""
    labels = labels or {}
    rows = [("Orig.", original)] + ([("New", new)] if new is not None else [])
    for _, template in rows:
        if template not in summaries:
            raise ValueError(f"no summary for template {template!r}; have {sorted(summaries)}")
    width = 6
    head1 = " " * 10 + "  ".join(f"{SETUP_NAMES[s]:<{4 * (width + 1) - 1}}" for s in TABLE1_SETUPS)
    names = {("precision", "avg"): "AvgP", ("precision", "worst"): "WrstP",
             ("coverage", "avg"): "AvgC", ("coverage", "worst"): "WrstC"}
    head2 = " " * 10 + "  ".join(" ".join(f"{names[c]:>{width}}" for c in TABLE1_COLUMNS) for _ in TABLE1_SETUPS)

    def values(template: str) -> list[list[float]]:
        return [[float(summaries[template][s][m][stat]) for m, stat in TABLE1_COLUMNS] for s in TABLE1_SETUPS]

    def line(label: str, blocks: list[list[str]]) -> str:
        return f"{label:<10}" + "  ".join(" ".join(f"{v:>{width}}" for v in block) for block in blocks)

    lines = [head1, head2]
    for label, template in rows:
        lines.append(line(label, [[f"{v:.3f}" for v in b] for b in values(template)]))
    if new is not None:
        old_v, new_v = values(original), values(new)
        lines.append(line("Delta", [[f"{n - o:+.3f}" for o, n in zip(ob, nb)] for ob, nb in zip(old_v, new_v)]))
        lines.append(line("Delta (%)", [[_delta_percent(n, o) for o, n in zip(ob, nb)] for ob, nb in zip(old_v, new_v)]))
    legend = "; ".join(f"{label} = {labels.get(t, t)}" for label, t in rows)
    return lines + ([f"  {legend}"] if labels else [])


# --------------------------------------------------------------------------------------------
# Image grids with the mask outlined (Figures 2, 5-7)
# --------------------------------------------------------------------------------------------


def mask_grid(rows: Sequence[tuple[str, Sequence[tuple[Any, Any, str]]]], tile: int = 96,
              colour: tuple[int, int, int] = (255, 0, 0)) -> bytes:
    """A PNG of labelled rows of images, each with its object mask outlined in ``colour``; ``rows`` are
    (row label, [(PIL image, bool mask or None, caption), ...]).
    """
    from PIL import Image, ImageDraw

    label_w, caption_h = 110, 12
    n_cols = max([len(items) for _, items in rows] + [1])
    sheet = Image.new("RGB", (label_w + n_cols * (tile + 4), max(1, len(rows)) * (tile + caption_h + 6)), "white")
    draw = ImageDraw.Draw(sheet)
    for r, (label, items) in enumerate(rows):
        y = r * (tile + caption_h + 6) + 3
        draw.text((4, y + tile // 2 - 6), str(label)[:18], fill=(0, 0, 0))
        for c, (image, mask, caption) in enumerate(items):
            x = label_w + c * (tile + 4)
            im = image.convert("RGB").resize((tile, tile), Image.BILINEAR)
            if mask is not None:
                small = Image.fromarray(np.asarray(mask, dtype=np.uint8) * 255).resize((tile, tile), Image.NEAREST)
                edge = mask_outline(np.asarray(small) > 0)
                pixels = np.asarray(im).copy()
                pixels[edge] = colour
                im = Image.fromarray(pixels)
            sheet.paste(im, (x, y))
            draw.text((x, y + tile + 1), str(caption)[: max(4, tile // 6)], fill=(0, 0, 0))
    buf = io.BytesIO()
    sheet.save(buf, format="PNG")
    return buf.getvalue()
