"""The CIS order test under ``--t2i-sequential``: how soon a model with no order effect passes by futility, and
how often a model with one is passed early (the futility promise), by the product's own rule.

The order test (``test_cis_order_invariance``) never fails before ``N`` (its Monte Carlo permutation p cannot
reach an early look's share of the level: the test at ``N`` decides at its whole level). A look passes it by
futility when every position's inclusion lies within ``delta`` = 0.05 of the mean over positions at the look's
one-sided level ``beta_k`` (``metrics.cis.OrderEffect``: per prompt, half the within-prompt change of
``v[q] = y[order[q]] - y[q]`` between the shuffled and original images, whose mean is ``beta_q - mean(beta)``;
law-free betting limits over the prompts in draw order; ``gating.sequential.decide_look`` with the loop's
"no effect" bound ``max 0``). The promise: a model with some position ``delta`` or more from the mean (the
first-named component drawn 0.1 more often than the last, linear) is passed early with probability at most
``sum_k beta_k`` = 0.005; the order test's power at ``N`` then drops by at most that.

**World** (``metrics.cis.simulate_order_study``): ``P`` order prompts of K = 8 components (the paper preset:
1,000), ``J`` images per prompt and per shuffle (16), each component's inclusion in a prompt drawn from a Beta
of mean ``--mean`` (0.5: the largest per-image variance) and between-prompt sd ``sd``, plus the position
effect ``beta`` (linear, first-to-last ``effect``) where the prompt names it; shuffles uniform. Looks: the
product's, the CIS looks' share of the order prompts (``CisStudy.order_size``: ``ceil(P m / M)`` at
the product's ``cis_looks(M)``, ``M`` = ``--cis-prompts``), ``beta_k = futility_levels(looks)``.

**Printed per (sd, effect)**: runs passed early and the Clopper-Pearson 95% upper bound of that share; the
order test's images used as a share of its fixed-N images (a run not passed early uses all: no early fail).
The effect 0 rows are the null model's cost (``gating.sequential.NULL_SHARES[("cis", "test")]``); the 0.1 rows
the promise (<= 0.005); 0.2 (the effect the report states power against) must almost never stop early.

``python bench/bench_order_futility.py`` (the paper preset's sizes, 400 runs a row); ``--quick`` (100 runs).
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
from t2i_fairness.families.cis.study import cis_looks, order_prefix  # noqa: E402
from t2i_fairness.gating.indicator import Indicator  # noqa: E402
from t2i_fairness.gating.sequential import FUTILITY_MISS, decide_look, futility_levels, spending_shares  # noqa: E402
from t2i_fairness.metrics.cis import order_effect, simulate_order_study  # noqa: E402
from t2i_fairness.metrics.decisions import HypothesisTest  # noqa: E402

K = 8
LEVEL = 0.05 / 1435  # the paper preset's per-gate level (only the spending shares read it: no early fail)


def order_looks(order_prompts: int, cis_prompts: int, cis: list[int] | None = None) -> tuple[list[int], list[int]]:
    """The CIS looks (prompts per K; ``cis``, default the product's :func:`cis_looks`) and the order test's prompts
    at each (``CisStudy.order_size``)."""
    cis = list(cis) if cis is not None else cis_looks(cis_prompts)
    return cis, [order_prefix(order_prompts, m, cis_prompts) for m in cis]


def stopped_at(original, shuffled, order, looks: tuple[list[int], list[int]]) -> int | None:
    """The prompts of the look where the product's rule passed the order test early (``None``: ran to N)."""
    cis, sizes = looks
    betas = futility_levels(len(cis))
    shares = spending_shares([m / cis[-1] for m in cis], LEVEL)  # the loop's schedule is the CIS looks'
    for k, p in enumerate(sizes[:-1]):
        effect = order_effect(original[:p], shuffled[:p], order[:p])
        ind = Indicator(0.5, 2 * p * original.shape[1], "test", effect,
                        test=HypothesisTest(0.5, "shuffling the component order changes nothing", "bench", 0.0, None))
        if decide_look(ind, 0.0, "max", level=LEVEL, share=float(shares[k]), beta=betas[k]).reason == "futility":
            return p
    return None


def cp_upper(h: int, n: int) -> float:
    from scipy.stats import beta

    return 1.0 if h >= n else float(beta.ppf(0.975, h + 1, n - h))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=400)
    ap.add_argument("--quick", action="store_true", help="100 runs a row")
    ap.add_argument("--order-prompts", type=int, default=1000)
    ap.add_argument("--cis-prompts", type=int, default=10_000)
    ap.add_argument("--images", type=int, default=16)
    ap.add_argument("--mean", type=float, default=0.5)
    ap.add_argument("--sd", type=float, nargs="+", default=[0.2, 0.3])
    ap.add_argument("--effects", type=float, nargs="+", default=[0.0, 0.1, 0.2])
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    runs = 100 if a.quick else a.runs
    looks = order_looks(a.order_prompts, a.cis_prompts)
    t0 = time.time()
    print(f"order test futility: {a.order_prompts} prompts x {a.images} images (and their shuffles), K = {K}, looks "
          f"{looks[1]} prompts, delta {FUTILITY_MISS['test']}, sum beta_k 0.005, inclusion Beta(mean {a.mean}), {runs} runs a row")
    print(f"{'sd':>4} {'effect':>6} {'passed early':>13} {'upper 95%':>10} {'images used':>12}")
    rows = []
    for sd in a.sd:
        pa, pb = _beta(a.mean, sd)
        for effect in a.effects:
            rng = np.random.default_rng([a.seed, int(sd * 100), int(effect * 1000)])
            early, used = 0, 0.0
            for _ in range(runs):
                rates = rng.beta(pa, pb, size=(a.order_prompts, K))
                orig, shuf, order = simulate_order_study(rates, a.images, rng, effect)
                p = stopped_at(orig, shuf, order, looks)
                early += p is not None
                used += (p or a.order_prompts) / a.order_prompts
            rows.append((sd, effect, early, used / runs))
            print(f"{sd:>4} {effect:>6} {early:>6} of {runs:<4} {cp_upper(early, runs):>10.4f} {used / runs:>11.1%}",
                  flush=True)
    print(f"({time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
