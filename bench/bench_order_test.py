"""The CIS order test: false alarms and power of the position test against the old pooled-counts test and
the paper's chi-square by component, side by side, at the smoke and paper sizes (issue #28, item 3).

Each simulated order study draws, per dataset, per-prompt and per-component inclusion rates from a
population (logit-normal: prompt sd 0.7, component sd 1.0 around 0.67, so prompts and components differ as
real ones do), an image-level shift of every component's logit (sd 0.5: some images miss several
components), a uniform shuffle per prompt, and detections; a position effect adds ``delta[q]`` to the
inclusion of the component named at position ``q`` (clipped to [0, 1]). The tests are the suite's:

=============  ====================================================================================
position       ``metrics.cis.order_position_test`` (the gate's default statistic)
old counts     ``metrics.cis.order_invariance_permutation_test`` on components detected per image
               (the statistic the gate had before issue #28)
paper          ``metrics.cis.order_component_permutation_test`` (section 8.1's chi-square by component,
               with the same within-prompt permutations; ``--t2i-cis-order-test paper``)
=============  ====================================================================================

A rejection at a level ``a`` is decided as the gate decides it: Monte Carlo p with
``B = order_resamples(a)`` resamples (``B = 999`` at 0.05), ``p <= a``. Resampling stops as soon as the
count of resampled statistics at least the observed one rules a rejection out (the decision is the full
run's: more resamples cannot bring it back), so non-rejections are cheap and rejections cost all ``B``.
Rates carry two-sided 95% Clopper-Pearson intervals.

Also measured: the run-time power figure (``metrics.cis.order_position_power``: T judged by its
chi-square reference, no resampling) against the Monte Carlo test on the same studies, and the time one
gate evaluation takes at the paper's size.

Run: ``python bench/bench_order_test.py --quick`` (under 2 minutes on 2 idle cores) or without ``--quick``
(the figures in docs/calibration.md, "The CIS order test"). ``--procedural 5`` instead runs the suite's own
order gate on the procedural model with the tiny scorers at 5 seeds (100 prompts x 4 images, K = 4): the
gate's p next to the paper's way of scoring each group against its own table.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import zlib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "plugin")]

from scipy.stats import binomtest, chi2  # noqa: E402

from t2i_fairness.families.cis.options import PAPER_PRESET_GATES  # noqa: E402
from t2i_fairness.metrics import cis as cis_math  # noqa: E402
from t2i_fairness.metrics.cis import (  # noqa: E402
    order_component_permutation_test,
    order_invariance_permutation_test,
    order_position_power,
    order_position_test,
    order_resamples,
)

SMOKE_GATES = 475  # gates of a smoke-preset run (issue #28)
SIZES = {"smoke": (4, 2, 8), "issue": (100, 16, 4), "mid": (100, 16, 8), "paper": (1000, 16, 8)}
ISSUE_EFFECT = np.array([1.0, 0.7, 0.5, 0.4])  # inclusion by position, issue #28 (absolute, not added)


def rates_population(rng: np.random.Generator, m: int, k: int) -> np.ndarray:
    return 0.7 + rng.normal(0, 0.7, (m, 1)) + rng.normal(0, 1.0, (m, k))  # logits


def study(rng: np.random.Generator, m: int, n: int, k: int, effect) -> tuple[np.ndarray, ...]:
    """``(original, shuffled, order, component ids)`` of one simulated order study (module docstring).
    ``effect``: None (H0), a number (first-minus-last, linear) or the issue's absolute rates by position."""
    order = np.argsort(rng.random((m, k)), axis=1)
    position = np.argsort(order, axis=1)
    ids = np.array([rng.choice(998, k, replace=False) for _ in range(m)])
    if effect is not None and np.ndim(effect) == 1:  # the issue's: inclusion set by position alone
        p_orig = np.broadcast_to(effect[None, None, :], (m, n, k))
        p_shuf = np.broadcast_to(effect[position][:, None, :], (m, n, k))
    else:
        logit = rates_population(rng, m, k)
        delta = np.zeros(k) if effect is None else cis_math._linear_effect(k, float(effect))

        def draw(pos):
            base = 1 / (1 + np.exp(-(logit[:, None, :] + rng.normal(0, 0.5, (m, n, 1)))))
            return np.clip(base + delta[pos][:, None, :], 0, 1)

        p_orig, p_shuf = draw(np.tile(np.arange(k), (m, 1))), draw(position)
    return ((rng.random((m, n, k)) < p_orig).astype(np.uint8), (rng.random((m, n, k)) < p_shuf).astype(np.uint8),
            order, ids)


def rejects(test, level: float, seed: int) -> bool:
    """The gate's decision at ``level`` (``B = order_resamples(level)``, 999 at 0.05), stopping early once
    the exceedances rule a rejection out. ``test(n_resamples, seed) -> result with .exceed``."""
    total = 999 if level >= 0.05 else order_resamples(level)
    allowed = math.floor(level * (total + 1) + 1e-9) - 1  # p = (1 + e) / (1 + B) <= level  <=>  e <= allowed
    if allowed < 0:
        return False
    exceed, done, chunk = 0, 0, 0
    while done < total:
        b = min(total - done, 999 if chunk == 0 else 9_999)
        exceed += test(b, [seed, chunk]).exceed
        done, chunk = done + b, chunk + 1
        if exceed > allowed:
            return False
    return True


TESTS = {
    "position": lambda a, b, o, ids: lambda B, s: order_position_test(a, b, o, n_resamples=B, seed=s),
    "old counts": lambda a, b, o, ids: lambda B, s: order_invariance_permutation_test(
        a.sum(axis=2), b.sum(axis=2), a.shape[2], n_resamples=B, seed=s),
    "paper": lambda a, b, o, ids: lambda B, s: order_component_permutation_test(a, b, ids, n_resamples=B, seed=s),
}


def rate_text(hits: int, runs: int) -> str:
    ci = binomtest(hits, runs).proportion_ci(method="exact")
    return f"{hits:>4}/{runs:<4} {hits / runs:6.3f} [{ci.low:.3f}, {ci.high:.3f}]"


def scenario(name: str, size: str, effect, label: str, level: float, runs: dict[str, int], seed: int) -> None:
    """One row per test: ``runs[test]`` studies of ``size`` under ``effect``, decided at ``level``; the
    tests read the same studies (the first ``runs[test]`` of them)."""
    m, n, k = SIZES[size]
    rng = np.random.default_rng([seed, zlib.crc32(f"{name} {size}".encode())])
    data = [study(rng, m, n, k, effect) for _ in range(max(runs.values()))]
    for t, r in runs.items():
        start = time.time()
        hits = sum(rejects(TESTS[t](*data[i]), level, seed=i) for i in range(r))
        print(f"{name:<34} {size:<6} {m:>5}x{n:<3} K={k}  {label:<18} {t:<10} {rate_text(hits, r)}  "
              f"({time.time() - start:.0f} s)", flush=True)


#: (scenario, size, effect, level name, {test: (quick runs, full runs)}); "a" is alpha = 0.05
PLAN = [
    ("H0 (no order effect)", "smoke", None, "0.05", {"position": (400, 2000), "old counts": (400, 2000), "paper": (400, 2000)}),
    ("H0 (no order effect)", "smoke", None, "smoke", {"position": (100, 500), "old counts": (100, 500), "paper": (100, 500)}),
    ("H0 (no order effect)", "mid", None, "0.05", {"position": (200, 1000), "old counts": (60, 300), "paper": (200, 1000)}),
    ("H0 (no order effect)", "mid", None, "smoke", {"position": (50, 300), "old counts": (20, 100), "paper": (50, 300)}),
    ("H0 (no order effect)", "paper", None, "0.05", {"position": (20, 200), "old counts": (5, 50), "paper": (20, 200)}),
    ("first - last = 0.2, linear", "smoke", 0.2, "0.05", {"position": (200, 1000), "old counts": (200, 1000), "paper": (200, 1000)}),
    ("first - last = 0.2, linear", "smoke", 0.2, "smoke", {"position": (50, 200), "old counts": (50, 200), "paper": (50, 200)}),
    ("first - last = 0.2, linear", "paper", 0.2, "0.05", {"position": (10, 100), "old counts": (5, 50), "paper": (10, 100)}),
    ("first - last = 0.2, linear", "paper", 0.2, "paper", {"position": (2, 20), "old counts": (3, 30), "paper": (5, 50)}),
    ("first - last = 0.1, linear", "mid", 0.1, "0.05", {"position": (50, 200), "old counts": (20, 100), "paper": (50, 200)}),
    ("first - last = 0.1, linear", "mid", 0.1, "smoke", {"position": (20, 100), "old counts": (10, 50), "paper": (20, 100)}),
    ("issue: 1.0/0.7/0.5/0.4 by position", "issue", ISSUE_EFFECT, "0.05", {"position": (30, 400), "old counts": (30, 400), "paper": (30, 400)}),
    ("issue: 1.0/0.7/0.5/0.4 by position", "issue", ISSUE_EFFECT, "paper", {"position": (5, 50), "old counts": (5, 50), "paper": (5, 50)}),
]


def chi_square_reference(seed: int, runs: int) -> None:
    """The run-time power figure (T against its chi-square reference) vs the Monte Carlo test, same studies."""
    m, n, k = SIZES["mid"]
    level = 0.05 / SMOKE_GATES
    rng = np.random.default_rng([seed, 99])
    for effect in (0.0, 0.06, 0.08):
        mc = ref = 0
        for i in range(runs):
            a, b, o, ids = study(rng, m, n, k, effect)
            r = order_position_test(a, b, o, n_resamples=0)
            ref += r.dof > 0 and chi2.sf(r.statistic, r.dof) <= level
            mc += rejects(TESTS["position"](a, b, o, ids), level, seed=i)
        print(f"effect {effect:.2f} at {m}x{n} K={k}, level {level:.3g}: Monte Carlo {rate_text(mc, runs)}; "
              f"chi-square reference {rate_text(ref, runs)}", flush=True)
    rates = 1 / (1 + np.exp(-rates_population(np.random.default_rng(seed), m, k)))
    p = order_position_power(rates, n, level=level, effect=0.08, runs=runs, seed=seed)
    print(f"order_position_power at effect 0.08, {m}x{n} K={k} (its own simulator, no image-level shift): "
          f"{p.power:.3f} over {p.runs} studies", flush=True)


def timing(seed: int, quick: bool = False) -> None:
    m, n, k = SIZES["paper"]
    rng = np.random.default_rng([seed, 7])
    a, b, o, ids = study(rng, m, n, k, 0.2)
    b_paper = order_resamples(0.05 / PAPER_PRESET_GATES)
    calls = [("position", lambda: order_position_test(a, b, o, n_resamples=b_paper, seed=1)),
             ("paper", lambda: order_component_permutation_test(a, b, ids, n_resamples=b_paper, seed=1))]
    for name, call in calls[:1] if quick else calls:
        start = time.time()
        r = call()
        print(f"one gate evaluation at the paper's size ({m}x{n}, K={k}), {name}, B = {b_paper}: "
              f"{time.time() - start:.1f} s (p = {r.pvalue:.3g})", flush=True)


def procedural(seeds: int, prompts: int = 100, images: int = 4) -> None:
    """The suite's own order gate on the procedural model with the tiny scorers, ``seeds`` runs: the gate's
    p-value (both groups against the original prompt's table) next to the paper's scoring (each group
    against its own prompt's table; the line "as the paper scores"), where the tiny random CLIP's
    sensitivity to a table's wording shows. The procedural world has no order effect."""
    import json
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for s in range(seeds):
            start = time.time()
            run = subprocess.run(
                [sys.executable, "-m", "pytest", str(ROOT / "fairness_tests" / "test_cis.py"), "-q", "-p", "no:cacheprovider",
                 "-p", "no:randomly", "-k", "order_invariance", "--t2i-model", "procedural", "--t2i-cis-k", "4",
                 "--t2i-cis-prompts", str(prompts), "--t2i-cis-images", str(images), "--t2i-seed", str(s),
                 "--t2i-cache-dir", f"{tmp}/cache", "--t2i-artifacts", f"{tmp}/art{s}", "--t2i-thresholds",
                 f"{tmp}/t.yaml", "--t2i-no-progress"], cwd=ROOT, capture_output=True, text=True)
            found = list(Path(f"{tmp}/art{s}").rglob("cis_order_invariance.json"))
            if not found:
                print(f"seed {s}: no record (exit {run.returncode})\n{run.stdout[-2000:]}")
                continue
            r = json.loads(found[0].read_text())
            pos, own = r["position_test"], r["own_table_position_test"]
            print(f"procedural + tiny CLIP, {prompts}x{images} K=4, seed {s}: gate (same table) T = {pos['statistic']:.2f} "
                  f"({pos['dof']} df), permutation p = {pos['pvalue']:.4g}; paper's scoring (own tables) "
                  f"T = {own['statistic']:.2f}, asymptotic p = {own['asymptotic_pvalue']:.4g}  "
                  f"({time.time() - start:.0f} s)", flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer studies (under 2 minutes on 2 idle cores)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", metavar="TEXT", help="only the scenarios whose name contains TEXT (no chi-square "
                        "reference, no timing)")
    parser.add_argument("--procedural", type=int, default=0, metavar="SEEDS",
                        help="only: the suite's order gate on the procedural model with the tiny scorers, SEEDS runs")
    args = parser.parse_args(argv)
    if args.procedural:
        procedural(args.procedural)
        return
    q = args.quick
    levels = {"0.05": ("0.05", 0.05), "smoke": (f"a/475 = {0.05 / SMOKE_GATES:.2g}", 0.05 / SMOKE_GATES),
              "paper": (f"a/1435 = {0.05 / PAPER_PRESET_GATES:.2g}", 0.05 / PAPER_PRESET_GATES)}
    start = time.time()
    print(f"{'scenario':<34} {'size':<6} {'M x N':<9} {'K':<3}  {'level':<18} {'test':<10} rejected  rate  [95% CP]")
    for name, size, effect, level, runs in PLAN:
        if args.only and args.only not in name:
            continue
        label, value = levels[level]
        scenario(name, size, effect, label, value, {t: r[0] if q else r[1] for t, r in runs.items()}, args.seed)
    if args.only:
        return
    print()
    chi_square_reference(args.seed, 20 if q else 100)
    print()
    timing(args.seed, quick=q)
    print(f"\ntotal {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
