"""Calibration of every gate kind the suite has, on simulated per-image scores, through the suite's own code.

``bench/bench_gate_calibration.py`` and ``bench/simulated_canaries.py`` calibrate the DIG In region
gates, CIS K <= 4 and IndicTTI's 3 languages. This bench adds the kinds they leave out, each built with
the very functions the gate tests call (imported from ``fairness_tests`` and the families) and judged by
:func:`t2i_fairness.gating.gate.measure` + :func:`t2i_fairness.gating.gate.judge` at the default options
(``significant``, ``holm`` at alpha 0.05, first step ``alpha / m``):

====================  ==========================================================================
kind                  built as the suite builds it
====================  ==========================================================================
order test            ``metrics.cis.order_invariance_permutation_test`` + ``HypothesisTest`` (no bound)
ddig precision        ``fairness_tests.test_decomposed_dig._interval`` (Wilson) on a region's membership
ddig coverage         the same, jackknife-Wilson (``score_group`` of the simulated DIG world)
ddig spread           ``metrics.evidence.pairs`` over the regions' coverage (MOVER, every ordered pair)
template improvement  ``metrics.evidence.combination`` of one region's coverage under two templates (MOVER)
parity (ratio)        ``metrics.evidence.pairs(..., contrast="ratio")`` over the regions' precision (MOVER-R)
CIS drop              ``families.cis.study.drop_interval`` over K = 1, 2, 4 (``Scored`` of simulated S)
consistency           ``metrics.intervals.percentile_mean_interval`` (p10 of per-image scores per object)
word-level            ``WordInfluence.abs_interval`` (Hoeffding, ``hoeffding_half_width_combination``)
spread at 0/1         ``pairs`` of two shares of 6 images at true 0.97 and 0.03
====================  ==========================================================================

Per kind: a reference run (its own seed) writes the bound as the update flow does (``judge`` with
``--t2i-update-thresholds`` on an empty file: level 0.99); each of ``--runs`` null runs (fresh draws of
the same world) is judged against it. Columns: ``miss`` = runs whose estimate misses the bound (the
written level promises <= 1%, up to the normal approximation), ``fail@m`` = false alarms at Holm's
first step with ``m = 486`` (the smoke suite's gate count, ``bench_gate_sizes.count_gates``), ``fail@1`` = false alarms at alpha 0.05 unadjusted
(the strictest view of a single gate), ``cover`` = runs whose 95% interval holds ``theta_n`` (the
mean of the statistic over the runs: the value a re-run estimates), each with its binomial 95% upper
bound. The order test has no bound and no interval: its ``fail@1`` is its false-alarm rate at 0.05
(it must be <= 0.05) and its ``miss``/``cover`` are ``-``. Rates carry their one-sided 95% upper
Clopper-Pearson bound, coverage its lower one.

Left out (and why): IndicTTI and the DIG In region/worst gates (``simulated_canaries.py`` covers them),
CIS per-K and the rate floor (``bench_gate_calibration.py``'s procedural runs), representation gap
(a Hoeffding share like word-level's, same code path), FID/IS (reported, never gated).

Run: ``python bench/bench_gate_kinds.py --quick`` (200 runs, under 3 minutes on 2 cores) or
``--runs 1000``.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "plugin")]

from simulated_canaries import DIG_SIZES, REGIONS, _options, _write_bounds, dig_generated, dig_world, upper95  # noqa: E402

from t2i_fairness.gating.gate import judge, measure  # noqa: E402
from t2i_fairness.metrics.decisions import GateLevel  # noqa: E402

FAMILY = 486  # the smoke suite's gate count (bench/bench_gate_sizes.py counts it): Holm's first step alpha / 486


def _region_scores(world, rng, options):
    from t2i_fairness.families.dig_in.study import fake_dedupe, score_group

    return {r: score_group(world.manifolds[r], dig_generated(world, r, rng), dedupe=fake_dedupe(options), group=r)
            for r in REGIONS}


def ddig_kinds(world, options):
    """One run of the Decomposed-DIG-shaped kinds: ``rng -> [Measurement]`` built with the suite's helpers."""
    from t2i_fairness.metrics.evidence import combination, pairs

    conf = options.confidence

    def run(rng):
        scores = _region_scores(world, rng, options)
        other = _region_scores(world, rng, options)  # a second template: an independent draw of the same model
        prec = {r: s.interval("precision", conf) for r, s in scores.items()}
        cov = {r: s.interval("coverage", conf) for r, s in scores.items()}
        out = [measure("ddig precision", prec["africa"].estimate, n=scores["africa"].n_fake, interval=prec["africa"]),
               measure("ddig coverage", cov["africa"].estimate, n=scores["africa"].n_real, interval=cov["africa"])]
        # spread: best minus worst, every ordered pair of regions (as test_region_spread)
        iv = pairs(cov, confidence=conf)
        out.append(measure("ddig spread", iv.estimate, n=len(cov), higher_is_better=False, interval=iv))
        new = other["africa"].interval("coverage", conf)
        iv = combination([new, cov["africa"]], [1.0, -1.0], confidence=conf, bounds=(-1.0, 1.0))
        out.append(measure("template improvement", iv.estimate, n=min(new.n_units, cov["africa"].n_units), interval=iv))
        iv = pairs(prec, contrast="ratio", confidence=conf)
        out.append(measure("parity (ratio)", iv.estimate, n=len(prec), interval=iv))
        return out

    return run


def cis_drop_kind(options, prompts=12, images=4, ks=(1, 2, 4)):
    from t2i_fairness.families.cis.study import Scored, drop_interval

    def run(rng):
        results = []
        for k in ks:
            q = rng.beta(6.0 - k, 1.0 + k / 2, size=prompts)  # per-prompt chance a component shows; falls with K
            s = rng.binomial(k, np.repeat(q[:, None], images, axis=1)) / k
            results.append(Scored(k, [("c",) * k] * prompts, s, [[()] * images] * prompts))
        iv = drop_interval(results, options.confidence)
        return [measure("CIS drop", iv.estimate, n=prompts * images * len(ks), higher_is_better=False, interval=iv)]

    return run


def consistency_kind(options, objects=5, images=6):
    from t2i_fairness.metrics.intervals import percentile_mean_interval

    centres = np.linspace(0.22, 0.3, objects)

    def run(rng):
        scores = {f"o{i}": c + 0.03 * rng.normal(size=images) for i, c in enumerate(centres)}
        iv = percentile_mean_interval(scores, confidence=options.confidence)
        return [measure("consistency", iv.estimate, n=objects * images, interval=iv)]

    return run


def word_kind(options, n_original=16, candidates=5, n_each=16, share=0.3):
    from t2i_fairness.families.word_influence.study import WordInfluence
    from t2i_fairness.metrics.stats import hoeffding_half_width_combination

    def run(rng):
        p0 = rng.binomial(n_original, share) / n_original
        pc = rng.binomial(n_each, share, size=candidates) / n_each
        influence = float(p0 - pc.mean())
        h = hoeffding_half_width_combination([1.0] + [-1.0 / candidates] * candidates,
                                             [n_original] + [n_each] * candidates, 1.0 - options.confidence)
        row = WordInfluence("w", "g", 1, influence, h, None, n_original + candidates * n_each, ("p",))
        return [measure("word-level", abs(influence), n=row.n_images, higher_is_better=False, interval=row.abs_interval)]

    return run


def spread01_kind(options, n=6, high=0.97, low=0.03):
    from t2i_fairness.metrics.evidence import pairs
    from t2i_fairness.metrics.intervals import precision_interval

    def run(rng):
        a = precision_interval(rng.random(n) < high, confidence=options.confidence)
        b = precision_interval(rng.random(n) < low, confidence=options.confidence)
        iv = pairs([a, b], confidence=options.confidence)
        return [measure("spread at 0/1", iv.estimate, n=2 * n, higher_is_better=False, interval=iv)]

    return run


def order_rates(runs: int, seed: int, prompts: int = 4, images: int = 2, k: int = 4, resamples: int = 999):
    """False alarms of the order test under no order effect: per prompt a distribution of detected counts
    (prompts differ: the clustering the within-prompt permutation respects); both groups drawn from it."""
    from t2i_fairness.gating.verdicts import Measurement
    from t2i_fairness.metrics.cis import order_invariance_permutation_test
    from t2i_fairness.metrics.decisions import HypothesisTest

    rng = np.random.default_rng([seed, 7])
    options = _options()
    empty = _write_bounds([], options)
    fail_m = fail_1 = 0
    for i in range(runs):
        q = rng.beta(2.0, 2.0, size=prompts)
        a = rng.binomial(k, np.repeat(q[:, None], images, axis=1))
        b = rng.binomial(k, np.repeat(q[:, None], images, axis=1))
        r = order_invariance_permutation_test(a, b, k, n_resamples=resamples, seed=i)
        m = Measurement("order test", r.pvalue, a.size * 2,
                        test=HypothesisTest(r.pvalue, "no order effect", r.method, r.statistic, r.resolution))
        fail_m += judge(m, empty, {}, options, level=GateLevel.of(options, FAMILY))[0].status == "fail"
        fail_1 += r.pvalue <= options.alpha
    return fail_m, fail_1


def calibrate(name, make_run, runs: int, seed: int, options):
    """``(miss, fail@m, fail@1, cover, runs)`` of one kind (every measurement of a run is its own gate)."""
    reference = make_run(np.random.default_rng([seed, 1000]))
    thresholds = _write_bounds(reference, options)
    opts1 = dataclasses.replace(options, multiplicity="none")
    ms = [make_run(np.random.default_rng([seed, i])) for i in range(runs)]
    values = {m.gate: [] for m in reference}
    for run in ms:
        for m in run:
            values[m.gate].append(m.value)
    theta = {g: float(np.mean(v)) for g, v in values.items()}
    out = {}
    for run in ms:
        for m in run:
            row = out.setdefault(m.gate, [0, 0, 0, 0, 0])
            bound = thresholds.gates[m.gate]
            row[0] += (m.value < bound.value) if bound.direction == "min" else (m.value > bound.value)
            row[1] += judge(m, thresholds, {}, options, level=GateLevel.of(options, FAMILY))[0].status == "fail"
            row[2] += judge(m, thresholds, {}, opts1)[0].status == "fail"
            row[3] += m.interval is not None and m.interval[0] <= theta[m.gate] <= m.interval[1]
            row[4] += 1
    return out


def table(rows: dict, order: tuple[int, int, int]) -> list[str]:
    def cell(hits, n):
        return f"{hits / n:6.3f} (<= {upper95(hits, n):.3f})"

    def cover(hits, n):
        from scipy.stats import beta

        low = 0.0 if hits == 0 else float(beta.ppf(0.05, hits, n - hits + 1))
        return f"{hits / n:6.3f} (>= {low:.3f})"

    lines = [f"{'kind':<22}{'runs':>6}  {'miss (<= 0.01)':<20}{f'fail@m={FAMILY}':<20}{'fail@1 (alpha 0.05)':<22}cover (0.95)"]
    for name, (miss, fm, f1, cv, n) in rows.items():
        lines.append(f"{name:<22}{n:>6}  {cell(miss, n):<20}{cell(fm, n):<20}{cell(f1, n):<22}{cover(cv, n)}")
    fm, f1, n = order
    lines.append(f"{'order test':<22}{n:>6}  {'-':<20}{cell(fm, n):<20}{cell(f1, n):<22}-")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=400, help="null runs per kind (>= 200)")
    parser.add_argument("--quick", action="store_true", help="200 runs (under 3 minutes on 2 cores)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    runs = 200 if args.quick else args.runs
    if runs < 1:
        parser.error("--runs must be positive")
    t0 = time.time()
    options = _options()
    world = dig_world(DIG_SIZES["smoke"], seed=args.seed)
    rows = {}
    for name, make in (("ddig", ddig_kinds(world, options)), ("cis", cis_drop_kind(options)),
                       ("consistency", consistency_kind(options)), ("word", word_kind(options)),
                       ("spread01", spread01_kind(options))):
        for gate, row in calibrate(name, make, runs, args.seed, options).items():
            rows[gate] = tuple(row)
    order = (*order_rates(runs, args.seed), runs)
    print(f"gate kinds on simulated scores: {runs} null runs per kind, bounds at level 0.99 from a reference run, "
          f"Holm first step at m = {FAMILY}; binomial 95% upper bounds in brackets")
    print("\n".join(table(rows, order)))
    print(f"({time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
