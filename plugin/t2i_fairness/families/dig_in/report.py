"""DIG In's report pieces: the per-region bars (Figure 2), the summary block and the consistency gates'
lowest-scoring images."""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np

METRICS = ("precision", "coverage")


def region_intervals(scores: dict, confidence: float = 0.95) -> dict:
    """``{metric: {region: (low, high)}}``: the interval each region's gate is judged with; empty where undefined.

    Example:
        >>> region_intervals({})
        {'precision': {}, 'coverage': {}}
    """
    out: dict = {m: {} for m in METRICS}
    for region, s in scores.items():
        if getattr(s, "member", None) is None:
            continue
        for metric in METRICS:
            if math.isnan(getattr(s, metric)):
                continue
            iv = s.interval(metric, confidence)
            out[metric][region] = (iv.low, iv.high)
    return out


def region_bounds(gate, reference: str, template: str, scores: Mapping) -> dict:
    """``{metric: {region: (direction, value)}}``: each region gate's bound from the run's thresholds file."""
    gates = gate.context.thresholds.gates
    out: dict = {m: {} for m in METRICS}
    for metric in METRICS:
        for region in scores:
            b = gates.get(f"test_region_{metric}[{reference}-{template}-{region}]")
            if b is not None and math.isfinite(b.value):
                out[metric][region] = (b.direction, b.value)
    return out


def region_bars(title: str, scores: dict, intervals: dict | None = None, bounds: dict | None = None,
                confidence: float = 0.95):
    """Precision and coverage per region, side by side (DIG In Figure 2), with each bar's confidence
    interval (error bar), its gate's bound (a black tick; a bar below its ``min`` bound drawn hatched),
    the value printed on every bar (so a bar at 0 reads as 0, not as missing data) and labelled axes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    regions = list(scores)
    x = np.arange(len(regions))
    intervals = intervals or {}
    bounds = bounds or {}
    fig, ax = plt.subplots(figsize=(1.3 * len(regions) + 2.5, 3.6))
    colors = {"precision": "#4c72b0", "coverage": "#dd8452"}
    for k, metric in enumerate(METRICS):
        xs = x + (k - 0.5) * 0.4
        values = np.array([getattr(scores[r], metric) for r in regions], dtype=float)
        missed = [r in bounds.get(metric, {}) and _misses(values[i], *bounds[metric][r]) for i, r in enumerate(regions)]
        bars = ax.bar(xs, np.nan_to_num(values), 0.38, color=colors[metric], label=metric,
                      edgecolor=["#900" if m else colors[metric] for m in missed], linewidth=1.5)
        for bar, m in zip(bars, missed):
            if m:
                bar.set_hatch("///")
        iv = intervals.get(metric, {})
        for i, r in enumerate(regions):
            if r in iv:
                lo, hi = iv[r]
                ax.errorbar(xs[i], values[i], yerr=[[max(values[i] - lo, 0)], [max(hi - values[i], 0)]],
                            fmt="none", ecolor="#222", capsize=3, linewidth=1)
            if r in bounds.get(metric, {}):
                _, b = bounds[metric][r]
                ax.hlines(b, xs[i] - 0.19, xs[i] + 0.19, colors="black", linewidth=2.2, zorder=5)
            label = "nan" if math.isnan(values[i]) else f"{values[i]:.2f}"
            ax.annotate(label, (xs[i], 0 if math.isnan(values[i]) else values[i]), xytext=(0, 2),
                        textcoords="offset points", ha="center", va="bottom", fontsize=7)
    ax.axhline(0, color="#444", linewidth=0.8)
    ax.set_xticks(x, [r.replace("_", "\n") for r in regions])
    ax.set_ylim(0, 1.08)
    ax.set_ylabel("share (0 to 1)")
    ax.set_xlabel("region")
    ax.set_title(title)
    handles, labels = ax.get_legend_handles_labels()
    from matplotlib.lines import Line2D

    extra = []
    if any(intervals.get(m) for m in METRICS):
        extra.append(Line2D([], [], color="#222", marker="|", linestyle="-", label=f"{confidence:.0%} interval"))
    if any(bounds.get(m) for m in METRICS):
        extra.append(Line2D([], [], color="black", linewidth=2.2, label="bound (hatched: missed)"))
    ax.legend(handles + extra, labels + [h.get_label() for h in extra], loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    return fig


def _misses(value: float, direction: str, bound: float) -> bool:
    if math.isnan(value):
        return True
    return value < bound if direction == "min" else value > bound


def region_lines(scores: dict, truncation=None) -> list[str]:
    """One summary line per region: precision, coverage and the group sizes (generated images scored, and
    duplicates dropped when there were any); then the generator's truncation of the prompts, when given."""
    from t2i_fairness.references.grouping import truncation_line

    lines = [f"{r:<16} precision {s.precision:.3f}  coverage {s.coverage:.3f}  (real {s.n_real}, generated {s.n_fake}"
             + (f", {s.n_duplicates} duplicates dropped" if getattr(s, "n_duplicates", 0) else "") + ")"
             for r, s in scores.items()]
    return lines + ([truncation_line(truncation)] if truncation is not None else [])


LOWEST_GRID_IMAGES = 8  # one row of report.grids.image_grid (8 columns); neither DIG In's paper nor its code fixes a number


def lowest_scoring(scored, n: int = LOWEST_GRID_IMAGES) -> list:
    """The ``n`` lowest-scoring images for a consistency gate's grid, lowest first (stable on ties).

    Example:
        >>> from types import SimpleNamespace as S
        >>> [s.score for s in lowest_scoring([S(score=v) for v in (0.3, 0.1, 0.2)], 2)]
        [0.1, 0.2]
    """
    return sorted(scored, key=lambda s: s.score)[:n]


def report_region_bars(ind, gate, reference: str, template: str, t2i_report) -> None:
    """Figure 2's bars over every region (``region_precision_coverage.png``: each region gate's interval and
    bound) and each region's numbers (``regions.json``)."""
    scores = ind.at.scores(reference, template).region
    confidence = ind.at.bench.options.confidence
    t2i_report.png("region_precision_coverage", region_bars(
        f"{reference}: {template}", scores, intervals=region_intervals(scores, confidence),
        bounds=region_bounds(gate, reference, template, scores), confidence=confidence))
    t2i_report.json("regions", {r: s.report() for r, s in scores.items()})


def report_region_lines(ind, reference: str, template: str, t2i_report) -> None:
    """The summary block of every region (:func:`region_lines`)."""
    sc = ind.at.scores(reference, template)
    t2i_report.section(f"DIG In Region Indicator: {reference} / {template}", region_lines(sc.region, sc.truncation))


PERCENTILE_MIN_IMAGES = 10  # fewer images per object make a 10th percentile unstable (a warning, not a skip)


def report_consistency(ind, template: str, region: str | None, t2i_report) -> dict:
    """The lowest-scoring images of a consistency gate (``lowest_scoring.png``), a warning when an object's
    10th percentile comes from fewer than :data:`PERCENTILE_MIN_IMAGES` images, and CLIP's object recognition on
    the reference sets' labelled real images of the region (``consistency_agreement.json``); returns the gate's
    ``scorer_on_reference`` details."""
    import warnings

    from t2i_fairness.errors import T2ISmallSampleWarning
    from t2i_fairness.report.grids import image_grid
    from t2i_fairness.report.judged import scorer_agreement

    lowest = lowest_scoring(ind.at.clipscores(template, region))  # the region's prompts only (all without one)
    if lowest and all(s.image is not None for s in lowest):
        t2i_report.png("lowest_scoring", image_grid([s.image.load() for s in lowest],
                                                    [f"{s.score:.3f} {s.object}" for s in lowest]))
    small = {o: n for o, n in ind.details["images_by_object"].items() if n < PERCENTILE_MIN_IMAGES}
    if small:
        warnings.warn(T2ISmallSampleWarning(
            f"10th percentile from fewer than {PERCENTILE_MIN_IMAGES} images for {len(small)} object(s) ({small}); "
            "the figure is unstable"), stacklevel=2)
    judged = ind.at.reference_agreement(region)
    return {"scorer_on_reference": scorer_agreement(
        judged, "DIG In object consistency: CLIP on the reference's real images", t2i_report, "consistency_agreement",
        focus=region, unit="region", labels="the reference sets' object labels")}
