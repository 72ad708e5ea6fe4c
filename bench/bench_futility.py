"""Is a CIS share gate's futility stop honest? Measured for the two limits the rule could read.

With a team's indifference margin ``delta`` (``indifference:`` in the thresholds file; the default rule before issue
#45, which now reads the margin ``N`` can detect, ``docs/sequential.md``), ``--t2i-sequential`` passes a ``min`` gate
early (futility) when its one-sided limit at ``beta_k`` lies above ``bound - delta`` (``delta`` = 0.05 for a share
here, ``sum_k beta_k = 0.005``). The promise:
a model that misses its bound by ``delta`` or more is passed early with probability at most 0.005, so the
sequential gate keeps the fixed-N gate's power within half a point. The promise holds when the limit covers.
A CIS_K gate's interval is the cluster share's (``metrics.intervals.cluster_mean_interval``): Korn and
Graubard's Wilson interval at the effective size, and beside it, since issue #28, a law-free limit
(``Interval.bounded``) that holds whatever the prompts' law; the rule reads the wider of the two
(``Interval.futility_limit``: since 996c374 the law-free side is the betting limit over the prompts' shares,
``metrics.intervals.betting_limit``; before, Hoeffding's and Maurer-Pontil's, too wide at the early looks for
CIS gates to stop at the ``--quick`` bench's size). An experiment (branch ``futkg``) read Korn and Graubard's
alone and cut the CIS share gates' images from 98% to 47% of fixed N (docs/sequential-bench.md), its
guarantee unmeasured. This script measures both rules' promise (``law-free``: main's rule).

**World** (as ``bench/sequential_worlds.py``'s CIS): ``M`` prompts drawn per run, each prompt's rate from a Beta
with CIS_K's population mean ``mu`` (0.8, 0.7, 0.6, 0.5 for K = 1, 2, 4, 8) and between-prompt sd ``sd``, ``J``
images per prompt (0/1: all K components shown). The bound is ``mu + delta``: the model misses it by exactly
``delta``, the futility miss (the case the promise is about; a larger miss stops less often). Looks: the
product's CIS schedule, prefixes of the prompt list at ``cis_looks(M)`` (first ``M / 16``, growing by sqrt(2)), each prompt
with all its images, ``beta_k = futility_levels(looks)``.

**Measured per (mu, sd)**: the share of runs passed early by futility under each limit (``law-free`` is main's
rule, ``KG`` Korn and Graubard's alone), with a Clopper-Pearson 95% upper bound, against 0.005; and the
power the futility stops cost: the share of runs the fixed-N gate fails at ``a = 0.05 / 1,435`` (the paper
preset's level) that were passed early (a model missing by 0.10, the kinds' meaningful miss). Every interval,
limit and p-value is the product's own code.

**What the rule saves** (``--written``): a model that did not regress, against the bound the update flow writes
(``gating.verdicts.bound_for`` at 0.99, as ``--t2i-update-thresholds`` does) from one reference run of the same
model at another seed: the share of its prompts each rule used (a look's prefix, or all ``M`` when it ran to
``N``), the runs passed early, and the runs failed at any look (false alarms: the model meets its population
value, which lies above the bound).

``python bench/bench_futility.py`` (paper size: M = 10,000, J = 16); ``--quick`` (M = 2,000, J = 16, 200
runs); ``--prompts 256 --images 4`` a small study, where few prompts make Korn and Graubard's limit weakest;
``--written`` the null model's savings.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
for _p in (REPO / "plugin", REPO / "bench"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from sequential_worlds import CIS_MEANS, _beta  # noqa: E402
from t2i_fairness.families.cis.study import cis_looks  # noqa: E402
from t2i_fairness.gating.indicator import Indicator  # noqa: E402
from t2i_fairness.gating.power import MEANINGFUL_MISS  # noqa: E402
from t2i_fairness.gating.sequential import (FUTILITY_BETA, decide_look, futility_levels,  # noqa: E402
                                            spending_shares)
from t2i_fairness.metrics.decisions import p_value_interval  # noqa: E402
from t2i_fairness.metrics.intervals import cluster_mean_interval, share_limit  # noqa: E402

PAPER_LEVEL = 0.05 / 1435  # alpha / m: the paper preset's gate tests (Holm's first step)
#: the margin measured: a team's indifference margin of half the meaningful miss (`indifference: {share: {DELTA}}` in
#: the thresholds file; the default rule before issue #45), passed to the rule as ``indifference``
DELTA = MEANINGFUL_MISS["share"] / 2


def one_run(rng, mu: float, sd: float, prompts: int, images: int, looks: list[int], bound: float) -> dict:
    """One simulated CIS_K gate decided at each look by the product's ``decide_look`` twice: on its interval as the
    product builds it (``law-free``) and on Korn and Graubard's alone (``KG``); ``early``: the look each rule
    stopped at by futility (``None``: it did not), ``fails_at_n``: the fixed-N test fails the gate."""
    a, b = _beta(mu, sd)
    rates = rng.beta(a, b, prompts)
    values = (rng.random((prompts, images)) < rates[:, None]).astype(np.float64)
    clusters = np.repeat(np.arange(prompts), images)
    shares = spending_shares([n / looks[-1] for n in looks], PAPER_LEVEL)
    betas = futility_levels(len(looks))
    early: dict = {"law-free": None, "KG": None}
    open_ = set(early)
    for k, m in enumerate(looks[:-1]):
        iv = cluster_mean_interval(values[:m].ravel(), clusters[: m * images])
        kg = dataclasses.replace(iv, bounded=None)
        # the law-free limit is the lower of the two: where Korn-Graubard's does not clear bound - delta it does not
        # either, and its p-value (a nested bisection, 0.1 s) is skipped (its early fail would need p <= a s_k ~ 1e-12)
        kg_clears = kg.limit(betas[k], "low") > bound - DELTA
        for rule in list(open_):
            if rule == "law-free" and not kg_clears:
                continue
            ev = iv if rule == "law-free" else kg
            d = decide_look(Indicator(iv.estimate, m * images, "share", ev), bound, "min", level=PAPER_LEVEL,
                            share=float(shares[k]), beta=betas[k], indifference=DELTA)
            if d.stopped:
                open_.discard(rule)
                early[rule] = k if d.reason == "futility" else None
        if not open_:
            break
    iv = cluster_mean_interval(values.ravel(), clusters)
    fails_at_n = p_value_interval(iv, bound, "min") <= PAPER_LEVEL and iv.estimate < bound
    return {"early": early, "fails_at_n": fails_at_n}


def measure(mu: float, sd: float, miss: float, *, prompts: int, images: int, runs: int, seed: int) -> dict:
    looks = cis_looks(prompts)
    betas = futility_levels(len(looks))
    bound = mu + miss
    rng = np.random.default_rng([seed, round(mu * 100), round(sd * 100), round(miss * 1000) % 2**32])
    out = {"mu": mu, "sd": sd, "miss": miss, "bound": bound, "runs": runs, "looks": looks, "beta": betas[0] if betas else None,
           "early": {"law-free": 0, "KG": 0}, "fixed_fails": 0, "lost": {"law-free": 0, "KG": 0}}
    for _ in range(runs):
        r = one_run(rng, mu, sd, prompts, images, looks, bound)
        out["fixed_fails"] += r["fails_at_n"]
        for rule, k in r["early"].items():
            if k is not None:
                out["early"][rule] += 1
                out["lost"][rule] += r["fails_at_n"]
    return out


def written_bound(mu: float, sd: float, *, prompts: int, images: int, seed: int) -> float:
    """The bound ``--t2i-update-thresholds`` writes for a CIS_K gate from one run of ``prompts`` x ``images`` of the
    model (``gating.verdicts.bound_for`` at 0.99 on the product's cluster interval), drawn at its own seed."""
    from t2i_fairness.gating.verdicts import Measurement, bound_for

    rng = np.random.default_rng([seed, 1000, round(mu * 100), round(sd * 100)])
    a, b = _beta(mu, sd)
    rates = rng.beta(a, b, prompts)
    values = (rng.random((prompts, images)) < rates[:, None]).astype(np.float64)
    iv = cluster_mean_interval(values.ravel(), np.repeat(np.arange(prompts), images))
    bound, _, problem = bound_for(Measurement("cis", iv.estimate, n=values.size, uncertainty=iv), "min", 0.99)
    if problem:
        raise RuntimeError(f"no bound written for K's mean {mu}, sd {sd}: {problem}")
    return float(bound)


def measure_written(mu: float, sd: float, *, prompts: int, images: int, runs: int, seed: int) -> dict:
    """A null model (population mean ``mu``) against the bound written at another seed: per rule, the runs passed
    early, the mean share of the ``M`` prompts used, and the runs failed (at a look or at ``N``)."""
    looks = cis_looks(prompts)
    bound = written_bound(mu, sd, prompts=prompts, images=images, seed=seed)
    rng = np.random.default_rng([seed, round(mu * 100), round(sd * 100), 7])
    out = {"mu": mu, "sd": sd, "bound": bound, "runs": runs, "looks": looks, "early": {"law-free": 0, "KG": 0},
           "used": {"law-free": 0.0, "KG": 0.0}, "fixed_fails": 0}
    for _ in range(runs):
        r = one_run(rng, mu, sd, prompts, images, looks, bound)
        out["fixed_fails"] += r["fails_at_n"]
        for rule, k in r["early"].items():
            out["early"][rule] += k is not None
            out["used"][rule] += (looks[k] if k is not None else prompts) / prompts / runs
    return out


def main_written(a, prompts: int, runs: int) -> int:
    looks = cis_looks(prompts)
    print(f"# bench_futility --written: M = {prompts} prompts x J = {a.images} images, looks {looks}, a null model "
          f"against the bound the update flow writes at another seed; {runs} runs per row")
    print("| K (mu) | sd | bound | prompts used, law-free (main) | KG alone | passed early, law-free | KG alone | "
          "failed (fixed N) |")
    print("|---|---|---|---|---|---|---|---|")
    t0 = time.perf_counter()
    used = []
    for k in a.ks:
        for sd in a.sd:
            r = measure_written(CIS_MEANS[k], sd, prompts=prompts, images=a.images, runs=runs, seed=a.seed)
            used.append(r["used"]["law-free"])
            print(f"| {k} ({r['mu']}) | {sd} | {r['bound']:.4f} | {r['used']['law-free']:.1%} | {r['used']['KG']:.1%} | "
                  f"{r['early']['law-free']}/{runs} | {r['early']['KG']}/{runs} | {r['fixed_fails']}/{runs} |", flush=True)
    print(f"# law-free (main): prompts used {min(used):.1%} to {max(used):.1%} of N over the rows; "
          f"{time.perf_counter() - t0:.0f} s")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="M = 2,000 prompts, 200 runs per row (about 3 minutes)")
    ap.add_argument("--prompts", type=int, default=None, help="prompts per K (default 10,000; --quick 2,000)")
    ap.add_argument("--images", type=int, default=16, help="images per prompt (default 16, the paper's)")
    ap.add_argument("--runs", type=int, default=None, help="runs per row (default 2,000; --quick 200)")
    ap.add_argument("--sd", type=float, nargs="+", default=[0.2, 0.3], help="between-prompt sds")
    ap.add_argument("--ks", type=int, nargs="+", default=list(CIS_MEANS), help="the Ks (CIS_K means) to run")
    ap.add_argument("--misses", type=float, nargs="+", default=None,
                    help="misses of the bound to run (default: delta and 2 delta)")
    ap.add_argument("--written", action="store_true",
                    help="a null model against the bound the update flow writes at another seed: the images it saves")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    prompts = a.prompts or (2000 if a.quick else 10000)
    runs = a.runs or (200 if a.quick else 2000)
    if a.written:
        return main_written(a, prompts, runs)
    looks = cis_looks(prompts)
    print(f"# bench_futility: M = {prompts} prompts x J = {a.images} images, looks {looks}, beta_k "
          f"{futility_levels(len(looks))[0]:.5f} (sum {FUTILITY_BETA}), delta {DELTA}, {runs} runs per row")
    print("| K (mu) | sd | miss | early passes, law-free (main) | early passes, KG alone | upper 95% KG | "
          "fixed N fails | of them passed early: law-free | KG |")
    print("|---|---|---|---|---|---|---|---|---|")
    worst = 0.0
    t0 = time.perf_counter()
    for k in a.ks:
        mu = CIS_MEANS[k]
        for sd in a.sd:
            for miss in a.misses or (DELTA, 2 * DELTA):
                r = measure(mu, sd, miss, prompts=prompts, images=a.images, runs=runs, seed=a.seed)
                e, n = r["early"], r["runs"]
                up = float(share_limit(e["KG"], n, 0.05, "high"))  # Clopper-Pearson's upper 95% bound
                if miss == DELTA:
                    worst = max(worst, up)
                f = r["fixed_fails"]
                print(f"| {k} ({mu}) | {sd} | {miss:.2f} | {e['law-free']}/{n} | {e['KG']}/{n} ({e['KG'] / n:.4f}) | {up:.4f} | "
                      f"{f}/{n} | {r['lost']['law-free']} | {r['lost']['KG']} |", flush=True)
    print(f"# KG alone: largest upper 95% bound on the early-pass rate at a miss of delta: {worst:.4f} "
          f"(promise: {FUTILITY_BETA}); {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
