"""DIG In's report pieces: the per-region bars (Figure 2) and the summary block."""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np

METRICS = ("precision", "coverage")


def region_intervals(scores: dict, n_resamples: int = 200, confidence: float = 0.95, seed: int = 0) -> dict:
    """``{metric: {region: (low, high)}}``: seeded percentile-bootstrap intervals over each region's
    generated images (the gates' resampling unit); empty where a region kept no membership
    (``--t2i-bootstrap 0``) or had no generated image.

    Example:
        >>> region_intervals({}, 10)
        {'precision': {}, 'coverage': {}}
    """
    from t2i_fairness.metrics.stats import index_bootstrap

    out: dict = {m: {} for m in METRICS}
    if n_resamples < 1:
        return out
    for region, s in scores.items():
        member = getattr(s, "member", None)
        if member is None or member.n_fake == 0:
            continue
        for metric in METRICS:
            stat = getattr(member, f"{metric}_of")
            try:
                out[metric][region] = index_bootstrap(stat, member.n_fake, n_resamples=n_resamples,
                                                      confidence=confidence, seed=seed)
            except ValueError:  # a resample without a defined value: no interval drawn
                pass
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


def region_lines(scores: dict) -> list[str]:
    """One summary line per region: precision, coverage and the group sizes."""
    return [f"{r:<16} precision {s.precision:.3f}  coverage {s.coverage:.3f}  (real {s.n_real}, generated {s.n_fake})"
            for r, s in scores.items()]
