"""The betting bets' cap ``c`` (``min(l_t, c / m)``), side by side: 1/2 (``TRUNCATION``, the paper's) against larger
ones (``NARROW_TRUNCATION`` = 0.9 among them), every one valid (any ``c < 1`` keeps the capital positive; Ville).

**IndicTTI scores** (``bench_indic_lawfree``'s model: a prompt's cosine ``0.3 + 0.05 u + 0.01 e`` on [-1, 1], a ``min``
gate on the truth): per study, the smallest miss the product's betting test (``betting_p_value``, bets tuned for the
level, fixed ``G``) fails, found by bisection on a miss shared by all its prompts (the same prompt effects for every
``c``); the median over the studies, next to the t's and to ``law_free_reach``. ``two-point`` is the least miss
any law-free test can fail with every prompt at its mean: the law with mass at that mean and at the range's far edge,
mean on the bound, shows no edge value in ``G`` draws with chance ``(1 - p)^G``, so the miss is
``edge (level^(-1/G) - 1)`` (``law_free_reach`` writes ``edge (1 - level^(1/G))``, smaller by ``level^(1/G)``).

**CIS_1 shares** (``bench_betting``'s prompt laws, 16 images a prompt, level 3.49e-5): the betting part's power
(``betting_p_value`` tuned for ``TUNED_LEVEL``) against 0.05 and 0.10 misses at 200, 400 and 1,000 prompts, the
same draws for every ``c``.

``python bench/bench_truncation.py`` (about a minute on 2 cores).
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

from bench_betting import IMAGES, count_pmf  # noqa: E402
from bench_indic_lawfree import LEVELS, NOISE, SCORE, SPREAD, prompt_effects  # noqa: E402
from t2i_fairness.metrics.evidence import law_free_reach  # noqa: E402
from t2i_fairness.metrics.intervals import (NARROW_TRUNCATION, TRUNCATION, betting_p_value,  # noqa: E402
                                            normal_tail)

CAPS = (TRUNCATION, 0.75, NARROW_TRUNCATION, 0.99)


def smallest_failing_miss(effects: np.ndarray, level: float, cap, steps: int = 16) -> np.ndarray:
    """Per study (rows of prompt effects), the smallest miss its test fails (``cap``: a ``c``, or ``"t"``)."""
    g = effects.shape[1]
    lo, hi = np.zeros(effects.shape[0]), np.full(effects.shape[0], 1.3)
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        v = np.clip(SCORE - mid[:, None] + effects, -1.0, 1.0)
        if cap == "t":
            p = normal_tail(v.mean(axis=1), v.std(axis=1, ddof=1) / math.sqrt(g), SCORE, "min", g - 1,
                            p_floor=0.5**g)
        else:
            p = betting_p_value((v + 1.0) / 2.0, (SCORE + 1.0) / 2.0, "min", alpha=level, truncation=cap)
        fails = (v.mean(axis=1) < SCORE) & (p <= level)
        lo, hi = np.where(fails, lo, mid), np.where(fails, mid, hi)
    return hi


def score_table(runs: int, rng) -> list[str]:
    head = "  ".join(f"c={c:<11}" for c in CAPS)
    lines = [f"{'law':9} {'G':>5} {'preset':6} {'t':>6} {'2-point':>7} {'reach':>6}   {head}   (miss / reach)",
             "-" * 112]
    for law in ("normal", "gamma", "outliers"):
        for g in (16, 27, 60, 200, 1000):
            eff = SPREAD * prompt_effects(law, rng, (runs, g)) + NOISE * rng.standard_normal((runs, g))
            for name, level in LEVELS.items():
                reach = law_free_reach(1.0 - SCORE, g, level)
                two_point = (1.0 - SCORE) * (level ** (-1.0 / g) - 1.0)
                t = float(np.median(smallest_failing_miss(eff, level, "t")))
                got = [float(np.median(smallest_failing_miss(eff, level, c))) for c in CAPS]
                lines.append(f"{law:9} {g:5} {name:6} {t:6.3f} {two_point:7.3f} {reach:6.3f}   "
                             + "  ".join(f"{v:5.3f} ({v / reach:4.2f})" for v in got))
    return lines


def cis_table(runs: int, rng) -> list[str]:
    level = LEVELS["paper"]
    lines = [f"{'law':9} {'G':>5} {'miss':>5}   " + "  ".join(f"c={c:<5}" for c in CAPS), "-" * 60]
    for law in ("beta 0.5", "bimodal", "heavy"):
        pmf = count_pmf(law, 1)
        truth = float(pmf @ np.arange(pmf.size)) / (pmf.size - 1)
        for g in (200, 400, 1000):
            for miss in (0.05, 0.10):
                shares = rng.choice(pmf.size, size=(runs, g), p=pmf) / IMAGES
                below = shares.mean(axis=1) < truth + miss
                got = [float((below & (betting_p_value(shares, truth + miss, "min", truncation=c) <= level)).mean())
                       for c in CAPS]
                lines.append(f"{law:9} {g:5} {miss:5.2f}   " + "  ".join(f"{v:7.3f}" for v in got))
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=300, help="studies per score row (default 300)")
    ap.add_argument("--cis-runs", type=int, default=500, help="runs per CIS row (default 500)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    start = time.time()
    print(f"IndicTTI score: median smallest miss failed, {args.runs} studies a row (t: the jackknife-t; 2-point: the "
          "least any law-free test can; reach: law_free_reach)")
    print("\n".join(score_table(args.runs, rng)))
    print(f"\nCIS_1 betting part, power at {LEVELS['paper']:.3g}, {args.cis_runs} runs a row")
    print("\n".join(cis_table(args.cis_runs, rng)))
    print(f"\n({time.time() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
