"""The CIS_K cluster share's test with its betting law-free side: size, power and width, side by side.

A CIS_K gate (``min`` bound) fails when its estimate is below the bound AND its p-value is at most the run's
per-gate level: the p-value is the larger of Korn-Graubard's (the effective-size score test on ``G - 1`` df,
``metrics.intervals.share_limits``) and the law-free betting one over the prompts' shares in their draw order
(``metrics.intervals.betting_p_value``, Waudby-Smith & Ramdas's hedged capital, the bets tuned for
``TUNED_LEVEL``) -- ``Interval.p_value`` of ``cluster_mean_interval``. Columns: the gate ("both"), the betting
part alone and Korn-Graubard's alone.

**Worlds**: ``G`` prompts x 16 images, each image Binomial(K, q) / K with the prompt's rate ``q`` from a law:
normal (``q ~ N(0.5, 0.1)`` clipped), Beta (mean 0.5 or 0.3, intra-prompt correlation 0.1; 0.3 for CIS_8),
bimodal (10% of prompts at 0.95, 90% at 0.2), heavy-tailed (``logit q = -2 + t_2``) and rare-outlier (1% of
prompts at 1.0, the rest at 0.3). A prompt's count of ``16 K`` trials has the law's exact discrete pmf
(the binomial averaged over 400,000 seeded draws of ``q``); the truth is that pmf's mean.

**Size** (truth on the bound) at the smoke (1.03e-4) and paper (3.49e-5) levels, ``G`` from 4 to 10,000:
importance sampling (a defensive mixture of exponential tilts of the prompt's count law towards low counts,
the untilted law among them; the upper 95% bound is ``estimate + 1.645 se``), or exactly 0 where no outcome
can reach ``1 / level`` (each bet multiplies the capital by at most ``1 + c (1 - m) / m``); where the tilts
reach no failing run, Ville's inequality alone bounds the betting part (and so the gate) by the level.
**Power** at 1,000 prompts (plain simulation) against a 0.05 miss and the kind's meaningful miss (0.10).
**Width**: the median distance from the estimate to the upper limit at the paper level, the gate's (the
wider) next to Korn-Graubard's.

``python bench/bench_betting.py`` (about 3 minutes on 2 cores); ``--quick`` (a minute).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
for _p in (REPO / "plugin", REPO / "bench"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from bench_gate_sizes import Block, weighted  # noqa: E402
from t2i_fairness.gating.power import MEANINGFUL_MISS  # noqa: E402
from t2i_fairness.metrics.intervals import (TRUNCATION, TUNED_LEVEL, betting_limits, betting_p_value,  # noqa: E402
                                            cluster_share_runs, share_limits)

IMAGES = 16
LEVELS = {"smoke": 1.03e-4, "paper": 3.49e-5}
Z95 = 1.6448536269514722


def _beta(mean: float, icc: float):
    s = 1.0 / icc - 1.0
    return lambda rng, size: rng.beta(mean * s, (1.0 - mean) * s, size)


LAWS = {
    "normal": lambda rng, size: np.clip(rng.normal(0.5, 0.1, size), 0.0, 1.0),
    "beta 0.5": _beta(0.5, 0.1),
    "beta 0.3": _beta(0.3, 0.1),
    "bimodal": lambda rng, size: np.where(rng.random(size) < 0.1, 0.95, 0.2),
    "heavy": lambda rng, size: 1.0 / (1.0 + np.exp(np.clip(2.0 - rng.standard_t(2, size), -50, 50))),
    "outlier": lambda rng, size: np.where(rng.random(size) < 0.01, 1.0, 0.3),
    "beta 0.5 icc 0.3": _beta(0.5, 0.3),
}


def count_pmf(law: str, k: int, draws: int = 400_000) -> np.ndarray:
    """pmf over ``0..16 k`` of a prompt's count: Binomial(16 k, q) averaged over seeded draws of ``q``."""
    from scipy import stats

    q = LAWS[law](np.random.default_rng(11), draws)
    trials = IMAGES * k
    c = np.arange(trials + 1)
    pmf = np.zeros(trials + 1)
    for chunk in np.array_split(q, 40):
        pmf += stats.binom.pmf(c[None, :], trials, chunk[:, None]).sum(axis=0)
    return pmf / pmf.sum()


def gate_fails(counts: np.ndarray, k: int, bound: float, level: float) -> dict[str, np.ndarray]:
    """Each run's verdict (``counts``: runs x prompts, in draw order) by the product's parts of the test."""
    shares = counts / (IMAGES * k)
    runs = cluster_share_runs(counts / k, IMAGES, k == 1)
    est = runs["estimate"]
    kg = share_limits(est, runs["n_effective"], level, "high", runs["df"]) < bound
    bet = betting_p_value(shares, bound, "min") <= level
    below = est < bound
    return {"both": below & kg & bet, "betting": below & bet, "kg": below & kg}


def never_rejects(prompts: int, bound: float, level: float) -> bool:
    """No outcome of ``prompts`` units lets the betting test of a ``min`` bound reach ``1 / level``."""
    m = 1.0 - bound  # the test bets on 1 - shares against 1 - bound
    return prompts * math.log1p(TRUNCATION * (1.0 - m) / m) < math.log(1.0 / level)


def draw_tilted(block: Block, lams, runs: int, rng: np.random.Generator):
    """``runs`` ordered draws of ``block.units`` counts from a mixture of tilts; each run's weight ``p / q``."""
    comps = rng.integers(0, len(lams), size=runs)
    out = np.zeros((runs, block.units), dtype=np.int64)
    log_z = np.zeros(len(lams))
    for j, lam in enumerate(lams):
        q, log_z[j] = block.tilt(lam)
        sel = np.flatnonzero(comps == j)
        if sel.size:
            out[sel] = rng.choice(block.values.size, size=(sel.size, block.units), p=q)
    t = out.sum(axis=1).astype(float)
    log_ratio = t[:, None] * np.asarray(lams)[None, :] - block.units * log_z[None, :]
    top = log_ratio.max(axis=1, keepdims=True)
    return out, np.exp(-(top[:, 0] + np.log(np.mean(np.exp(log_ratio - top), axis=1))))


def size_row(law: str, pmf: np.ndarray, k: int, prompts: int, level: float, runs: int, rng) -> dict:
    values = np.arange(pmf.size, dtype=float)
    truth = float(pmf @ values) / (pmf.size - 1)
    if never_rejects(prompts, truth, level):
        return {"both": "0 (exact)", "betting": "0 (exact)", "kg": None, "truth": truth}
    block = Block(values, pmf, prompts)
    mean_c = float(pmf @ values)
    sd_c = math.sqrt(float(pmf @ (values - mean_c) ** 2))
    z = math.sqrt(2.0 * math.log(1.0 / level))  # the betting test's distance, in standard errors
    lams = [0.0] + [block.lam_for_mean(mean_c - (z + d) * sd_c / math.sqrt(prompts)) for d in (-1.5, -0.75, 0.0, 0.75)]
    counts, w = draw_tilted(block, lams, runs, rng)
    fails = gate_fails(counts, k, truth, level)
    out = {"truth": truth}
    for key, f in fails.items():
        e = weighted(f, w, "")
        out[key] = (e.value, e.value + Z95 * e.se, e.hits)
    return out


def power_row(pmf: np.ndarray, k: int, prompts: int, level: float, miss: float, runs: int, rng) -> dict:
    truth = float(pmf @ np.arange(pmf.size)) / (pmf.size - 1)
    counts = rng.choice(pmf.size, size=(runs, prompts), p=pmf)
    return {key: float(f.mean()) for key, f in gate_fails(counts, k, truth + miss, level).items()}


def widths(pmf: np.ndarray, k: int, prompts: int, level: float, runs: int, rng) -> tuple[float, float]:
    counts = rng.choice(pmf.size, size=(runs, prompts), p=pmf)
    runs_ = cluster_share_runs(counts / k, IMAGES, k == 1)
    est = runs_["estimate"]
    kg = share_limits(est, runs_["n_effective"], level, "high", runs_["df"])
    bet = betting_limits(counts / (IMAGES * k), level, "high", tuned=TUNED_LEVEL)
    return float(np.median(np.maximum(kg, bet) - est)), float(np.median(kg - est))


def _size_cell(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    value, upper, hits = v
    if hits == 0:  # the tilts reach no failing run: nothing measured; Ville's inequality still bounds the betting part
        return "no hit (Ville: <= level)"
    return f"{value:.2e} ({upper / LEVEL_NOW:.2f}x, {hits})"


LEVEL_NOW = 1.0


def main(argv=None) -> int:
    global LEVEL_NOW
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer runs and sizes")
    args = ap.parse_args(argv)
    t0 = time.time()
    rng = np.random.default_rng(2024)
    size_laws = ("normal", "beta 0.5", "bimodal", "heavy", "outlier")
    gs = (4, 16, 60, 1000) if args.quick else (4, 16, 60, 200, 1000, 10_000)
    runs = 1500 if args.quick else 4000
    pmfs = {(law, 1): count_pmf(law, 1) for law in LAWS if law != "beta 0.5 icc 0.3"}
    pmfs[("beta 0.5 icc 0.3", 8)] = count_pmf("beta 0.5 icc 0.3", 8)
    print("## Size of CIS_1 (16 images a prompt) at the run's level: estimate (upper 95% bound / level, hits)\n")
    for name, level in LEVELS.items():
        LEVEL_NOW = level
        print(f"### {name} level {level:g}\n")
        print("| law | truth | G | gate (both parts) | betting alone | Korn-Graubard alone |")
        print("|---|---|---|---|---|---|")
        for law in size_laws:
            for g in gs:
                r = size_row(law, pmfs[(law, 1)], 1, g, level, runs if g < 10_000 else runs // 4, rng)
                print(f"| {law} | {r['truth']:.3f} | {g:,} | {_size_cell(r['both'])} | {_size_cell(r['betting'])} | "
                      f"{_size_cell(r['kg'])} |")
        print()
    level = LEVELS["paper"]
    n_power = 500 if args.quick else 2000
    print(f"## Power at 1,000 prompts x 16 images, level {level:g} ({n_power:,} runs a cell); width at that level\n")
    print("| CIS_K, law | miss 0.05: gate | betting | Korn-Graubard | miss "
          f"{MEANINGFUL_MISS['share']:g}: gate | width: gate | Korn-Graubard |")
    print("|---|---|---|---|---|---|---|")
    for (law, k) in [(law, 1) for law in ("normal", "beta 0.5", "beta 0.3", "bimodal", "heavy", "outlier")] + \
            [("beta 0.5 icc 0.3", 8)]:
        pmf = pmfs[(law, k)]
        p05 = power_row(pmf, k, 1000, level, 0.05, n_power, rng)
        p10 = power_row(pmf, k, 1000, level, MEANINGFUL_MISS["share"], n_power // 4, rng)
        w_gate, w_kg = widths(pmf, k, 1000, level, 100 if args.quick else 300, rng)
        print(f"| CIS_{k}, {law} | {p05['both']:.3f} | {p05['betting']:.3f} | {p05['kg']:.3f} | {p10['both']:.3f} | "
              f"{w_gate:.4f} | {w_kg:.4f} |")
    print(f"\n({time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
