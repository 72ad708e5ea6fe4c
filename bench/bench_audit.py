"""The human audit's intervals (``--t2i-audit``) measured: coverage at the run's per-gate level, and power per labels.

World: a region's gate is a share of per-image yes/no judgements (CIS-like: does the image show the component?).
Prompts are drawn from a population: prompt j's true rate p_j ~ Beta(theta c, (1 - theta) c) (c = 4: prompts
differ), ``images`` images per prompt, each truly yes with p_j; the scorer's sensitivity and specificity differ by
region (Africa 0.70 / 0.95, Europe 0.95 / 0.97, a perfect scorer 1 / 1). The audit labels ``labels`` units, one per
prompt, drawn as ``t2i_fairness.audit.draw_sample`` draws them. Each run goes through the product's functions:
``t2i_fairness.audit.audited`` -> ``t2i_fairness.metrics.ppi`` (the exact form the gates use, the general betting
form, and the normal form of ppi_python for comparison) and, for the scorer-only gate, the CIS_K interval
(``t2i_fairness.metrics.intervals.cluster_mean_interval``).

Printed, side by side:

- coverage: the one-sided miss rates (limit beyond the truth theta) at levels 1e-2, 1e-3 and the smoke and paper
  presets' per-gate levels (alpha / m), per region and form; a miss rate over its level is a broken promise;
- false alarms: the share of runs whose gate fails ``min theta - 0.05`` (the model meets it) at the paper level,
  scorer-only and audited;
- power: the share of runs failing ``min theta + 0.1`` (a meaningful miss) at the paper level, per number of labels,
  audited (the exact form) against the labels alone (Clopper-Pearson at the level).

    python bench/bench_audit.py [--runs 2000] [--prompts 2000] [--images 4] [--labels 200] [--seed 0]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from t2i_fairness.audit import JudgedShare, JudgedUnit, draw_sample
from t2i_fairness.metrics.decisions import gate_level
from t2i_fairness.metrics.intervals import cluster_mean_interval
from t2i_fairness.metrics.intervals.tails import share_limit
from t2i_fairness.metrics.ppi import power_tuning, ppi_limit

REGIONS = {"Africa": (0.70, 0.95), "Europe": (0.95, 0.97), "perfect": (1.0, 1.0)}
THETA = 0.6
SMOKE_GATES, PAPER_GATES = 486, 1_435


def world(rng, prompts: int, images: int, sens: float, spec: float, theta: float = THETA):
    """(truth, judged, cluster) per image of one region's run."""
    p = rng.beta(theta * 4, (1 - theta) * 4, size=prompts)
    truth = rng.random((prompts, images)) < p[:, None]
    judged = np.where(truth, rng.random(truth.shape) < sens, rng.random(truth.shape) >= spec)
    return truth.ravel().astype(float), judged.ravel().astype(float), np.repeat(np.arange(prompts), images)


def labelled(judged, clusters, labels: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the audit's sample, drawn by the product's sampler (one unit per prompt while prompts last), and
    the prompts' mean judgements the audited evidence reads (``JudgedShare.cluster_means``)."""
    units = tuple(JudgedUnit(str(i), "", "", "q", "", int(j), "g", int(c)) for i, (j, c) in enumerate(zip(judged, clusters)))
    share = JudgedShare("s", units)
    return np.array([int(d.unit.unit) for d in draw_sample({"g": share}, labels, seed)]), share.cluster_means()


def audited_limits(truth, judged, drawn, alpha: float, form: str, lam=None) -> tuple[float, float]:
    """The audited gate's one-sided limits, as ``t2i_fairness.audit.audited`` builds them (prompt means of f)."""
    idx, means = drawn
    y, f = truth[idx], judged[idx]
    lam = power_tuning(y, f, means, means=True) if lam is None else lam
    return (ppi_limit(y, f, means, alpha, "low", form=form, lam=lam),
            ppi_limit(y, f, means, alpha, "high", form=form, lam=lam))


def coverage(args, levels) -> None:
    print(f"\ncoverage: one-sided misses per {args.runs} runs ({args.prompts} prompts x {args.images} images, "
          f"{args.labels} labels, theta {THETA}); expected at most level x runs")
    print(f"{'region':8} {'form':8} " + " ".join(f"{name:>22}" for name, _ in levels))
    for region, (sens, spec) in REGIONS.items():
        rng = np.random.default_rng([args.seed, len(region)])  # Africa and Europe (6 letters): the same truths
        misses = {form: np.zeros((len(levels), 2), int) for form in ("exact", "betting", "normal")}
        for run in range(args.runs):
            truth, judged, clusters = world(rng, args.prompts, args.images, sens, spec)
            idx = labelled(judged, clusters, args.labels, run)
            for form in misses:
                for i, (_, alpha) in enumerate(levels):
                    low, high = audited_limits(truth, judged, idx, alpha, form)
                    misses[form][i] += (low > THETA, high < THETA)
        for form, m in misses.items():
            cells = " ".join(f"{f'{lo}+{hi} ({(lo + hi) / (2 * args.runs):.1e})':>22}" for lo, hi in m)
            print(f"{region:8} {form:8} {cells}")


def alarms_and_power(args, level: float, region: str) -> None:
    sens, spec = REGIONS[region]
    print(f"\nat the paper level {level:.3g}, {args.runs // 4} runs per cell, {region}'s scorer (sensitivity {sens:.2f}, "
          f"specificity {spec:.2f}):")
    print(f"{'labels':>6} {'scorer-only false alarm':>24} {'audited false alarm':>20} {'audited power':>14} "
          f"{'labels-only power':>18}")
    for labels in (100, 200, 400):
        rng = np.random.default_rng([args.seed, labels, len(region)])
        cells = np.zeros(4)
        runs = args.runs // 4
        for run in range(runs):
            truth, judged, clusters = world(rng, args.prompts, args.images, sens, spec)
            bound = THETA - 0.05  # the model meets it
            iv = cluster_mean_interval(judged, clusters)
            cells[0] += iv.limit(level, "high") < bound
            idx = labelled(judged, clusters, labels, run)
            high = audited_limits(truth, judged, idx, level, "exact")[1]
            cells[1] += high < bound
            missed = THETA + 0.1  # a meaningful miss: the truth is 0.1 below it
            cells[2] += high < missed
            cells[3] += share_limit(float(truth[idx[0]].sum()), len(idx[0]), level, "high") < missed  # Clopper-Pearson
        r = cells / runs
        print(f"{labels:>6} {r[0]:>24.3f} {r[1]:>20.3f} {r[2]:>14.3f} {r[3]:>18.3f}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--prompts", type=int, default=2000)
    parser.add_argument("--images", type=int, default=4)
    parser.add_argument("--labels", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-coverage", action="store_true")
    parser.add_argument("--power-regions", default="Africa,Europe", help="the regions whose scorer the power table uses")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    paper = gate_level(0.05, PAPER_GATES, "holm")
    levels = [("1e-2", 1e-2), ("1e-3", 1e-3), (f"smoke {gate_level(0.05, SMOKE_GATES, 'holm'):.3g}",
                                                gate_level(0.05, SMOKE_GATES, "holm")), (f"paper {paper:.3g}", paper)]
    if not args.skip_coverage:
        coverage(args, levels)
    for region in args.power_regions.split(","):
        alarms_and_power(args, paper, region)
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
