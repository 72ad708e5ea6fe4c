"""Is the CIS drop per component's futility stop honest? Measured for the two limits its rule could read.

The drop per component (``test_cis_drop_per_component``, kind ``spread``, a ``max`` gate) is minus the least-squares
slope of CIS_K over K, a linear combination of the independent CIS_K (each K's prompts drawn apart), whose limits are
MOVER's over each CIS_K's limits (``metrics.evidence.Combination``). With a team's indifference margin ``delta``
(``indifference:`` in the thresholds file; the default rule before issue #45), ``--t2i-sequential`` passes it early
by futility when its upper limit at ``beta_k`` lies below ``bound + delta`` (``delta`` = 0.05, ``sum_k beta_k = 0.005``). The
promise: a model whose drop misses its bound by ``delta`` or more is passed early with probability at most 0.005.
Two rules:

* ``limit`` (main before this bench): MOVER over each CIS_K's test limits (``Interval.limit``: the wider of Korn and
  Graubard's and the law-free Hoeffding / Maurer-Pontil side);
* ``futility``: MOVER over each CIS_K's futility limits (``Interval.futility_limit``: the law-free side is the
  betting limit, as a CIS_K gate's own futility rule reads it; ``Combination.futility_limit``).

**World** (``bench/sequential_worlds.py``'s CIS): ``M`` prompts per K drawn per run, each prompt's rate from a Beta
with CIS_K's population mean (0.8, 0.7, 0.6, 0.5 for K = 1, 2, 4, 8: a drop of 0.04 per component) and
between-prompt sd ``sd``, ``J`` images per prompt (0/1 scores). The bound is ``0.04 - miss``: the model misses it
by exactly ``miss`` (``delta``, the case the promise is about, and twice it). Looks: the product's
``cis_looks(M)``, prefixes of each K's prompt list, ``beta_k = futility_levels(looks)``.

**Measured per (M, sd, miss)**: the runs each rule passed early by futility, with a Clopper-Pearson 95% upper
bound, against 0.005; the runs the fixed-N test fails at ``a = 0.05 / 351`` (the procedural suite's level) and, of
those, the ones each rule passed early (power lost). What the rule saves on a model that did not regress is
measured through pytest, ``bench/bench_sequential_suite.py`` (docs/sequential-bench.md).

``python bench/bench_drop_futility.py`` (M = 16 and 64, 2,000 runs per row: about 10 minutes on 2 cores;
``--prompts 500 --runs 500`` the larger study).
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

from sequential_worlds import CIS_KS, CIS_MEANS, _beta  # noqa: E402
from t2i_fairness.families.cis.study import Scored, cis_looks, drop_interval, slope_weights  # noqa: E402
from t2i_fairness.gating.power import MEANINGFUL_MISS  # noqa: E402
from t2i_fairness.gating.sequential import FUTILITY_BETA, futility_levels  # noqa: E402
from t2i_fairness.metrics.intervals import share_limit  # noqa: E402

LEVEL = 0.05 / 351  # alpha / m of the procedural suite at N 16 (351 gate tests)
DROP = -float(slope_weights(CIS_KS) @ np.array([CIS_MEANS[k] for k in CIS_KS]))  # the population drop: 0.04
#: the margin measured: a team's indifference margin of half the meaningful miss (`indifference: {spread: {DELTA}}` in
#: the thresholds file; the default rule before issue #45), passed to the rule as ``indifference``
DELTA = MEANINGFUL_MISS["spread"] / 2


def draw(rng, sd: float, prompts: int, images: int) -> list[np.ndarray]:
    out = []
    for k in CIS_KS:
        a, b = _beta(CIS_MEANS[k], sd)
        rates = rng.beta(a, b, prompts)
        out.append((rng.random((prompts, images)) < rates[:, None]).astype(np.float64))
    return out


def evidence(values: list[np.ndarray], m: int):
    """The drop's evidence on the first ``m`` prompts of each K: the product's ``families.cis.study.drop_interval``."""
    return drop_interval([Scored(k, [()] * m, v[:m], []) for k, v in zip(CIS_KS, values)])


def one_run(rng, sd: float, prompts: int, images: int, looks: list[int], bound: float) -> dict:
    values = draw(rng, sd, prompts, images)
    betas = futility_levels(len(looks))
    early = {"limit": None, "futility": None}
    for k, m in enumerate(looks[:-1]):
        if m < 2:  # no cluster interval over one prompt: the look decides nothing (as in the product)
            continue
        ev = evidence(values, m)
        edge = bound + DELTA
        for rule, read in (("limit", ev.limit), ("futility", ev.futility_limit)):
            if early[rule] is None and read(betas[k], "high") < edge:
                early[rule] = k
        if all(v is not None for v in early.values()):
            break
    full = evidence(values, prompts)
    fails = full.estimate > bound and full.p_value(bound, "max") <= LEVEL
    return {"early": early, "fails": bool(fails)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", type=int, nargs="+", default=[16, 64], help="prompts per K")
    ap.add_argument("--images", type=int, default=16, help="images per prompt (the paper's 16)")
    ap.add_argument("--runs", type=int, default=2000, help="runs per row")
    ap.add_argument("--sd", type=float, nargs="+", default=[0.2, 0.3], help="between-prompt sds")
    ap.add_argument("--misses", type=float, nargs="+", default=None, help="misses of the bound (default delta, 2 delta)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    delta = DELTA
    print(f"# bench_drop_futility: K {list(CIS_KS)}, CIS_K means {[CIS_MEANS[k] for k in CIS_KS]} (drop {DROP:.4f}), "
          f"J = {a.images} images, delta {delta}, sum beta_k {FUTILITY_BETA}, level {LEVEL:.3g}, {a.runs} runs per row")
    print("| M | looks | sd | miss | passed early: limit (before) | futility (MOVER over betting) | upper 95% | "
          "fixed N fails | of them passed early: limit | futility |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    t0 = time.perf_counter()
    worst = 0.0
    for prompts in a.prompts:
        looks = cis_looks(prompts)
        for sd in a.sd:
            for miss in a.misses or (delta, 2 * delta):
                rng = np.random.default_rng([a.seed, prompts, round(sd * 100), round(miss * 1000)])
                bound = DROP - miss
                early = {"limit": 0, "futility": 0}
                lost = {"limit": 0, "futility": 0}
                fails = 0
                for _ in range(a.runs):
                    r = one_run(rng, sd, prompts, a.images, looks, bound)
                    fails += r["fails"]
                    for rule, k in r["early"].items():
                        if k is not None:
                            early[rule] += 1
                            lost[rule] += r["fails"]
                up = float(share_limit(early["futility"], a.runs, 0.025, "high"))  # Clopper-Pearson, 95% two-sided
                if abs(miss - delta) < 1e-12:
                    worst = max(worst, up)
                print(f"| {prompts} | {len(looks)} | {sd} | {miss:.2f} | {early['limit']}/{a.runs} | "
                      f"{early['futility']}/{a.runs} | {up:.4f} | {fails}/{a.runs} | {lost['limit']} | "
                      f"{lost['futility']} |", flush=True)
    print(f"# largest upper 95% bound of the futility rule's early passes at a miss of delta: {worst:.4f} "
          f"(promise: {FUTILITY_BETA}); {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
