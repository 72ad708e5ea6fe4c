"""False-alarm rate (size) and power of every gate kind at the run's own per-gate level (issue #28, item 4).

A run of ``m`` gates holds each gate to ``alpha / m`` (Holm's first step, ``gating.verdicts.evaluate``): a gate
fails when its estimate misses the bound AND its p-value is at most ``alpha / m``. This bench measures, for
every gate kind of the suite, the probability of that event when the true value sits exactly on the bound
(the size), at the ``m`` of the paper preset and of the smoke preset (counted: the gate tests each preset
collects, as the plugin's ``FAMILY_SIZE`` counts them), at the sample sizes those presets use, and the
probability when the truth misses the bound by the kind's meaningful miss (``gating.power.MEANINGFUL_MISS``)
next to the power the gate's own report states (``Interval.power`` / ``metrics.evidence``).

How, per kind (docs/calibration.md has the table and the worlds):

* **exact** where the statistic allows: binomial shares (precision) by summing the binomial over the test's
  rejection set (the product's :func:`~t2i_fairness.metrics.intervals.share_tail`); the worst of G
  independent groups by ``1 - prod(1 - P(group rejects at alpha / G))``; spreads and parity of G groups by the
  joint law of the largest and smallest count (the rejection set of the product's MOVER / MOVER-R pair limits,
  :class:`~t2i_fairness.metrics.evidence.Pairs`, is monotone in both counts, checked); CIS_K at the smoke size
  (4 prompts x 2 images) by enumerating every prompt's count (beta-binomial); word-level influences and the
  representation gap by enumerating both sides' counts; the permutation order test by its exact validity.
* **importance sampling** elsewhere (levels of 1e-5 to 1e-8 are beyond plain simulation): exponential tilting of
  the per-unit law towards the rejection region (per-prompt counts for CIS, the count of images below the
  10th percentile for object consistency, the per-image coverage influence for coverage, the prompt values
  for IndicTTI), a defensive mixture of tilts with the untilted law among them (so every weight is at most the
  number of components), the estimator's standard error and an upper 95% bound ``estimate + 1.645 se``.
  Each sampler is validated against plain simulation at a moderate level in ``tests/test_gate_sizes.py``.

Every run is decided by the product's own functions over arrays of runs (``metrics.intervals.share_limits``,
``cluster_share_runs``, ``betting_p_value``, ``betting_limits``, ``jackknife_se_df``, ``percentile_variance``,
``normal_tail``; ``metrics.evidence.mover_limit``, ``pair_limit``, ``hoeffding_tail``), the code the scalar gates
call: a measured size is the gate's, not a copy's. The CIS shares' betting side reads the prompts in their draw
order: runs sampled as counts of each prompt sum are put in a uniformly random order first (``ordered``).

Run: ``.venv/bin/python bench/bench_gate_sizes.py --quick`` (under 3 minutes on 2 cores) or without
``--quick`` for the documented table. ``--m-smoke``/``--m-paper`` skip the live count of the gates.
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "plugin")]

from t2i_fairness.gating.power import MEANINGFUL_MISS  # noqa: E402
from t2i_fairness.metrics.evidence import Pairs, combination, mover_limit, pair_limit, pairs, worst_of  # noqa: E402
from t2i_fairness.metrics.decisions import fails  # noqa: E402
from t2i_fairness.metrics.intervals import (  # noqa: E402
    BoundedUnits,
    Interval,
    TUNED_LEVEL,
    betting_limits,
    betting_p_value,
    cluster_mean_interval,
    cluster_share_runs,
    floor_to_units,
    jackknife_se_df,
    percentile_mean_interval,
    precision_interval,
    share_effective_size,
    share_limits,
    share_tail,
)

ALPHA = 0.05  # the run's family-wise level (--t2i-alpha)
FLAG = 1.2  # a kind whose size exceeds FLAG x its level is marked
Z95 = 1.6448536269514722  # one-sided 95% normal quantile (upper bounds of simulated sizes)


# =============================================================================================
# the runs: m and the sizes per preset
# =============================================================================================

_COUNT = r"""
import sys, pytest
from t2i_fairness.runstate import FAMILY_SIZE
class Count:
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session):
        print("T2I_FAMILY_SIZE", session.config.getoption("--t2i-preset"), session.config.stash[FAMILY_SIZE])
for preset in sys.argv[1:]:
    pytest.main(["fairness_tests", "--collect-only", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                 "--t2i-preset", preset], plugins=[Count()])
"""


def count_gates(*presets: str) -> dict[str, int]:
    """The number of gates a run of ``fairness_tests`` with ``--t2i-preset <preset>`` holds (the plugin's
    ``FAMILY_SIZE``: distinct gate ids of the collected tests that use the ``gate`` fixture, the ``m`` of
    ``alpha / m``), counted by collecting the suite with the default model in a subprocess."""
    out = subprocess.run([sys.executable, "-c", _COUNT, *presets], cwd=ROOT, capture_output=True, text=True,
                         timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT / "plugin")})
    found = {}
    for line in out.stdout.splitlines():
        if line.startswith("T2I_FAMILY_SIZE"):
            _, preset, m = line.split()
            found[preset] = int(m)
    if set(found) != set(presets):
        raise RuntimeError(f"could not count the gates of {presets} (rc {out.returncode}):\n{out.stdout[-2000:]}"
                           f"\n{out.stderr[-2000:]}")
    return found


@dataclass(frozen=True)
class Preset:
    """The sample sizes a preset gives each gate kind (docs/options.md "Presets", the reference sets)."""

    name: str
    objects: int  # --t2i-objects
    images: int  # --t2i-images-per-prompt (DIG In, Decomposed-DIG)
    real_per_group: int  # real images per object-region: synthetic reference 10, GeoDE balanced 180
    regions: int  # GeoDE's 6
    cis_prompts: int
    cis_images: int
    cis_ks: tuple[int, ...]
    cis_order_prompts: int  # --t2i-cis-order-prompts: min(M, 1,000)
    indic_prompts: int  # the prompt file's prompts (the bundled sample: 4)
    indic_images: int
    wi_candidates: int  # --t2i-wi-replacements M
    wi_images: int  # ceil(images per prompt / M) per candidate prompt

    @property
    def region_fake(self) -> int:
        """Generated images of a region group (every object's prompt of the region)."""
        return self.objects * self.images

    @property
    def region_real(self) -> int:
        return self.objects * self.real_per_group

    @property
    def cis_slots(self) -> int:
        """Component slots over the rate floor's K >= 2 (every prompt names K components)."""
        return self.cis_prompts * sum(k for k in self.cis_ks if k >= 2)


PRESETS = {
    "smoke": Preset("smoke", objects=6, images=6, real_per_group=10, regions=6, cis_prompts=4, cis_images=2,
                    cis_ks=(1, 2, 4, 8), cis_order_prompts=4, indic_prompts=4, indic_images=6, wi_candidates=3, wi_images=2),
    "paper": Preset("paper", objects=27, images=60, real_per_group=180, regions=6, cis_prompts=10_000, cis_images=16,
                    cis_ks=(1, 2, 4, 8), cis_order_prompts=1_000, indic_prompts=4, indic_images=4, wi_candidates=3, wi_images=20),
}
CIS_COMPONENTS = 998  # t2i_fairness/data/imagenet_classnames_cis.txt


# =============================================================================================
# a row of the table
# =============================================================================================

@dataclass
class Row:
    """One gate kind at one preset: its size at the run's level and its power at the kind's miss."""

    kind: str
    tests: str
    preset: str
    level: float
    size: float
    upper: float | None  # upper 95% bound of a simulated size (None: exact)
    attained: str  # the bound / configuration / world that attains the size
    method: str  # exact / importance-sampled (runs) / simulated (runs)
    power: float | None = None  # measured at the stated miss
    stated: float | None = None  # what the gate's report states for that miss
    power_at: str = ""
    note: str = ""

    @property
    def ratio(self) -> float:
        return (self.upper if self.upper is not None else self.size) / self.level

    @property
    def flagged(self) -> bool:
        return bool(self.ratio > FLAG)  # NaN (not bounded) is not flagged: the table marks it "?"


def _fmt(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if x == 0:
        return "0"
    if x < 1e-9:
        return "<1e-9"
    return f"{x:.2g}" if x < 0.01 else f"{x:.3f}"


def table(rows: Sequence[Row]) -> list[str]:
    """The rows side by side: paper and smoke per kind. ``size/lvl`` uses the upper 95% bound where simulated;
    ``?`` marks a simulated size with no failing run (not bounded by these runs); ``!!`` a size above
    ``FLAG`` x the level."""
    head = (f"{'kind':<33}{'preset':<7}{'level':>9}{'size':>9}{'up95':>9}{'size/lvl':>9}{'power':>8}{'stated':>8}"
            f"  attained by; method")
    lines = [head, "-" * 120]
    for r in rows:
        ratio = "?" if math.isnan(r.ratio) else f"{r.ratio:.2f}"
        mark = " !!" if r.flagged else ""
        up = "" if r.upper is None else _fmt(r.upper)
        lines.append(f"{r.kind:<33}{r.preset:<7}{r.level:>9.3g}{_fmt(r.size):>9}{up:>9}{ratio:>9}{_fmt(r.power):>8}"
                     f"{_fmt(r.stated):>8}  {r.attained}; {r.method}{mark}")
    return lines


# =============================================================================================
# exact: binomial shares, the worst of G, spreads and parity of G groups
# =============================================================================================

#: the bounds a share's size is maximised over (its null puts the truth on each in turn)
SHARE_BOUNDS = np.round(np.arange(0.05, 0.995, 0.01), 2)


def _counts(k: int, n: int) -> np.ndarray:
    return np.r_[np.ones(k, bool), np.zeros(n - k, bool)]


def share_critical(n: int, bounds, level: float) -> np.ndarray:
    """Per bound, the largest count ``x`` a ``min`` share gate of ``n`` binomial images fails (its exact tail
    :func:`share_tail` at most ``level`` and the estimate ``x / n`` below the bound); -1 where none.

    The tail grows with ``x``, so the failing counts are ``0..crit``."""
    b = np.atleast_1d(np.asarray(bounds, dtype=float))
    ks = np.arange(n + 1)
    failing = fails(ks[None, :] / n, b[:, None], "min", p=share_tail(ks[None, :], n, b[:, None], "min"), level=level)
    return failing.sum(axis=1) - 1


def share_size(n: int, level: float, bounds=SHARE_BOUNDS) -> tuple[float, float]:
    """Exact size of a ``min`` share gate of ``n`` binomial images: ``(sup over bounds, the bound attaining it)``."""
    b = np.asarray(bounds, dtype=float)
    sizes = stats.binom.cdf(share_critical(n, b, level), n, b)
    i = int(np.argmax(sizes))
    return float(sizes[i]), float(b[i])


def worst_size(n: int, groups: int, level: float, bounds=SHARE_BOUNDS) -> tuple[float, float]:
    """Exact size of the worst of ``groups`` independent binomial groups of ``n`` (Bonferroni, every group on the
    bound): ``1 - (1 - P(group fails at level / G))^G``, sup over the bounds."""
    b = np.asarray(bounds, dtype=float)
    per = stats.binom.cdf(share_critical(n, b, level / groups), n, b)
    sizes = 1.0 - (1.0 - per) ** groups
    i = int(np.argmax(sizes))
    return float(sizes[i]), float(b[i])


def share_power_measured(n: int, level: float, bound: float, effect: float, groups: int = 1) -> tuple[float, float]:
    """(measured, stated) power of a share gate (``groups > 1``: the worst of them, one group missing by
    ``effect``, the others on the bound); stated is the product's ``power`` on intervals at the truths."""
    crit = share_critical(n, [bound], level / groups)[0]
    miss = stats.binom.cdf(crit, n, bound - effect)
    null = stats.binom.cdf(crit, n, bound)
    measured = 1.0 - (1.0 - miss) * (1.0 - null) ** (groups - 1)
    ivs = [precision_interval(_counts(int(round(n * (bound - effect))), n))]
    ivs += [precision_interval(_counts(int(round(n * bound)), n)) for _ in range(groups - 1)]
    ev = ivs[0] if groups == 1 else worst_of(ivs)
    return float(measured), float(ev.power(bound, "min", effect, level))


def pair_limit_matrix(n: int, groups: int, level: float, contrast: str) -> np.ndarray:
    """``L[i, j]``: the product's pair limit of a group with ``i`` of ``n`` against one with ``j`` of ``n``, at the
    level a spread or parity of ``groups`` groups gives each ordered pair (``level / (G (G - 1))``): MOVER's
    lower limit of ``theta_i - theta_j`` (difference) or MOVER-R's upper limit of ``theta_i / theta_j`` (ratio).

    Built by :meth:`Pairs.pair_limits` itself on one interval per count (its selection rescaled so every
    pair gets the gate's share of the level); the diagonal (the same count twice) never fails a spread of at
    least 0 or a parity below 1, and is set so."""
    ivs = tuple(precision_interval(_counts(k, n)) for k in range(n + 1))
    holder = Pairs(0.0, 0.0, 0.0, "", 0.95, n, labels=tuple(map(str, range(n + 1))), groups=ivs, contrast=contrast)
    alpha = level / (groups * (groups - 1)) * holder.selection
    side = "low" if contrast == "difference" else "high"
    lim = holder.pair_limits(alpha, side)
    np.fill_diagonal(lim, -np.inf if contrast == "difference" else np.inf)
    return lim


def pair_thresholds(lim: np.ndarray, n: int, bound: float, contrast: str) -> np.ndarray:
    """Per largest count ``b``: the largest smallest count ``a < b`` at which the gate fails (-1: none).

    A spread (``max`` gate) fails when ``L[b, a] > bound`` and ``(b - a) / n > bound``; parity (``min``) when
    ``L[a, b] < bound`` and ``a / b < bound``. Raises if the failing set is not monotone (then the joint law
    of the extremes would not decide it)."""
    ks = np.arange(n + 1)
    if contrast == "difference":
        fail = fails((ks[:, None] - ks[None, :]) / n, bound, "max", limit=lim)  # [b, a]
    else:
        with np.errstate(invalid="ignore", divide="ignore"):
            est = np.where(ks[None, :] > 0, ks[:, None] / np.maximum(ks[None, :], 1), 1.0)  # [a, b]: a / b
        fail = fails(est, bound, "min", limit=lim).T  # -> [b, a]
    fail &= ks[None, :] < ks[:, None]  # the smallest count below the largest
    # monotone: failing at (b, a) means failing at (b + 1, a) and at (b, a - 1)
    if (fail[:-1, :] & ~fail[1:, :]).any() or (fail[:, 1:] & ~fail[:, :-1]).any():
        raise ValueError(f"the {contrast} gate's failing set is not monotone at n={n}, bound={bound}")
    return fail.sum(axis=1) - 1


def extremes_probability(thr: np.ndarray, cdfs: Sequence[np.ndarray]) -> float:
    """``P((max, min) of independent counts falls where the gate fails)`` for thresholds ``thr[b]`` (fail when the
    largest count is ``b`` and the smallest at most ``thr[b]``), from each group's cdf over ``0..n``:
    ``P(max <= b, min <= a) = prod F_g(b) - prod (F_g(b) - F_g(a))``."""
    n = len(thr) - 1
    F = np.stack(cdfs)  # (G, n + 1)
    b = np.arange(n + 1)
    a = np.maximum(thr, -1)

    def joint(bb, aa):
        top = np.where(bb >= 0, F[:, np.maximum(bb, 0)], 0.0)
        low = np.where(aa >= 0, F[:, np.maximum(aa, 0)], 0.0)
        return np.prod(top, axis=0) - np.prod(top - low, axis=0)

    live = a >= 0
    return float(np.sum(np.where(live, joint(b, a) - joint(b - 1, a), 0.0)))


SPREAD_BOUNDS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5)
PARITY_BOUNDS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99)


def pair_size(n: int, groups: int, level: float, contrast: str, bounds=None, grid: int = 41,
              lim: np.ndarray | None = None) -> tuple[float, str]:
    """Exact size of a spread (``difference``) or parity (``ratio``) gate of ``groups`` binomial groups of ``n``,
    sup over the bounds and over the least favourable configurations: ``k`` groups at ``t + s`` and the rest at
    ``t`` (spread ``s``), or ``k`` at ``t`` and the rest at ``r t`` (parity ``r``), ``t`` on a grid, every
    ``k``."""
    bounds = bounds or (SPREAD_BOUNDS if contrast == "difference" else PARITY_BOUNDS)
    lim = pair_limit_matrix(n, groups, level, contrast) if lim is None else lim
    ks = np.arange(n + 1)
    best, where = 0.0, ""
    for s in bounds:
        thr = pair_thresholds(lim, n, s, contrast)
        if (thr < 0).all():
            continue
        ts = np.linspace(0.0, 1.0 - s, grid) if contrast == "difference" else np.linspace(0.02, 1.0, grid)
        for t in ts:
            hi, lo = (t + s, t) if contrast == "difference" else (t, s * t)
            f_hi, f_lo = stats.binom.cdf(ks, n, min(hi, 1.0)), stats.binom.cdf(ks, n, lo)
            for k in range(1, groups):
                p = extremes_probability(thr, [f_hi] * k + [f_lo] * (groups - k))
                if p > best:
                    best, where = p, f"bound {s:g}, {k} of {groups} groups at {hi:.3f}, {groups - k} at {lo:.3f}"
    return best, where or "no count fails at any bound"


def pair_power(n: int, groups: int, level: float, contrast: str, bound: float, t: float, effect: float,
               lim: np.ndarray | None = None) -> tuple[float, float]:
    """(measured, stated) power of a spread or parity gate with one pair missing by ``effect``: one group at
    ``t + bound + effect`` and the rest at ``t`` (spread), or one at ``(bound - effect) t`` and the rest at ``t``
    (parity); stated: the product's :meth:`Pairs.power` on intervals at the truths."""
    lim = pair_limit_matrix(n, groups, level, contrast) if lim is None else lim
    ks = np.arange(n + 1)
    thr = pair_thresholds(lim, n, bound, contrast)
    if contrast == "difference":
        odd, rest = t + bound + effect, t
    else:
        odd, rest = (bound - effect) * t, t
    cdfs = [stats.binom.cdf(ks, n, odd)] + [stats.binom.cdf(ks, n, rest)] * (groups - 1)
    measured = extremes_probability(thr, cdfs) if (thr >= 0).any() else 0.0
    ivs = [precision_interval(_counts(int(round(n * odd)), n))]
    ivs += [precision_interval(_counts(int(round(n * rest)), n)) for _ in range(groups - 1)]
    direction = "max" if contrast == "difference" else "min"
    return measured, float(pairs(ivs, contrast=contrast).power(bound, direction, effect, level))


# =============================================================================================
# cluster shares (CIS_K, the CIS rate floor's components): the product's rule, vectorised
# =============================================================================================

def beta_ab(mean: float, icc: float) -> tuple[float, float]:
    """Beta parameters of a per-prompt rate with this mean and intra-prompt correlation ``1 / (a + b + 1)``."""
    s = 1.0 / icc - 1.0
    return mean * s, (1.0 - mean) * s


def prompt_counts_law(trials: int, mean: float, icc: float) -> np.ndarray:
    """pmf over ``0..trials`` of a prompt's successes: Binomial(trials, q), q ~ Beta(mean, icc) (beta-binomial)."""
    a, b = beta_ab(mean, icc)
    return stats.betabinom.pmf(np.arange(trials + 1), trials, a, b)


def cluster_limits(runs: dict, level: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each run's cluster share and its product limits at ``level`` (``Interval.limit`` of
    ``cluster_mean_interval``'s interval): the wider of Korn-Graubard's
    (:func:`~t2i_fairness.metrics.intervals.share_limits` at the effective size, ``G - 1`` df) and the law-free
    betting limits over the prompts' shares in their order (:func:`~t2i_fairness.metrics.intervals.betting_limits`
    with the p-value's bets), from the product's statistics of the runs
    (:func:`~t2i_fairness.metrics.intervals.cluster_share_runs`, ordered: no ``multiplicity``)."""
    est, n, df = runs["estimate"], runs["n_effective"], runs["df"]
    free = {side: betting_limits(runs["shares"], level, side, tuned=TUNED_LEVEL) for side in ("low", "high")}
    return (est, np.minimum(share_limits(est, n, level, "low", df), free["low"]),
            np.maximum(share_limits(est, n, level, "high", df), free["high"]))


def cluster_share_fails(runs: dict, bound: float, level: float) -> np.ndarray:
    """Whether a ``min`` gate on each run's cluster share fails at ``level``: the estimate below the bound,
    Korn-Graubard's upper limit (:func:`~t2i_fairness.metrics.intervals.share_limits`) below it and the law-free
    betting test over the prompts' shares in their order
    (:func:`~t2i_fairness.metrics.intervals.betting_p_value`) rejecting, from the product's statistics of the
    runs (:func:`~t2i_fairness.metrics.intervals.cluster_share_runs`, ordered: no ``multiplicity``)."""
    est = runs["estimate"]
    high = share_limits(est, runs["n_effective"], level, "high", runs["df"])
    free = betting_p_value(runs["shares"], bound, "min")
    return fails(est, bound, "min", limit=high) & (free <= level)


def ordered(counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Runs of i.i.d. draws from counts of their atoms (``(runs, atoms)``, each row summing to the units): the
    atoms' indices in a uniformly random order per run (the law of ordered i.i.d. draws given the counts)."""
    counts = np.asarray(counts)
    units = int(counts[0].sum())
    idx = np.repeat(np.tile(np.arange(counts.shape[1]), counts.shape[0]), counts.ravel()).reshape(-1, units)
    return rng.permuted(idx, axis=1)


def ordered_share_fails(values: np.ndarray, counts: np.ndarray, k: int, images: int, binary: bool, bound: float,
                        level: float, rng: np.random.Generator, chunk: int = 2_000_000) -> np.ndarray:
    """:func:`cluster_share_fails` of runs given as counts of each prompt sum ``values`` (ordered in chunks)."""
    step = max(1, chunk // int(counts[0].sum()))
    out = [cluster_share_fails(cluster_share_runs(values[ordered(counts[i:i + step], rng)] / k, images, binary),
                               bound, level) for i in range(0, counts.shape[0], step)]
    return np.concatenate(out)


def cluster_interval(counts_by_prompt: np.ndarray, k: int, images: int) -> Interval:
    """The product's interval of one run (per-image values ``count / k``, one prompt label per image) from the
    prompts' per-image counts ``(prompts, images)``."""
    c = np.asarray(counts_by_prompt)
    return cluster_mean_interval((c / k).ravel(), np.repeat(np.arange(c.shape[0]), images))


# =============================================================================================
# importance sampling: exponential tilting of per-unit laws, a defensive mixture, the estimate's bound
# =============================================================================================

@dataclass(frozen=True)
class Block:
    """``units`` i.i.d. draws of a discrete law on ``values`` (a prompt's count, an image's score bin...)."""

    values: np.ndarray
    pmf: np.ndarray
    units: int

    def tilt(self, lam: float) -> tuple[np.ndarray, float]:
        """The tilted law ``q ∝ pmf exp(lam * values)`` and ``log E_p[exp(lam * values)]``."""
        v = self.values - self.values.mean()  # centred for float range; the constant cancels in q
        logw = np.log(np.maximum(self.pmf, 1e-300)) + lam * v
        top = logw.max()
        w = np.exp(logw - top) * (self.pmf > 0)
        log_z = top + math.log(w.sum()) + lam * self.values.mean()
        return w / w.sum(), log_z

    def lam_for_mean(self, target: float) -> float:
        """The tilt whose law has mean ``target`` (inside the support's range)."""
        from scipy.optimize import brentq

        lo_v, hi_v = self.values[self.pmf > 0].min(), self.values[self.pmf > 0].max()
        target = min(max(target, lo_v + 1e-9 * (hi_v - lo_v)), hi_v - 1e-9 * (hi_v - lo_v))

        def gap(lam):
            q, _ = self.tilt(lam)
            return float(q @ self.values) - target

        span = 1.0 / max(float(np.sqrt(self.pmf @ (self.values - self.pmf @ self.values) ** 2)), 1e-12)
        a, b = -span, span
        while gap(a) > 0:
            a *= 2
        while gap(b) < 0:
            b *= 2
        return float(brentq(gap, a, b, xtol=1e-12 * span))


@dataclass
class Estimate:
    """A size (or power) estimate: ``value``, its standard error, hits among ``runs`` and the method."""

    value: float
    se: float
    hits: int
    runs: int
    method: str

    @property
    def upper(self) -> float:
        """One-sided upper 95% bound: ``value + 1.645 se`` (importance sampling), or Clopper-Pearson's for
        plain simulation (``3 / runs`` with no hit)."""
        if self.method.startswith("simulated"):
            return float(stats.beta.ppf(0.95, self.hits + 1, self.runs - self.hits)) if self.hits < self.runs else 1.0
        if self.hits == 0:
            return math.nan  # no hit under the proposal: nothing bounds it (the caller says why it is 0)
        return self.value + Z95 * self.se

    @property
    def lower(self) -> float:
        if self.method.startswith("simulated"):
            return float(stats.beta.ppf(0.05, self.hits, self.runs - self.hits + 1)) if self.hits else 0.0
        return max(0.0, self.value - Z95 * self.se)


class _Scaled:
    """``1 - (1 - s)^G`` of a plainly simulated ``s``, its bounds mapped the same way (monotone)."""

    def __init__(self, value: float, inner: "Estimate", groups: int):
        self.value, self.inner, self.groups = value, inner, groups
        self.hits, self.runs, self.method, self.se = inner.hits, inner.runs, inner.method, groups * inner.se

    @property
    def upper(self) -> float:
        return 1.0 - (1.0 - self.inner.upper) ** self.groups

    @property
    def lower(self) -> float:
        return 1.0 - (1.0 - self.inner.lower) ** self.groups


def tilted_counts(blocks: Sequence[Block], lams: np.ndarray, runs: int, rng: np.random.Generator
                  ) -> tuple[list[np.ndarray], np.ndarray]:
    """``runs`` draws from the mixture (equal weights) of the tilts ``lams[j, b]`` (one row per component, one
    column per block; a row of zeros is the untilted law): each block's multinomial counts of its atoms over
    its units (``(runs, atoms)``: every statistic here is a function of them) and each run's likelihood ratio
    ``p / q`` (``q`` the mixture)."""
    lams = np.atleast_2d(np.asarray(lams, dtype=float))
    comps = rng.integers(0, lams.shape[0], size=runs)
    counts = [np.zeros((runs, block.values.size), dtype=np.int64) for block in blocks]
    log_z = np.zeros(lams.shape)
    for bi, block in enumerate(blocks):
        for j in range(lams.shape[0]):
            q, log_z[j, bi] = block.tilt(lams[j, bi])
            sel = np.flatnonzero(comps == j)
            if sel.size:
                counts[bi][sel] = rng.multinomial(block.units, q, size=sel.size)
    # log q_j / p for every run and component: sum over blocks of lam * T - units * log Z
    log_ratio = np.zeros((runs, lams.shape[0]))
    for bi, block in enumerate(blocks):
        t = counts[bi] @ block.values
        log_ratio += t[:, None] * lams[None, :, bi] - block.units * log_z[None, :, bi]
    top = log_ratio.max(axis=1, keepdims=True)
    mix = top[:, 0] + np.log(np.mean(np.exp(log_ratio - top), axis=1))
    return counts, np.exp(-mix)


def weighted(fails: np.ndarray, weights: np.ndarray | None, method: str) -> Estimate:
    """The estimate of ``P(fail)`` from runs (``weights``: likelihood ratios; ``None``: plain simulation)."""
    fails = np.asarray(fails, dtype=bool)
    n = fails.size
    if weights is None:
        h = int(fails.sum())
        return Estimate(h / n, math.sqrt(max(h / n * (1 - h / n), 0.0) / n), h, n, f"simulated, {n:,} runs")
    x = np.where(fails, weights, 0.0)
    return Estimate(float(x.mean()), float(x.std(ddof=1) / math.sqrt(n)), int(fails.sum()), n,
                    f"importance-sampled, {n:,} runs")


#: per-prompt rate means (the bound on the truth) and intra-prompt correlations the CIS sizes are maximised over
CIS_MEANS = (0.1, 0.3, 0.5, 0.7, 0.9, 0.97)
CIS_ICCS = (0.02, 0.1, 0.3)


def prompt_states(k: int, images: int, mean: float, icc: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A prompt's exact law as ``(count, binary, probability)`` states: ``count`` components seen over its
    ``images`` images (each Binomial(k, q), q ~ Beta), ``binary`` when every image saw none or all ``k``."""
    a, b = beta_ab(mean, icc)
    total = prompt_counts_law(k * images, mean, icc)
    c = np.arange(k * images + 1)
    both = np.zeros_like(total)
    from scipy.special import betaln, comb

    for j in range(images + 1):  # j images saw all k, the rest none
        both[j * k] += comb(images, j) * math.exp(betaln(a + k * j, b + k * (images - j)) - betaln(a, b))
    both = np.minimum(both, total)
    counts = np.r_[c, c]
    binary = np.r_[np.zeros(c.size, bool), np.ones(c.size, bool)]
    prob = np.r_[total - both, both]
    keep = prob > 0
    return counts[keep], binary[keep], prob[keep]


def cluster_share_exact(k: int, images: int, prompts: int, mean: float, icc: float, bound: float, level: float
                        ) -> float:
    """P(the gate fails) by enumerating every prompt's state (small ``prompts`` only)."""
    counts, binary, prob = prompt_states(k, images, mean, icc)
    idx = np.stack(np.meshgrid(*[np.arange(counts.size)] * prompts, indexing="ij"), -1).reshape(-1, prompts)
    c, p = counts[idx], np.prod(prob[idx], axis=1)
    fails = cluster_share_fails(cluster_share_runs(c / k, images, binary[idx].all(1)), bound, level)
    return float(p[fails].sum())


def _cis_lams(block: Block, mean_unit: float, sd_unit: float, level: float, direction: float = -1.0,
              spread=(-0.5, 0.0, 0.5, 1.0)) -> list[float]:
    """Tilts that put the units' mean ``z`` standard errors of the sum from the truth, ``z`` around the level's
    normal quantile (``direction`` -1: towards low values)."""
    z = stats.norm.isf(level)
    se = sd_unit / math.sqrt(block.units)
    return [block.lam_for_mean(mean_unit + direction * (z + d) * se) for d in spread]


def cluster_share_is(k: int, images: int, prompts: int, mean: float, icc: float, bound: float, level: float,
                     runs: int, rng: np.random.Generator, binary: bool, spread=(-0.5, 0.0, 0.5, 1.0)) -> Estimate:
    """P(the gate fails) by importance sampling the prompts' counts (a defensive mixture of tilts ``z + d``
    standard errors below the mean, ``d`` in ``spread``)."""
    pmf = prompt_counts_law(k * images, mean, icc)
    block = Block(np.arange(k * images + 1, dtype=float), pmf, prompts)
    m = float(pmf @ block.values)
    sd = math.sqrt(float(pmf @ (block.values - m) ** 2))
    lams = np.array([[0.0]] + [[lam] for lam in _cis_lams(block, m, sd, level, spread=spread)])
    (counts,), w = tilted_counts([block], lams, runs, rng)
    fails = ordered_share_fails(block.values, counts, k, images, binary, bound, level, rng)
    return weighted(fails, w, "")


def cluster_share_plain(k, images, prompts, mean, icc, bound, level, runs, rng, binary) -> Estimate:
    pmf = prompt_counts_law(k * images, mean, icc)
    counts = rng.multinomial(prompts, pmf, size=runs)
    v = np.arange(k * images + 1, dtype=float)
    fails = ordered_share_fails(v, counts, k, images, binary, bound, level, rng)
    return weighted(fails, None, "")


def cluster_stated_power(k: int, images: int, prompts: int, truth: float, icc: float, bound: float, effect: float,
                         level: float, binary: bool) -> float:
    """The power the gate's report states for a run that measured the truth with its expected spread."""
    pmf = prompt_counts_law(k * images, truth, icc)
    v = np.arange(k * images + 1, dtype=float)
    n_img = images * prompts
    var_sum = float(pmf @ (v / k - images * truth) ** 2)  # per prompt: (c / k - est * images)^2
    se = math.sqrt(prompts / (prompts - 1) * prompts * var_sum) / n_img
    n_eff = share_effective_size(truth, se, float(n_img), binary)
    share_var = float(pmf @ (v / (k * images) - truth) ** 2) * prompts / (prompts - 1)
    iv = Interval(truth, 0.0, 1.0, "wilson", 0.95, prompts, se=se, df=prompts - 1, n_effective=n_eff,
                  bounded=BoundedUnits(prompts, truth, share_var))
    return float(iv.power(bound, "min", effect, level))


@dataclass(frozen=True)
class Budget:
    """How hard each simulated kind works: runs per configuration and how fine the configuration grids are."""

    runs: int  # importance-sampled runs per configuration
    plain: int  # plain-simulation runs (power, moderate-level checks)
    full: bool  # the full grids (else a few configurations per kind)


def _grid(full: bool, every: Sequence, few: Sequence) -> Sequence:
    return every if full else few


def _best(cands: list[tuple[Estimate, str]]) -> tuple[Estimate, str]:
    """The configuration with the largest upper bound (the one a reader must worry about)."""
    def key(c):
        u = c[0].upper
        return c[0].value if math.isnan(u) else u
    return max(cands, key=key)


def _unless_no_hit(e: Estimate, budget: Budget, level: float, cost: int, plain: Callable[[int], Estimate],
                   largest: float = 3e8) -> Estimate:
    """An importance-sampled estimate with no failing run bounds nothing; with the full budget, and where
    ``cost`` (values per run) times the runs stays below ``largest``, plain simulation of ``4 / level`` runs
    bounds it instead (no failure in them: Clopper-Pearson's upper 95% bound ``~3 / runs < level``)."""
    runs = int(math.ceil(4.0 / level))
    if e.hits or not budget.full or cost * runs > largest:
        return e
    return plain(runs)


def cis_share_rows(preset: Preset, level: float, budget: Budget, rng: np.random.Generator) -> list[Row]:
    """``test_cis[k<K>]``: CIS_K over M prompts x N images, per-prompt rates from a Beta (mean = the bound,
    intra-prompt correlation on a grid), each image Binomial(K, q) / K."""
    rows = []
    means = _grid(budget.full, (0.05, 0.1, 0.2) + CIS_MEANS[1:], (0.05, 0.5, 0.9))
    iccs = _grid(budget.full, CIS_ICCS + (0.5,), (0.02, 0.3))
    m, n = preset.cis_prompts, preset.cis_images
    for k in preset.cis_ks:
        exact = m <= 4
        cands = []
        for mu in means:
            for icc in iccs:
                where = f"CIS {mu:g} (the bound), intra-prompt corr. {icc:g}"
                if exact:
                    p = cluster_share_exact(k, n, m, mu, icc, mu, level)
                    cands.append((Estimate(p, 0.0, 0, 0, "exact"), where))
                else:
                    e = cluster_share_is(k, n, m, mu, icc, mu, level, budget.runs, rng, k == 1)
                    cands.append((e, where))
        e, where = _best(cands)
        bound, truth, icc = 0.7, 0.6, 0.1
        if exact:
            power = cluster_share_exact(k, n, m, truth, icc, bound, level)
            method = f"exact (every prompt's count enumerated), {len(cands)} configurations"
        else:
            power = cluster_share_plain(k, n, m, truth, icc, bound, level, budget.plain, rng, k == 1).value
            method = f"importance-sampled, {e.runs:,} runs x {len(cands)} configurations"
        stated = cluster_stated_power(k, n, m, truth, icc, bound, 0.1, level, k == 1)
        rows.append(Row(f"CIS_K share (K={k})", f"test_cis[k{k}]", preset.name, level, e.value,
                        None if exact else e.upper, where, method, power, stated,
                        f"bound {bound}, truth {truth}, corr. {icc}"))
    return rows


def _slope_weights(ks: Sequence[int]) -> np.ndarray:
    from t2i_fairness.families.cis.study import slope_weights

    return np.asarray(slope_weights(list(ks)), dtype=float)


def drop_fails(parts: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]], ks: Sequence[int], bound: float
               ) -> np.ndarray:
    """Whether ``test_cis_drop_per_component`` (a ``max`` gate on minus the least-squares slope over K) fails:
    the product's MOVER lower limit (:func:`~t2i_fairness.metrics.evidence.mover_limit`) of ``sum_K a_K CIS_K``
    (``a = -slope weights``) from each CIS_K's limits at the level, clipped to the slope's range as
    :func:`~t2i_fairness.families.cis.study.drop_interval` does."""
    a = -_slope_weights(ks)
    steepest = 0.5 * float(np.abs(a).sum())
    est = sum(ak * e for ak, (e, _, _) in zip(a, parts))
    e, lo, hi = (np.stack(np.broadcast_arrays(*x)) for x in zip(*parts))
    low = mover_limit(e, lo, hi, a, "low", bounds=(-steepest, steepest))
    return fails(est, bound, "max", limit=low)


DROP_WORLDS = ((0.9, 0.0), (0.9, 0.03), (0.9, 0.085), (0.6, 0.0), (0.6, 0.05), (0.3, 0.03))


def _drop_world(ks, first: float, drop: float) -> tuple[list[float], float]:
    """CIS_K falling by ``drop`` per component from ``first`` at K = 1 (floored at 0.02); the true drop."""
    mus = [max(first - drop * (k - 1), 0.02) for k in ks]
    return mus, float(-_slope_weights(ks) @ np.asarray(mus))


def drop_certificate(preset: Preset, level: float, mus: Sequence[float], icc: float) -> float:
    """The largest MOVER lower limit of the drop over EVERY outcome, when each K's prompts are few enough to
    enumerate: the limit ``sum_K a_K e_K - sqrt(sum_K d_K^2)`` grows with each ``a_K e_K`` and falls with each
    ``d_K = a_K e_K - min(a_K l_K, a_K h_K)``, so its maximum is over each K's Pareto front of ``(a e, -d)``,
    whose product is small. Below the bound, no outcome fails the gate: its size is exactly 0."""
    ks = preset.cis_ks
    a = -_slope_weights(ks)
    m, n = preset.cis_prompts, preset.cis_images
    fronts = []
    for ak, k, mu in zip(a, ks, mus):
        counts, binary, _ = prompt_states(k, n, mu, icc)
        idx = np.stack(np.meshgrid(*[np.arange(counts.size)] * m, indexing="ij"), -1).reshape(-1, m)
        c = counts[idx]
        e, lo, hi = cluster_limits(cluster_share_runs(c / k, n, binary[idx].all(1)), level)
        ae, d = ak * e, ak * e - np.minimum(ak * lo, ak * hi)
        order = np.lexsort((d, -ae))  # by a e descending, then d ascending
        keep, best_d = [], math.inf
        for i in order:
            if d[i] < best_d:
                keep.append(i)
                best_d = d[i]
        fronts.append((ae[keep], d[keep]))
    grids = np.meshgrid(*[np.arange(len(f[0])) for f in fronts], indexing="ij")
    total = sum(f[0][g] for f, g in zip(fronts, grids))
    root = np.sqrt(sum(f[1][g] ** 2 for f, g in zip(fronts, grids)))
    return float(np.max(total - root))


def drop_is(preset: Preset, level: float, mus, icc: float, bound: float, runs: int, rng, plain: bool = False
            ) -> Estimate:
    """P(the drop gate fails) by importance sampling every K's prompt counts, tilted along the drop's gradient
    (K below the mean up, above it down), a defensive mixture around the level's normal quantile."""
    from scipy.optimize import brentq

    ks, m, n = preset.cis_ks, preset.cis_prompts, preset.cis_images
    a = -_slope_weights(ks)
    blocks = [Block(np.arange(k * n + 1, dtype=float), prompt_counts_law(k * n, mu, icc), m) for k, mu in zip(ks, mus)]
    grad = np.array([ak / (k * n * m) for ak, k in zip(a, ks)])  # d drop / d (a prompt's count)

    def mean_drop(theta):
        return sum(ak * float(b.tilt(theta * g)[0] @ b.values) / (k * n) for ak, b, g, k in zip(a, blocks, grad, ks))

    var = sum((ak / (k * n)) ** 2 * float(b.pmf @ (b.values - b.pmf @ b.values) ** 2) / m
              for ak, b, k in zip(a, blocks, ks))
    d0, sd, z = mean_drop(0.0), math.sqrt(var), stats.norm.isf(level)
    rows = [np.zeros(len(ks))]
    if not plain:
        for dz in (-0.5, 0.0, 0.5, 1.0, 2.0):
            target = d0 + (z + dz) * sd
            hi = 1.0
            while mean_drop(hi / sd * 1e-3) < target and hi < 1e12:
                hi *= 2
            if mean_drop(hi / sd * 1e-3) < target:  # beyond the largest drop these prompts can show
                theta = hi / sd * 1e-3
            else:
                theta = brentq(lambda th: mean_drop(th / sd * 1e-3) - target, 0.0, hi) / sd * 1e-3
            rows.append(theta * grad)
    counts, w = tilted_counts(blocks, np.array(rows), runs, rng)
    parts = [cluster_limits(cluster_share_runs(b.values[ordered(c, rng)] / k, n, k == 1), level)
             for c, b, k in zip(counts, blocks, ks)]
    fails = drop_fails(parts, ks, bound)
    return weighted(fails, None if plain else w, "")


def cis_drop_row(preset: Preset, level: float, budget: Budget, rng) -> Row:
    """``test_cis_drop_per_component``: minus the least-squares slope of CIS_K over K = 1, 2, 4, 8."""
    ks = preset.cis_ks
    worlds = _grid(budget.full, DROP_WORLDS, DROP_WORLDS[1:3])
    iccs = _grid(budget.full, (0.02, 0.1, 0.3), (0.1, 0.3))
    small = preset.cis_prompts <= 4
    cands = []
    for first, drop in worlds:
        for icc in iccs:
            mus, truth = _drop_world(ks, first, drop)
            where = f"CIS_1 {first:g} falling {drop:g}/component (true drop {truth:.4f} = bound), corr. {icc:g}"
            if small:
                cert = drop_certificate(preset, level, mus, icc)
                if cert <= truth:
                    cands.append((Estimate(0.0, 0.0, 0, 0, "certified"), where))
                else:
                    cands.append((drop_is(preset, level, mus, icc, truth, budget.runs, rng), where))
            else:
                cands.append((drop_is(preset, level, mus, icc, truth, budget.runs, rng), where))
    e, where = _best(cands)
    # the meaningful miss is 0.10 on the gated value itself: a true drop 0.10 above the bound
    mus, truth = _drop_world(ks, 0.9, 0.03)
    mus_alt, truth_alt = _drop_world(ks, 0.9, 0.03 + 0.1)
    power = drop_is(preset, level, mus_alt, 0.1, truth, budget.plain, rng, plain=True)
    terms = []
    for k, mu in zip(ks, mus_alt):
        n_img = preset.cis_images * preset.cis_prompts
        pmf = prompt_counts_law(k * preset.cis_images, mu, 0.1)
        v = np.arange(k * preset.cis_images + 1) / k - preset.cis_images * mu
        se = math.sqrt(preset.cis_prompts / (preset.cis_prompts - 1) * preset.cis_prompts * float(pmf @ v**2)) / n_img
        n_eff = share_effective_size(mu, se, float(n_img), k == 1)
        terms.append(Interval(mu, 0.0, 1.0, "wilson", 0.95, preset.cis_prompts, se=se, df=preset.cis_prompts - 1,
                              n_effective=n_eff))
    a = -_slope_weights(ks)
    steep = 0.5 * float(np.abs(a).sum())
    stated = combination(terms, list(a), bounds=(-steep, steep)).power(truth, "max", 0.1, level)
    method = ("certified 0 (no outcome's MOVER limit reaches the bound)" if small and e.value == 0 and not e.runs
              else f"importance-sampled, {e.runs:,} runs x {len(cands)} configurations")
    return Row("CIS drop per component", "test_cis_drop_per_component", preset.name, level, e.value,
               None if (small and not e.runs) else e.upper, where, method, power.value, float(stated),
               f"true drop {truth_alt:.3f} vs bound {truth:.3f}, corr. 0.1")


# =============================================================================================
# object consistency: mean over objects of a 10th percentile, jackknife-t (df = objects)
# =============================================================================================

@dataclass(frozen=True)
class ScoreWorld:
    """Per-image CLIP-like scores of each object: an inverse cdf on a fine grid of ``u`` (``quantiles[o]``)."""

    name: str
    u: np.ndarray
    quantiles: np.ndarray  # (objects, len(u))

    def draw(self, u: np.ndarray) -> np.ndarray:
        """Scores at uniforms ``u`` (objects, n)."""
        return np.stack([np.interp(row, self.u, q) for row, q in zip(u, self.quantiles)])

    def expected_percentile(self, n: int, q: float = 10.0) -> np.ndarray:
        """Each object's E[numpy's ``q``-th percentile of ``n`` scores], exactly: the order statistics of
        uniforms are Beta, ``E[X_(r)] = int Q(u) Beta(u; r, n - r + 1) du``."""
        h = (n - 1) * q / 100.0
        j = min(int(math.floor(h)), n - 1)
        g = h - j
        r = j + 1
        dens = (1 - g) * stats.beta.pdf(self.u, r, n - r + 1)
        if g > 0:
            dens = dens + g * stats.beta.pdf(self.u, r + 1, n - r)
        du = np.gradient(self.u)
        return (self.quantiles * dens * du).sum(axis=1) / (dens * du).sum()


def score_world(name: str, objects: int) -> ScoreWorld:
    """``normal``: N(mu_o, 0.03) per object (mu from 0.22 to 0.30); ``off-object``: 10% of images score like
    another object, N(mu_o - 0.08, 0.03), the rest N(mu_o, 0.02) (a long lower tail: where p10 lives)."""
    u = np.r_[np.geomspace(1e-9, 1e-3, 400), np.linspace(1e-3, 1 - 1e-3, 20001)[1:-1], 1 - np.geomspace(1e-3, 1e-9, 400)]
    mus = np.linspace(0.22, 0.30, objects)
    if name == "normal":
        qs = mus[:, None] + 0.03 * stats.norm.ppf(u)[None, :]
    elif name == "off-object":
        x = np.linspace(-0.25, 0.25, 40001)
        cdf = 0.1 * stats.norm.cdf(x, -0.08, 0.03) + 0.9 * stats.norm.cdf(x, 0.0, 0.02)
        qs = mus[:, None] + np.interp(u, cdf, x)[None, :]
    else:
        raise ValueError(name)
    return ScoreWorld(name, u, qs)


def consistency_fails(x: np.ndarray, bound: float, level: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The product's rule (:func:`percentile_mean_interval`, ``jackknife_t``) over runs: ``x`` is ``(runs,
    objects, n)``; returns the fails (estimate below ``bound`` and the t test's ``p <= level``), the estimates
    and the standard errors: each object's :func:`~t2i_fairness.metrics.intervals.percentile_variance` and
    :func:`~t2i_fairness.metrics.intervals.normal_tail` on ``objects`` degrees of freedom."""
    from t2i_fairness.metrics.intervals import normal_tail, percentile_variance

    objects = x.shape[1]
    est = np.percentile(x, 10.0, axis=-1).mean(axis=-1)
    se = np.sqrt(percentile_variance(x, 10.0).sum(axis=-1)) / objects
    return fails(est, bound, "min", p=normal_tail(est, se, bound, "min", objects), level=level), est, se


def consistency_runs(world: ScoreWorld, n: int, bound: float, level: float, runs: int, rng, shares=(0.1,),
                     chunk: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    """``runs`` draws of every object's ``n`` scores and the gate's verdicts. ``shares``: a defensive mixture
    of laws putting that share of the images below each object's 10% quantile (``(0.1,)``: plain); returns
    the fails and the likelihood ratios ``p / q``."""
    objects = world.quantiles.shape[0]
    shares = np.asarray(shares, dtype=float)
    comp = rng.integers(0, shares.size, size=runs)
    fails, below = np.zeros(runs, bool), np.zeros(runs)
    for start in range(0, runs, chunk):
        sl = slice(start, min(runs, start + chunk))
        p = shares[comp[sl]][:, None, None]
        size = (sl.stop - sl.start, objects, n)
        low = rng.random(size) < p
        u = np.where(low, 0.1 * rng.random(size), 0.1 + 0.9 * rng.random(size))
        x = np.stack([world.draw(uu) for uu in u])
        fails[sl] = consistency_fails(x, bound, level)[0]
        below[sl] = low.sum(axis=(1, 2))
    total = objects * n
    log_ratio = below[:, None] * np.log(shares / 0.1)[None, :] + (total - below[:, None]) * np.log((1 - shares) / 0.9)[None, :]
    top = log_ratio.max(axis=1, keepdims=True)
    w = np.exp(-(top[:, 0] + np.log(np.mean(np.exp(log_ratio - top), axis=1))))
    return fails, w


def consistency_shares(objects: int, n: int) -> tuple[float, ...]:
    """The proposal's shares below the 10% quantiles: the untilted 0.1, then 2 to 6 standard errors of the
    share of ``objects * n`` images above it."""
    sd = math.sqrt(0.09 / (objects * n))
    return (0.1,) + tuple(min(0.1 + c * sd, 0.9) for c in (2.0, 3.0, 4.0, 5.0, 6.5))


# =============================================================================================
# IndicTTI: a t test over the prompt file's G prompts (jackknife of a mean over prompts; Fieller's contrast)
# =============================================================================================

@dataclass(frozen=True)
class PromptLaw:
    """The law of one prompt's value (its score averaged over its images): a prompt effect drawn from the
    prompt population (``effect``) plus the mean of the images' noise, N(0, noise^2). Its log-density is
    tabulated by convolving the two on a grid."""

    name: str
    effect: str  # normal / gamma (skewness 1.4) / lognormal (skewness 6.2) / easy-prompts (a two-point mixture)
    spread: float  # the prompt effects' standard deviation
    noise: float  # the standard deviation of a prompt's mean image noise

    def draw(self, rng: np.random.Generator, size) -> np.ndarray:
        s = self.spread
        if self.effect == "normal":
            u = s * rng.standard_normal(size)
        elif self.effect == "gamma":
            u = s * (rng.gamma(2.0, 1.0, size) - 2.0) / math.sqrt(2.0)
        elif self.effect == "lognormal":
            m, v = math.exp(0.5), (math.e - 1.0) * math.e
            u = s * (rng.lognormal(0.0, 1.0, size) - m) / math.sqrt(v)
        elif self.effect == "easy-prompts":  # 20% of prompts are easy: + 2 sd
            easy = rng.random(size) < 0.2
            u = s * (np.where(easy, 2.0, -0.5) / 1.0)
        else:
            raise ValueError(self.effect)
        return u + self.noise * rng.standard_normal(size)

    @functools.cached_property
    def _table(self) -> tuple[np.ndarray, np.ndarray]:
        s, e = self.spread, self.noise
        x = np.linspace(-12 * (s + e), 12 * (s + e), 2**15 + 1)
        dx = x[1] - x[0]
        if self.effect == "normal":
            dens = stats.norm.pdf(x, 0.0, math.hypot(s, e))
            return x, np.log(np.maximum(dens, 1e-300))
        if self.effect == "easy-prompts":
            dens = 0.2 * stats.norm.pdf(x, 2.0 * s, e) + 0.8 * stats.norm.pdf(x, -0.5 * s, e)
            return x, np.log(np.maximum(dens, 1e-300))
        if self.effect == "gamma":
            f = stats.gamma.pdf(x / s * math.sqrt(2.0) + 2.0, 2.0) * math.sqrt(2.0) / s
        else:
            m, v = math.exp(0.5), (math.e - 1.0) * math.e
            f = stats.lognorm.pdf(x / s * math.sqrt(v) + m, 1.0) * math.sqrt(v) / s
        k = stats.norm.pdf(x, 0.0, e)
        dens = np.fft.irfft(np.fft.rfft(f, 2 * x.size) * np.fft.rfft(k, 2 * x.size))[x.size // 2: x.size // 2 + x.size] * dx
        return x, np.log(np.maximum(dens, 1e-300))

    def logpdf(self, v: np.ndarray) -> np.ndarray:
        x, logd = self._table
        return np.interp(v, x, logd, left=-690.0, right=-690.0)


def t_fails(v: np.ndarray, truth: float, level: float, floor: bool = True) -> np.ndarray:
    """The jackknife-t rule of a mean over G prompts (``v``: ``(runs, G)``, the prompts' values): estimate below
    the bound and the product's :func:`~t2i_fairness.metrics.intervals.normal_tail` at ``sd / sqrt(G)`` on
    ``G - 1`` df, floored at ``2^-G`` (:func:`~t2i_fairness.metrics.intervals.floor_to_units`; ``floor=False``:
    the bare t test) at most ``level``."""
    from t2i_fairness.metrics.intervals import normal_tail

    g = v.shape[1]
    mean, sd = v.mean(axis=1), v.std(axis=1, ddof=1)
    p = normal_tail(mean, sd / math.sqrt(g), truth, "min", g - 1, p_floor=0.5**g if floor else 0.0)
    return fails(mean, truth, "min", p=p, level=level)


def t_runs(law: PromptLaw, g: int, truth: float, level: float, runs: int, rng, tilted: bool = True,
           floor: bool = True) -> Estimate:
    """P(the t test over ``g`` prompts fails at ``level``) with the bound on the population mean (0). Importance
    sampling: a defensive mixture of the law itself and correlated normals around ``(-delta) 1`` with a small
    spread (the thin cone ``t <= -t_level`` where the test fails: every prompt low, close together)."""
    sd = math.hypot(law.spread, law.noise)
    comps = [None]
    if tilted:
        tq = stats.t.isf(level, g - 1)
        for delta in (0.5, 1.0, 1.5, 2.5):
            for ratio in (1.0, 2.0):
                spread = delta * sd / (tq / math.sqrt(g)) / ratio  # within-sample sd that puts t near -tq * ratio
                comps.append((-delta * sd, spread, 0.5 * delta * sd))
    which = rng.integers(0, len(comps), size=runs)
    v = np.empty((runs, g))
    for j, c in enumerate(comps):
        sel = np.flatnonzero(which == j)
        if c is None:
            v[sel] = law.draw(rng, (sel.size, g))
        else:
            mu, s, tau = c
            v[sel] = mu + tau * rng.standard_normal((sel.size, 1)) + s * rng.standard_normal((sel.size, g))
    fails = t_fails(v, truth, level, floor)
    if not tilted:
        return weighted(fails, None, "")
    log_p = law.logpdf(v).sum(axis=1)
    logs = []
    for c in comps:
        if c is None:
            logs.append(log_p)
        else:
            mu, s, tau = c
            cov = s**2 * np.eye(g) + tau**2 * np.ones((g, g))
            logs.append(stats.multivariate_normal.logpdf(v, mean=np.full(g, mu), cov=cov))
    logs = np.stack(logs, axis=1)
    top = logs.max(axis=1)
    log_q = top + np.log(np.mean(np.exp(logs - top[:, None]), axis=1))
    return weighted(fails, np.exp(log_p - log_q), "")


# =============================================================================================
# coverage: a pool world (k-NN balls of fixed real points, generated images from a discretised law)
# =============================================================================================

#: generated laws per object, relative to the real N(0, I_2) around the object's centre
COVERAGE_LAWS = {
    "matched": dict(shift=0.0, scale=1.0, off=0.0),  # the generator draws like the real images
    "narrow": dict(shift=0.0, scale=0.5, off=0.0),  # mode shrinkage
    "shifted": dict(shift=1.5, scale=1.0, off=0.0),  # a biased generator
    "collapsed": dict(shift=0.0, scale=0.15, off=0.0),  # near mode collapse
    "off-manifold 30%": dict(shift=0.0, scale=1.0, off=0.3),  # 30% of images land nowhere near a real one
    "off-manifold 60%": dict(shift=0.0, scale=1.0, off=0.6),
}


@dataclass
class CoverageGroup:
    """One group's fixed real balls and each object's pool of possible generated images (``pool`` atoms per
    object, each holding the balls it falls in: CSR ``indptr``/``balls``), and its images per object."""

    n_real: int
    per_object: int  # generated images of each object in a run
    indptr: list[np.ndarray]  # per object: (pool + 1,)
    balls: list[np.ndarray]  # per object: ball indices of every atom, concatenated
    hits: np.ndarray  # (objects, n_real): share of the object's pool in each ball (pi_oj)

    @property
    def objects(self) -> int:
        return len(self.indptr)

    @property
    def n_fake(self) -> int:
        return self.objects * self.per_object

    def truth(self) -> float:
        """E[coverage at this group's images]: a ball stays empty with prob prod_o (1 - pi_oj)^N."""
        miss = np.prod((1.0 - self.hits) ** self.per_object, axis=0)
        return float(1.0 - miss.mean())

    def influence(self) -> list[np.ndarray]:
        """Per object and atom: the balls it would cover that the group's other images leave empty, on average
        (the coverage's influence function), the direction the sampler tilts along."""
        miss = np.prod((1.0 - self.hits) ** self.per_object, axis=0)
        out = []
        for o, (ptr, balls) in enumerate(zip(self.indptr, self.balls)):
            alone = miss[balls] / np.maximum(1.0 - self.hits[o, balls], 1e-12)
            out.append(np.add.reduceat(np.r_[alone, 0.0], ptr[:-1]) * (np.diff(ptr) > 0) / self.n_real)
        return out


def coverage_group(law: str, objects: int, real_per_object: int, per_object: int, pool: int, seed: int
                   ) -> CoverageGroup:
    """The group's real points (N(0, I_2) around centres 20 apart, one draw of ``seed``), their k = 3 balls
    (the product's :func:`~t2i_fairness.metrics.manifold.real_radii` over the whole group), and ``pool``
    generated atoms per object from ``law``."""
    from scipy.spatial import cKDTree

    from t2i_fairness.metrics.manifold import real_radii

    rng = np.random.default_rng([seed, objects, real_per_object])
    spec = COVERAGE_LAWS[law]
    centres = np.c_[20.0 * np.arange(objects), np.zeros(objects)]
    real = np.concatenate([c + rng.standard_normal((real_per_object, 2)) for c in centres])
    radii = real_radii(real, 3, device="cpu")
    gen = np.random.default_rng([seed, objects, real_per_object, pool, 1])
    indptr, balls, hits = [], [], np.zeros((objects, real.shape[0]))
    for o, c in enumerate(centres):
        pts = c + np.r_[spec["shift"], 0.0] + spec["scale"] * gen.standard_normal((pool, 2))
        off = gen.random(pool) < spec["off"]
        pts[off] = c + np.r_[0.0, 10.0]  # far from every ball (centres are 20 apart, balls are small)
        tree = cKDTree(pts)
        members = [[] for _ in range(pool)]
        lo, hi = o * real_per_object, (o + 1) * real_per_object
        for j in range(lo, hi):
            for a in tree.query_ball_point(real[j], radii[j] * (1 - 1e-12)):  # the product's d < r
                members[a].append(j)
        ptr = np.r_[0, np.cumsum([len(m) for m in members])]
        flat = np.fromiter((j for m in members for j in m), dtype=np.int64, count=int(ptr[-1]))
        indptr.append(ptr)
        balls.append(flat)
        hits[o] = np.bincount(flat, minlength=real.shape[0]) / pool
    return CoverageGroup(real.shape[0], per_object, indptr, balls, hits)


def coverage_sample(group: CoverageGroup, comp: np.ndarray, lams: Sequence[float], rng: np.random.Generator
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One draw of the group's images per run, run ``r`` from the law ``q ∝ p exp(-lams[comp[r]] h)`` (``h`` the
    coverage influence of :meth:`CoverageGroup.influence`; ``lam > 0`` lowers the coverage, ``lam < 0`` raises
    it, ``0`` is the group's own law). Returns each run's coverage, its jackknife-Wilson effective size (the
    product's ``coverage_interval``, vectorised: :func:`coverage_stats`), and ``log q_j / p`` for every
    component ``j`` (``(runs, J)``)."""
    lams = np.asarray(lams, dtype=float)
    h = group.influence()
    runs = comp.size
    log_ratio = np.zeros((runs, lams.size))
    draws = []
    for o in range(group.objects):
        picks = np.empty((runs, group.per_object), dtype=np.int64)
        for j, lam in enumerate(lams):
            logw = -lam * h[o]
            top = float(logw.max())
            q = np.exp(logw - top)
            sel = np.flatnonzero(comp == j)
            if sel.size:
                picks[sel] = rng.choice(h[o].size, size=(sel.size, group.per_object), p=q / q.sum())
        for j, lam in enumerate(lams):  # every component's log q_j / p at the atoms drawn
            logw = -lam * h[o]
            top = float(logw.max())
            logz = top + math.log(np.exp(logw - top).mean())
            log_ratio[:, j] += logw[picks].sum(axis=1) - group.per_object * logz
        draws.append(picks)
    est, n_eff, df = coverage_stats(group, draws)
    return est, n_eff, df, log_ratio


def coverage_stats(group: CoverageGroup, draws: Sequence[np.ndarray]
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each run's coverage, jackknife-Wilson effective size and the jackknife's effective degrees of freedom
    from the atoms drawn per object (``draws[o]``: ``(runs, per_object)``): removing image ``i`` uncovers the
    balls only it covers; ``n_eff = c (1 - c) / var`` capped at the balls, the balls when the variance is 0, at
    least 1; ``df = (sum d^2)^2 / sum d^4`` (1 when the variance is 0): ``coverage_interval``'s
    ``jackknife_wilson`` and ``jackknife_wilson_df`` by the product's own
    :func:`~t2i_fairness.metrics.intervals.jackknife_se_df` and
    :func:`~t2i_fairness.metrics.intervals.share_effective_size`."""
    runs = draws[0].shape[0]
    n, R = group.n_fake, group.n_real
    image_ids, ball_ids = [], []
    base = 0
    for o, picks in enumerate(draws):
        ptr, balls = group.indptr[o], group.balls[o]
        lens = ptr[picks + 1] - ptr[picks]  # (runs, per_object)
        img = base + np.arange(picks.shape[1])[None, :] + n * np.arange(runs)[:, None]  # global image id
        rep_img = np.repeat(img.ravel(), lens.ravel())
        starts = np.repeat(ptr[picks].ravel(), lens.ravel())
        offs = np.arange(lens.sum()) - np.repeat(np.cumsum(lens.ravel()) - lens.ravel(), lens.ravel())
        image_ids.append(rep_img)
        ball_ids.append(balls[starts + offs])
        base += picks.shape[1]
    image_ids, ball_ids = np.concatenate(image_ids), np.concatenate(ball_ids)
    run_of = image_ids // n
    key = run_of * R + ball_ids
    counts = np.bincount(key, minlength=runs * R)
    covered = (counts > 0).reshape(runs, R).sum(axis=1)
    alone = np.bincount(image_ids, weights=(counts[key] == 1).astype(float), minlength=runs * n).reshape(runs, n)
    jack = (covered[:, None] - alone) / R
    est = covered / R
    se, df = jackknife_se_df(jack)
    return est, share_effective_size(est, se, float(R), True), df


def mixture_weights(log_ratio: np.ndarray) -> np.ndarray:
    """``p / q`` for the equal mixture ``q`` of components whose ``log q_j / p`` are the columns."""
    top = log_ratio.max(axis=1, keepdims=True)
    return np.exp(-(top[:, 0] + np.log(np.mean(np.exp(log_ratio - top), axis=1))))


def coverage_tilts(group: CoverageGroup, level: float, spread=(-0.5, 0.0, 0.5, 1.0, 2.0), sign: float = 1.0,
                   factor: float = 1.0) -> list[float]:
    """Tilts that move the coverage ``z + d`` of its standard deviations towards failing (``sign`` +1: down),
    ``z`` the level's normal quantile: to first order the coverage moves by ``-lam sum_o N Var_o(h)`` (its
    influence function ``h``) while its variance is ``sum_o N Var_o(h)``."""
    h = group.influence()
    var = sum(group.per_object * float(np.var(ho)) for ho in h)
    if var <= 0:
        return [0.0]
    z = stats.norm.isf(level) * factor
    return [0.0] + [sign * (z + d) / math.sqrt(var) for d in spread]


def coverage_fails(est, n_eff, bound: float, level: float, df=None) -> np.ndarray:
    """The product's coverage gate, vectorised: estimate below the bound and ``Interval.p_value <= level``: the
    exact binomial tail at the effective size (``jackknife_wilson``), or with ``df`` (``jackknife_wilson_df``)
    Clopper-Pearson's limit at ``n_eff (z / t_df)^2`` trials below the bound (``Interval.limit``)."""
    est = np.asarray(est)
    if df is None:
        return fails(est, bound, "min", p=share_tail(est * n_eff, n_eff, bound, "min"), level=level)
    return fails(est, bound, "min", limit=share_limits(est, n_eff, level, "high", df))


def coverage_size(group: CoverageGroup, level: float, runs: int, rng, plain: bool = False,
                  bound: float | None = None, with_df: bool = True) -> Estimate:
    """P(the coverage gate fails) with the bound at the truth (or at ``bound``); ``with_df``: the product's
    ``jackknife_wilson_df`` (the default), else ``jackknife_wilson`` (the default before issue #28's measurements)."""
    bound = group.truth() if bound is None else bound
    lams = (0.0,) if plain else coverage_tilts(group, level)
    est, n_eff, df, log_ratio = coverage_sample(group, rng.integers(0, len(lams), size=runs), lams, rng)
    fails = coverage_fails(est, n_eff, bound, level, df if with_df else None)
    return weighted(fails, None if plain else mixture_weights(log_ratio), "")


def pair_fails(g: tuple[np.ndarray, np.ndarray], h: tuple[np.ndarray, np.ndarray], groups: int, level: float,
               contrast: str, bound: float) -> np.ndarray:
    """Whether the ordered pair ``(g, h)`` (each ``(est, n_eff)`` per run) makes a spread or parity gate of
    ``groups`` groups fail: MOVER's lower limit of ``g - h`` above ``bound`` (with ``g - h > bound``), or
    MOVER-R's upper limit of ``g / h`` below it (with ``g / h < bound``), each group's limits at
    ``level / (G (G - 1))``: the product's :func:`~t2i_fairness.metrics.evidence.pair_limit`, as
    :class:`~t2i_fairness.metrics.evidence.Pairs` reads it."""
    a = level / (groups * (groups - 1))
    (eg, ng), (eh, nh) = g, h
    lg, hg = share_limits(eg, ng, a, "low"), share_limits(eg, ng, a, "high")
    lh, hh = share_limits(eh, nh, a, "low"), share_limits(eh, nh, a, "high")
    if contrast == "difference":
        low = pair_limit("difference", "low", eg, lg, hg, eh, lh, hh)
        return fails(eg - eh, bound, "max", limit=low)
    up = pair_limit("ratio", "high", eg, lg, hg, eh, lh, hh)
    with np.errstate(divide="ignore", invalid="ignore"):
        est = np.where(eh > 0, eg / np.maximum(eh, 1e-300), 1.0)
    return fails(est, bound, "min", limit=up)


def coverage_pair_size(first: CoverageGroup, second: CoverageGroup, groups: int, level: float, contrast: str,
                       bound: float, runs: int, rng, plain: bool = False) -> Estimate:
    """P(the ordered pair (first, second) fails a spread / parity gate of ``groups`` groups), importance-sampled
    with the pair tilted apart (spread: first up, second down; parity: first down, second up)."""
    sign = 1.0 if contrast == "difference" else -1.0  # +1: the first group up
    a = level / (groups * (groups - 1))
    t1 = coverage_tilts(first, a, sign=-sign, factor=0.75)
    t2 = coverage_tilts(second, a, sign=sign, factor=0.75)
    pairs_ = [(0.0, 0.0)] if plain else [(0.0, 0.0)] + [(x, y) for x, y in zip(t1[1:], t2[1:])]
    comp = rng.integers(0, len(pairs_), size=runs)
    e1, n1, _, r1 = coverage_sample(first, comp, [p[0] for p in pairs_], rng)
    e2, n2, _, r2 = coverage_sample(second, comp, [p[1] for p in pairs_], rng)
    fails = pair_fails((e1, n1), (e2, n2), groups, level, contrast, bound)
    return weighted(fails, None if plain else mixture_weights(r1 + r2), "")


def template_fails(new: Sequence[tuple[np.ndarray, np.ndarray]], old: Sequence[tuple[np.ndarray, np.ndarray]],
                   level: float, bound: float) -> np.ndarray:
    """``test_template_improvement``: a ``min`` gate on worst(new) - worst(old), MOVER over the two templates'
    worst-of limits (each the least of its groups' limits at ``level / G``), clipped to [-1, 1]: the product's
    :func:`~t2i_fairness.metrics.evidence.mover_limit` over :func:`~t2i_fairness.metrics.intervals.share_limits`."""
    def worst(groups_):
        est = np.min([e for e, _ in groups_], axis=0)
        lims = [(share_limits(e, n, level / len(groups_), "low"), share_limits(e, n, level / len(groups_), "high"))
                for e, n in groups_]
        return est, np.min([lo for lo, _ in lims], axis=0), np.min([hi for _, hi in lims], axis=0)

    en, ln, hn = worst(new)
    eo, lo, ho = worst(old)
    high = mover_limit([en, eo], [ln, lo], [hn, ho], [1.0, -1.0], "high", bounds=(-1.0, 1.0))
    return fails(en - eo, bound, "min", limit=high)


def template_size(group: CoverageGroup, groups: int, level: float, runs: int, rng, plain: bool = False
                  ) -> Estimate:
    """P(the template improvement fails) with both templates' ``groups`` regions alike (true improvement 0,
    the bound): every new region tilted down, every old one up, a mixture of strengths."""
    t = coverage_tilts(group, level / groups, factor=0.6)
    lams = [0.0] if plain else t
    comp = rng.integers(0, len(lams), size=runs)
    new, old, log_ratio = [], [], 0.0
    for _ in range(groups):
        e, n, _, r = coverage_sample(group, comp, lams, rng)
        new.append((e, n))
        log_ratio = log_ratio + r
        e, n, _, r = coverage_sample(group, comp, [-x for x in lams], rng)
        old.append((e, n))
        log_ratio = log_ratio + r
    fails = template_fails(new, old, level, 0.0)
    return weighted(fails, None if plain else mixture_weights(log_ratio), "")


# =============================================================================================
# the rows: one function per family of kinds
# =============================================================================================

def precision_rows(preset: Preset, level: float, with_pairs: bool = True) -> list[Row]:
    """Exact rows of the binomial-share kinds (DIG In and Decomposed-DIG precision); ``with_pairs=False``: the
    four single and worst-of rows only (the cheap ones)."""
    effect = MEANINGFUL_MISS["share"]
    rows = []
    region, obj = preset.region_fake, preset.images
    for kind, tests, n, groups in (
            ("precision (region)", "test_region_precision, test_obj_precision, test_bg_precision", region, 1),
            ("precision (object-region)", "test_object_region_precision", obj, 1),
            ("worst-of-6 precision (region)", "test_worst_region_precision", region, preset.regions),
            ("worst-of-6 precision (object)", "test_object_worst_region_precision", obj, preset.regions)):
        if groups == 1:
            size, bound = share_size(n, level)
        else:
            size, bound = worst_size(n, groups, level)
        power, stated = share_power_measured(n, level, 0.8, effect, groups)
        where = f"bound {bound:g}, n={n}" + (f", all {groups} groups on it" if groups > 1 else "")
        rows.append(Row(kind, tests, preset.name, level, size, None, where,
                        f"exact (binomial over {len(SHARE_BOUNDS)} bounds 0.05..0.99)", power, stated,
                        "bound 0.8, one group at 0.7"))
    if not with_pairs:
        return rows
    for kind, tests, contrast in (("parity-of-6 precision (region)", "test_region_disparity_precision", "ratio"),
                                  ("spread-of-6 precision (region)", "test_region_spread[...precision]", "difference")):
        lim = pair_limit_matrix(region, preset.regions, level, contrast)
        size, where = pair_size(region, preset.regions, level, contrast, lim=lim)
        bound, t = (0.1, 0.45) if contrast == "difference" else (0.8, 0.8)
        power, stated = pair_power(region, preset.regions, level, contrast, bound, t, MEANINGFUL_MISS[
            "spread" if contrast == "difference" else "ratio"], lim=lim)
        rows.append(Row(kind, tests, preset.name, level, size, None, f"{where}, n={region}",
                        "exact (joint law of the largest and smallest count; configurations k x t)", power,
                        stated, f"bound {bound}, one group off by 0.1 (t={t})"))
    return rows


def coverage_world_groups(preset: Preset, laws: Sequence[str], pool: int, seed: int = 0
                          ) -> dict[tuple[str, str], CoverageGroup]:
    """The region and object-region coverage groups of each law at the preset's sizes."""
    out = {}
    for law in laws:
        out[("region", law)] = coverage_group(law, preset.objects, preset.real_per_group, preset.images, pool, seed)
        out[("object", law)] = coverage_group(law, 1, preset.real_per_group, preset.images, pool, seed)
    return out


def coverage_power(group: CoverageGroup, level: float, runs: int, rng, groups: int = 1, with_df: bool = True
                   ) -> tuple[float, float]:
    """(measured, stated) power of a coverage gate whose bound is 0.1 above the group's truth (``groups > 1``: the
    worst of them, that group missing and the others on the bound; measured by plain simulation; stated: the
    median over those runs of ``Interval.power`` at the run's effective size and degrees of freedom)."""
    effect = MEANINGFUL_MISS["coverage"]
    bound = group.truth() + effect
    a = level / groups
    est, n_eff, df, _ = coverage_sample(group, np.zeros(runs, int), [0.0], rng)
    df_ = df if with_df else None
    miss = float(coverage_fails(est, n_eff, bound, a, df_).mean())
    stated = float(np.median([
        Interval(e, 0.0, 1.0, "jackknife_wilson", 0.95, group.n_fake, n_effective=float(n),
                 df=float(d) if with_df else None).power(bound, "min", effect, a)
        for e, n, d in list(zip(est, n_eff, df))[:200]]))
    if groups == 1:
        return miss, stated
    # the others on the bound: each fails at level / G with the probability of a group at its truth
    est0, n0, df0, _ = coverage_sample(group, np.zeros(runs, int), [0.0], rng)
    null = float(coverage_fails(est0, n0, group.truth(), a, df0 if with_df else None).mean())
    return 1.0 - (1.0 - miss) * (1.0 - null) ** (groups - 1), stated


def coverage_old_rows(preset: Preset, level: float, budget: Budget, rng, pools: dict) -> list[Row]:
    """The single-group coverage kinds under ``coverage_interval(method="jackknife_wilson")``, the default before
    these measurements (no degrees of freedom for the jackknife variance): what the df correction fixed."""
    laws = list(dict.fromkeys(law for _, law in pools))
    rows = []
    for scope in ("region", "object"):
        cands = []
        for law in laws:
            g = pools[(scope, law)]
            # where plain runs are cheap they bound it directly
            plain = int(math.ceil(10.0 / level))
            if budget.full and g.n_fake * g.n_real * plain <= 3e8:
                e = coverage_size(g, level, plain, rng, plain=True, with_df=False)
            else:
                e = coverage_size(g, level, budget.runs, rng, with_df=False)
            cands.append((e, f"{law} world, truth {g.truth():.3f} = bound ({g.n_real} balls, {g.n_fake} images)"))
        e, where = _best(cands)
        power, stated = coverage_power(pools[(scope, "matched")], level, budget.plain, rng, with_df=False)
        label = "region" if scope == "region" else "object-region"
        how = "simulated" if e.method.startswith("simulated") else "importance-sampled"
        rows.append(Row(f"coverage ({scope}) old, no df", "(coverage_interval jackknife_wilson)", preset.name,
                        level, e.value, e.upper, where, f"{how}, {e.runs:,} runs x {len(cands)} worlds", power,
                        stated, "matched world, bound 0.1 above its truth"))
    return rows


def coverage_rows(preset: Preset, level: float, budget: Budget, rng, pools: dict) -> list[Row]:
    """Coverage kinds (single, worst-of-6, parity and spread of 6, template improvement) on the pool world."""
    laws = list(dict.fromkeys(law for _, law in pools))
    rows = []
    G = preset.regions
    for scope, tests, worst_tests in (
            ("region", "test_region_coverage, test_obj_coverage, test_bg_coverage",
             "test_worst_region_coverage, test_worst_region_bg_coverage"),
            ("object", "test_object_region_coverage", "test_object_worst_region_coverage")):
        label = "region" if scope == "region" else "object-region"
        single, worst = [], []
        for law in laws:
            g = pools[(scope, law)]
            where = f"{law} world, truth {g.truth():.3f} = bound ({g.n_real} balls, {g.n_fake} images)"
            single.append((_unless_no_hit(coverage_size(g, level, budget.runs, rng), budget, level,
                                          g.n_fake * g.n_real, lambda n: coverage_size(g, level, n, rng, plain=True)),
                           where))
            e = _unless_no_hit(coverage_size(g, level / G, budget.runs, rng), budget, level / G, g.n_fake * g.n_real,
                               lambda n: coverage_size(g, level / G, n, rng, plain=True))
            # the G groups independent, all on the bound: 1 - (1 - s)^G (a plain estimate keeps its exact bound)
            value = 1.0 - (1.0 - e.value) ** G
            worst.append((Estimate(value, G * e.se, e.hits, e.runs, e.method) if not e.method.startswith("simulated")
                          else _Scaled(value, e, G), where))
        base = pools[(scope, "matched")]
        for kind, cands, groups, tst in ((f"coverage ({label})", single, 1, tests),
                                         (f"worst-of-6 coverage ({label.split('-')[0]})", worst, G, worst_tests)):
            e, where = _best(cands)
            power, stated = coverage_power(base, level, budget.plain, rng, groups)
            rows.append(Row(kind, tst, preset.name, level, e.value, e.upper, where,
                            f"importance-sampled, {budget.runs:,} runs x {len(cands)} worlds", power, stated,
                            "matched world, bound 0.1 above its truth"))
    # parity of 6 regions (region and object-region), spread of 6 regions: union bound over ordered pairs
    pair_worlds = [(a, b) for a, b in (("matched", "shifted"), ("matched", "off-manifold 30%"), ("matched", "matched"))
                   if a in laws and b in laws]
    for kind, tests, scope, contrast in (
            ("parity-of-6 coverage (region)", "test_region_disparity_coverage", "region", "ratio"),
            ("parity-of-6 coverage (object)", "test_object_region_disparity_coverage", "object", "ratio"),
            ("spread-of-6 coverage (region)", "test_region_spread[...coverage]", "region", "difference")):
        cands = []
        for hi_law, lo_law in pair_worlds:
            hi, lo = pools[(scope, hi_law)], pools[(scope, lo_law)]
            bound = hi.truth() - lo.truth() if contrast == "difference" else min(lo.truth() / hi.truth(), 1.0)
            if contrast == "ratio" and bound >= 1.0:
                bound = 0.999  # every group alike: parity 1; a bound just below it
            # ordered pairs that can fail: spread (high, low), parity (low, high); same-world pairs too
            types = list(dict.fromkeys([(hi_law, lo_law), (hi_law, hi_law), (lo_law, lo_law)]))  # a fixed order
            for k in (1, G // 2):
                total, se2, hits, runs = 0.0, 0.0, 0, 0
                for a_law, b_law in types:
                    first = pools[(scope, a_law if contrast == "difference" else b_law)]
                    second = pools[(scope, b_law if contrast == "difference" else a_law)]
                    n_a = k if a_law == hi_law else G - k
                    n_b = k if b_law == hi_law else G - k
                    count = n_a * n_b if a_law != b_law else n_a * (n_a - 1)
                    if count == 0:
                        continue
                    e = coverage_pair_size(first, second, G, level, contrast, bound, max(budget.runs // 4, 250), rng)
                    total += count * e.value
                    se2 += (count * e.se) ** 2
                    hits += e.hits
                    runs += e.runs
                where = (f"{k} group(s) {hi_law} and {G - k} {lo_law}, bound {bound:.3f} (union over ordered pairs)")
                cands.append((Estimate(total, math.sqrt(se2), hits, runs, "importance-sampled"), where))
        e, where = _best(cands)
        rows.append(Row(kind, tests, preset.name, level, e.value, e.upper, where,
                        f"importance-sampled union bound, {max(budget.runs // 4, 250):,} runs per pair type",
                        note="power not measured (a pair's miss in coverage worlds)"))
    base = pools[("region", "matched")]
    e = template_size(base, G, level, max(budget.runs // 4, 200), rng)
    rows.append(Row("template improvement (coverage)", "test_template_improvement", preset.name, level, e.value,
                    e.upper, f"both templates' 6 regions matched (improvement 0 = bound)",
                    f"importance-sampled, {e.runs:,} runs", note="power not measured"))
    return rows


def rate_floor_row(preset: Preset, level: float, budget: Budget, rng) -> Row:
    """``test_cis_component_rate_floor``: the worst of the components named by >= 2 prompts (and in >= N images),
    each a cluster share of 0/1 detections over the prompts naming it, Bonferroni over the G counted.

    Paper: ~998 components each named by ~140 of the 140,000 prompt slots (K = 2, 4, 8); the size is bounded by
    the union ``G x P(one component fails at level / G)`` with every component on the bound (importance-sampled,
    also at 100 prompts, the fewest a component gets). Smoke: the components a draw of 4 prompts per K names
    twice (simulated sampler), each with 2 prompts x 2 images: enumerated exactly."""
    n = preset.cis_images
    if preset.cis_prompts <= 4:
        # the sampler: which components the K = 2, 4, 8 prompts name twice or more
        gs, prompts_of = [], []
        for _ in range(2000):
            names = np.concatenate([rng.choice(CIS_COMPONENTS, k, replace=False) for k in preset.cis_ks if k >= 2
                                    for _ in range(preset.cis_prompts)])
            counts = np.bincount(names, minlength=CIS_COMPONENTS)
            named = counts[counts >= 2]
            gs.append(named.size)
            prompts_of += named.tolist()
        worst = 0.0
        for g in sorted(set(gs) - {0}):
            for p in sorted(set(prompts_of)):
                for mu in (0.05, 0.3, 0.5, 0.9):
                    for icc in (0.02, 0.3):
                        s = cluster_share_exact(1, n, p, mu, icc, mu, level / g)
                        worst = max(worst, 1.0 - (1.0 - s) ** g)
        share = np.mean(np.asarray(gs) > 0)
        return Row("CIS rate floor (worst component)", "test_cis_component_rate_floor", preset.name, level, worst, None,
                   f"G = {min(gs)}..{max(gs)} components counted (none in {1 - share:.0%} of draws), "
                   f"{min(prompts_of)}..{max(prompts_of)} prompts each",
                   "exact per component (enumerated), sup over G, prompts, rates and corr.",
                   note="a component named by 2 prompts has 1 degree of freedom: t_1 makes every limit [0, 1]")
    g_count = CIS_COMPONENTS
    slots = preset.cis_slots
    typical = round(slots / CIS_COMPONENTS)
    means = _grid(budget.full, (0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9), (0.1, 0.3, 0.7))
    iccs = _grid(budget.full, (0.02, 0.1, 0.3, 0.5), (0.1, 0.3))
    cands = []
    for p in ((typical, 100) if budget.full else (typical,)):
        for mu in means:
            for icc in iccs:
                e = cluster_share_is(1, n, p, mu, icc, mu, level / g_count, budget.runs, rng, True,
                                     spread=(-0.5, 0.0, 0.5, 1.0, 2.0, 3.0))
                cands.append((Estimate(g_count * e.value, g_count * e.se, e.hits, e.runs, e.method),
                              f"all {g_count} components at rate {mu:g} (the bound), corr. {icc:g}, {p} prompts each"))
    e, where = _best(cands)
    single = e.value / g_count
    return Row("CIS rate floor (worst component)", "test_cis_component_rate_floor", preset.name, level, e.value,
               e.upper, where, f"importance-sampled union bound, {budget.runs:,} runs x {len(cands)} configurations",
               note=f"one component alone on the bound: {single:.2g} ({single / level:.2g} x the level)")


def order_row(preset: Preset, level: float, budget: Budget, rng) -> Row:
    """``test_cis_order_invariance``: the position test (:func:`~t2i_fairness.metrics.cis.order_position_test`), a
    Monte Carlo permutation test, ``p = (1 + #{T* >= T}) / (1 + B)`` with ``B = order_resamples(level)``.

    Exact validity: under H0 a prompt's 2N images are exchangeable between the groups, so the observed statistic
    is one of B + 1 exchangeable values and ``P(p <= a) = floor(a (B + 1)) / (B + 1) <= a`` (ties only lower it):
    the size at the run's level is that number, whatever the data (and 0 where the design has fewer labellings
    than the level needs). Checked here by simulation at a moderate level (0.05, B = 99, the product's test on
    null studies with per-prompt, per-component rates). Power: :func:`~t2i_fairness.metrics.cis.order_position_power`
    at the preset's size and level against the first-named component drawn 0.2 more than the last-named (what
    the gate's section states; ``bench/bench_order_test.py`` measures it against the Monte Carlo test)."""
    from t2i_fairness.metrics.cis import ORDER_EFFECT, order_position_power, order_position_test, order_resamples

    resamples = order_resamples(level)
    k = max(preset.cis_ks)
    n = preset.cis_images
    labellings = math.comb(2 * n, n) ** preset.cis_order_prompts if preset.cis_order_prompts * n < 60 else math.inf
    size = math.floor(level * (resamples + 1) + 1e-9) / (resamples + 1) if 2.0 / labellings <= level else 0.0
    prompts = min(preset.cis_order_prompts, 60)  # the moderate-level check: its validity does not depend on M
    runs, alpha, hits = max(budget.plain // 4, 100), 0.05, 0
    for i in range(runs):
        rates = rng.beta(2.0, 2.0, size=(prompts, k))
        a = rng.random((prompts, n, k)) < rates[:, None, :]
        b = rng.random((prompts, n, k)) < rates[:, None, :]
        order = np.argsort(rng.random((prompts, k)), axis=1)
        hits += order_position_test(a, b, order, n_resamples=99, seed=i).pvalue <= alpha
    check = Estimate(hits / runs, 0.0, hits, runs, "simulated")
    power = order_position_power(rng.beta(2.0, 2.0, size=(preset.cis_order_prompts, k)), n, level=level,
                                 runs=100 if budget.full else 40, seed=int(rng.integers(1 << 30)))
    return Row("CIS order test (permutation)", "test_cis_order_invariance", preset.name, level, size, None,
               f"B = {resamples:,}: floor(level (B + 1)) / (B + 1)",
               f"exact (validity of a permutation p); null check at 0.05: {check.value:.3f} "
               f"(<= {check.upper:.3f}), {runs} runs of {prompts} prompts", power.power, power.power,
               f"{preset.cis_order_prompts} prompts x {n} images, K = {k}, first - last = {ORDER_EFFECT:g}",
               note="cannot fail at all: its design gives no p at or below the level" if size == 0 else "")


def consistency_rows(preset: Preset, level: float, budget: Budget, rng) -> list[Row]:
    """``test_object_consistency``: the object template / a region's prompts (objects x N images) and a regional
    template pooled over the regions (objects x 6N)."""
    rows = []
    effect = MEANINGFUL_MISS["percentile"]
    for label, n, cases in (("consistency (objects x N)", preset.images, "[object], [<template>-<region>]"),
                            ("consistency (objects x 6N)", preset.images * preset.regions, "[<template>]")):
        cands = []
        worlds = _grid(budget.full, ("normal", "off-object"), ("off-object",))
        for wn in worlds:
            world = score_world(wn, preset.objects)
            truth = float(world.expected_percentile(n).mean())
            fails, w = consistency_runs(world, n, truth, level, budget.runs, rng,
                                        shares=consistency_shares(preset.objects, n))
            e = _unless_no_hit(weighted(fails, w, ""), budget, level, preset.objects * n,
                               lambda runs: weighted(consistency_runs(world, n, truth, level, runs, rng)[0], None, ""))
            cands.append((e, f"{wn} scores, truth {truth:.4f} = bound"))
        e, where = _best(cands)
        world = score_world("normal", preset.objects)
        truth = float(world.expected_percentile(n).mean())
        fails, _ = consistency_runs(world, n, truth + effect, level, budget.plain, rng)
        # stated: the t power of a run at the expected standard error
        x = world.draw(rng.random((preset.objects, n)))
        iv = percentile_mean_interval(x)
        stated = iv.power(truth + effect, "min", effect, level)
        rows.append(Row(label, f"test_object_consistency{cases}", preset.name, level, e.value, e.upper, where,
                        f"importance-sampled, {budget.runs:,} runs x {len(cands)} worlds", float(fails.mean()),
                        float(stated), f"normal scores, bound {effect} above the truth"))
    return rows


INDIC_LAWS = ("normal", "gamma", "lognormal", "easy-prompts")


def indic_rows(preset: Preset, level: float, budget: Budget, rng) -> list[Row]:
    """IndicTTI: every score gate (CLGC, IGC, LGC, SCWL, SCAL; DWL's U-statistic approximately) is the
    jackknife-t of a mean over the prompt file's G prompts, a t test on G - 1 df; CLGC(l) / CLGC(eng) is
    Fieller's test, the t test of the prompts' contrasts ``num - r den``. Prompt values: a prompt effect from
    the prompt population (sd 0.05: normal, or skewed) plus the prompt's mean image noise."""
    g = preset.indic_prompts
    rows = []
    for kind, tests, effect_key in (
            ("IndicTTI score (t over prompts)", "test_clgc, test_igc, test_lgc, test_scwl, test_dwl, "
             "test_scal_with_english", "score"),
            ("CLGC(l)/CLGC(eng) (Fieller)", "test_clgc_vs_english", "ratio")):
        cands = []
        for eff in _grid(budget.full, INDIC_LAWS, ("normal", "gamma", "easy-prompts")):
            for img_sd in (0.02, 0.08):
                law = PromptLaw(eff, eff, 0.05, img_sd / math.sqrt(preset.indic_images))
                e = t_runs(law, g, 0.0, level, budget.runs, rng)
                cands.append((e, f"{eff} prompt effects (sd 0.05), image sd {img_sd}"))
        e, where = _best(cands)
        effect = MEANINGFUL_MISS[effect_key]
        law = PromptLaw("normal", "normal", 0.05, 0.08 / math.sqrt(preset.indic_images))
        sd = math.hypot(law.spread, law.noise)
        if effect_key == "ratio":
            sd, effect_units = sd, effect * 0.6  # a ratio miss of 0.1 at CLGC(eng) 0.6: a contrast of 0.06
        else:
            effect_units = effect
        delta = -effect_units / (sd / math.sqrt(g))
        tq = stats.t.isf(level, g - 1)
        # exact: the t test on normal prompt values (0 where 2^-G, the p floor, is above the level)
        measured = float(stats.nct.cdf(-tq, g - 1, delta)) if 0.5**g <= level else 0.0
        iv = floor_to_units(Interval(0.0, 0.0, 0.0, "t", 0.95, g, se=sd / math.sqrt(g), df=g - 1), g)
        stated = float(iv.power(0.0, "min", effect_units, level))
        rows.append(Row(kind, tests, preset.name, level, e.value, e.upper, where,
                        f"importance-sampled, {budget.runs:,} runs x {len(cands)} laws", measured, stated,
                        f"normal prompt values, {g} prompts, a {effect_units:g} miss"))
    return rows


def hoeffding_fails(estimate: np.ndarray, bound: float, variance_proxy: float, level: float) -> np.ndarray:
    """:class:`~t2i_fairness.metrics.evidence.Hoeffding`'s ``max`` gate over runs: ``|I|`` above the bound and the
    product's :func:`~t2i_fairness.metrics.evidence.hoeffding_tail` of the excess at most ``level``."""
    from t2i_fairness.metrics.evidence import hoeffding_tail

    t = np.asarray(estimate, dtype=float) - bound
    return fails(estimate, bound, "max", p=hoeffding_tail(t, variance_proxy), level=level)


def word_rows(preset: Preset, level: float) -> list[Row]:
    """Word-level gates, exact: an influence is the difference of two sides' shares (k = 1: a replaced word's
    M x N images against the original's M x N; k = 2 on the 7-word CEO prompt: 6 such pairs pooled), its
    variance proxy ``V = sum w^2 / n`` (:func:`~t2i_fairness.metrics.word_influence.influence_half_widths`);
    the representation gap ``|p - 1/2|`` over the original's M x N images. Every count enumerated, the nuisance
    share on a grid, the truth on the bound."""
    from t2i_fairness.metrics.evidence import Hoeffding

    mn = preset.wi_candidates * preset.wi_images
    rows = []
    for kind, tests, size in (("word influence k=1 (Hoeffding)", "test_word_influence[<word>-<group>]", mn),
                              ("word influence k=2 (Hoeffding)", "test_word_influence[<word>-<group>-k2]", 6 * mn)):
        v = 2.0 / size
        ks = np.arange(size + 1)
        diff = np.abs(ks[:, None] - ks[None, :]) / size
        best, where = 0.0, ""
        for x in (0.0, 0.05, 0.1, 0.2, 0.3):
            fail = hoeffding_fails(diff, x, v, level)
            if not fail.any():
                continue
            for theta in np.linspace(0.0, 1.0 - x, 41):
                p = np.outer(stats.binom.pmf(ks, size, theta + x), stats.binom.pmf(ks, size, theta))[fail].sum()
                if p > best:
                    best, where = p, f"bound {x:g}, shares {theta + x:.3f} vs {theta:.3f}"
        x, eff = 0.1, MEANINGFUL_MISS["hoeffding"]
        fail = hoeffding_fails(diff, x, v, level)
        power = np.outer(stats.binom.pmf(ks, size, 0.5 + x + eff), stats.binom.pmf(ks, size, 0.5))[fail].sum()
        h = Hoeffding(x + eff, 0.0, 1.0, "Hoeffding", 0.95, 2 * size, se=math.sqrt(v) / 2, variance_proxy=v)
        rows.append(Row(kind, tests, preset.name, level, best, None, where or "no count fails at any bound",
                        f"exact (both sides' counts enumerated), n = {size} + {size}", float(power),
                        float(h.power(x, "max", eff, level)), "bound 0.1, shares 0.7 vs 0.5"))
    ks = np.arange(mn + 1)
    gap = np.abs(ks / mn - 0.5)
    best, where = 0.0, ""
    for y in (0.0, 0.1, 0.2, 0.3, 0.4):
        fail = hoeffding_fails(gap, y, 1.0 / mn, level)
        p = stats.binom.pmf(ks, mn, 0.5 + y)[fail].sum()
        if p > best:
            best, where = p, f"bound {y:g}"
    y, eff = 0.1, MEANINGFUL_MISS["hoeffding"]
    power = stats.binom.pmf(ks, mn, 0.5 + y + eff)[hoeffding_fails(gap, y, 1.0 / mn, level)].sum()
    h = Hoeffding(y + eff, 0.0, 0.5, "Hoeffding", 0.95, mn, se=math.sqrt(1.0 / mn) / 2, variance_proxy=1.0 / mn,
                  upper=0.5)
    rows.append(Row("representation gap (Hoeffding)", "test_representation", preset.name, level, float(best), None,
                    where or "no count fails at any bound", f"exact (binomial), n = {mn}", float(power),
                    float(h.power(y, "max", eff, level)), "bound 0.1, share 0.7"))
    return rows


# =============================================================================================
# the run
# =============================================================================================

QUICK = Budget(runs=1000, plain=300, full=False)
FULL = Budget(runs=5000, plain=1500, full=True)
QUICK_LAWS = ("matched", "shifted", "off-manifold 30%")


def measure(preset: Preset, m: int, budget: Budget, seed: int = 0, log=print) -> list[Row]:
    """Every kind's row at ``preset``'s sizes and the run's level ``ALPHA / m``."""
    level = ALPHA / m
    rng = np.random.default_rng([seed, m])
    rows: list[Row] = []
    t = time.time()

    def step(name, make):
        nonlocal t
        rows.extend(make())
        log(f"  {preset.name}: {name} ({time.time() - t:.0f} s)")
        t = time.time()

    step("precision (exact)", lambda: precision_rows(preset, level))
    laws = list(COVERAGE_LAWS) if budget.full else list(QUICK_LAWS)
    pool = 20_000 if preset.name == "smoke" else (10_000 if budget.full else 4_000)
    pools = coverage_world_groups(preset, laws, pool, seed)
    step("coverage", lambda: coverage_rows(preset, level, budget, rng, pools))
    step("coverage without df", lambda: coverage_old_rows(preset, level, budget, rng, pools))
    step("CIS_K", lambda: cis_share_rows(preset, level, budget, rng))
    step("CIS drop", lambda: [cis_drop_row(preset, level, budget, rng)])
    step("CIS rate floor", lambda: [rate_floor_row(preset, level, budget, rng)])
    step("CIS order", lambda: [order_row(preset, level, budget, rng)])
    step("consistency", lambda: consistency_rows(preset, level, budget, rng))
    step("IndicTTI", lambda: indic_rows(preset, level, budget, rng))
    step("word-level", lambda: word_rows(preset, level))
    return rows


def side_by_side(by_preset: dict[str, list[Row]]) -> list[Row]:
    """Paper and smoke rows of each kind next to each other."""
    out = []
    paper, smoke = by_preset.get("paper", []), by_preset.get("smoke", [])
    for i in range(max(len(paper), len(smoke))):
        out += [r[i] for r in (paper, smoke) if i < len(r)]
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer worlds and runs (under 3 minutes on 2 cores)")
    parser.add_argument("--m-smoke", type=int, help="gates of a smoke run (default: counted by collecting the suite)")
    parser.add_argument("--m-paper", type=int, help="gates of a paper run (default: counted)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    t0 = time.time()
    budget = QUICK if args.quick else FULL
    missing = [p for p, given in (("smoke", args.m_smoke), ("paper", args.m_paper)) if not given]
    m = {"smoke": args.m_smoke, "paper": args.m_paper, **(count_gates(*missing) if missing else {})}
    print(f"gates per run (FAMILY_SIZE): smoke {m['smoke']}, paper {m['paper']}; per-gate level {ALPHA} / m "
          f"({time.time() - t0:.0f} s)", flush=True)
    by_preset = {}
    for name in ("paper", "smoke"):
        by_preset[name] = measure(PRESETS[name], m[name], budget, args.seed,
                                  log=lambda s: print(s, file=sys.stderr, flush=True))
    rows = side_by_side(by_preset)
    print("\n".join(table(rows)))
    flagged = [r for r in rows if r.flagged]
    print(f"\n{len(flagged)} of {len(rows)} rows exceed {FLAG} x their level"
          + (": " + "; ".join(f"{r.kind} ({r.preset}) {r.ratio:.3g}x" for r in flagged) if flagged else ""))
    notes = [f"  {r.kind} ({r.preset}): {r.note}" for r in rows if r.note]
    if notes:
        print("notes:\n" + "\n".join(notes))
    print(f"({time.time() - t0:.0f} s, {'--quick' if args.quick else 'full'}, seed {args.seed})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
