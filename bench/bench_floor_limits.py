"""How narrow could a law-free limit of one CIS component's rate be? The betting limit, measured.

The rate floor (``test_cis_component_rate_floor``) is the worst of about 1,000 components, each component's
rate a mean over the ~140 prompts naming it (K = 2, 4, 8 at the paper's 10,000 prompts per K), tested free of
the prompts' law since issue #28 (``metrics.intervals.bounded_mean_limit``: Hoeffding's relative-entropy and
Maurer-Pontil's empirical Bernstein bounds, Bonferroni over the two). Its futility limits are too wide for a
component near the floor to clear before ``N`` (docs/sequential-bench.md), which keeps ``--t2i-sequential`` at
about two thirds of the paper's images. The candidate this script measures is the futility rule's law-free side, the product's
``metrics.intervals.betting_limit``: a **betting** lower limit (Waudby-Smith & Ramdas 2023, "Estimating means of
bounded random variables by betting", JRSS-B: a capital process with predictable plug-in bets; a mean ``m`` is
rejected when the capital ever reaches ``1 / a``, valid for any law on [0, 1] by Ville's inequality). One-sided
lower limit: the smallest ``m`` not rejected.

**World**: ``n`` prompts naming a component, each prompt's rate from a Beta with mean ``mu`` and sd ``sd`` (the
between-prompt variance), 16 images each; a prompt's value is its share of images showing the component.
**Measured** per ``n``: the median half-width ``mean - limit`` of each limit at the futility level of the
paper's five looks (``beta_k = 0.00125``), and the betting limit's coverage at ``a = 0.05`` (the share of draws
whose limit exceeds ``mu``: at most 0.05 if valid).

``python bench/bench_floor_limits.py`` (200 draws per row, 2,000 for the coverage check); ``--quick`` (50 / 400).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
for _p in (REPO / "plugin", REPO / "bench"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from sequential_worlds import _beta  # noqa: E402
from t2i_fairness.gating.sequential import futility_levels  # noqa: E402
from t2i_fairness.metrics.intervals import betting_limit, bounded_mean_limit  # noqa: E402

IMAGES = 16


def draw(rng, mu: float, sd: float, n: int) -> np.ndarray:
    a, b = _beta(mu, sd)
    return rng.binomial(IMAGES, rng.beta(a, b, n)) / IMAGES


def widths(mu: float, sd: float, n: int, draws: int, level: float, seed: int) -> dict:
    rng = np.random.default_rng([seed, n, round(mu * 100), round(sd * 100)])
    law_free, betting = [], []
    for _ in range(draws):
        x = draw(rng, mu, sd, n)
        m, v = float(x.mean()), float(x.var(ddof=1))
        law_free.append(m - float(bounded_mean_limit(m, v, n, level, "low")))
        betting.append(m - betting_limit(x, level, "low"))
    return {"law_free": float(np.median(law_free)), "betting": float(np.median(betting))}


def coverage(mu: float, sd: float, n: int, draws: int, alpha: float, seed: int) -> float:
    """The share of draws whose betting lower limit at ``alpha`` lies above ``mu`` (valid: at most ``alpha``)."""
    rng = np.random.default_rng([seed, 7, n, round(mu * 100), round(sd * 100)])
    return float(np.mean([betting_limit(draw(rng, mu, sd, n), alpha, "low") > mu for _ in range(draws)]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="50 draws per row, 400 for coverage")
    ap.add_argument("--prompts", type=int, nargs="+", default=[9, 18, 35, 70, 140],
                    help="prompts naming the component (the paper's looks: 9, 18, 35, 70, 140 at N)")
    ap.add_argument("--sd", type=float, nargs="+", default=[0.2, 0.3])
    ap.add_argument("--mu", type=float, default=0.5)
    ap.add_argument("--draws", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    draws = a.draws or (50 if a.quick else 200)
    cover_draws = 400 if a.quick else 2000
    level = futility_levels(5)[0]
    t0 = time.perf_counter()
    print(f"# bench_floor_limits: mean {a.mu}, {IMAGES} images per prompt, level {level} (beta_k of the paper's five "
          f"looks), {draws} draws per row (median half-width), coverage at 0.05 over {cover_draws} draws")
    print("| prompts | sd | law-free (the tests': Hoeffding / Maurer-Pontil) | betting (futility's) | ratio | "
          "betting limit above the mean at 0.05 |")
    print("|---|---|---|---|---|---|")
    for sd in a.sd:
        for n in a.prompts:
            w = widths(a.mu, sd, n, draws, level, a.seed)
            cov = coverage(a.mu, sd, n, cover_draws, 0.05, a.seed)
            print(f"| {n} | {sd} | {w['law_free']:.3f} | {w['betting']:.3f} | {w['betting'] / w['law_free']:.2f} | "
                  f"{cov:.3f} |", flush=True)
    print(f"# {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
