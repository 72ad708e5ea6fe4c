"""``--t2i-sequential``'s decisions (issue #29): O'Brien-Fleming alpha spending over planned looks, futility
passes, the sequential p-value, the round loop. Validity and power are computed exactly for a share: every
path of counts over the looks enumerated by dynamic programming, each look decided by the product's own
``decide_look`` on the product's own exact test."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats

from t2i_fairness.families.base import Study, indicator
from t2i_fairness.gating.indicator import Indicator
from t2i_fairness.gating.rounds import GateCallSpec, Rounds
from t2i_fairness.gating.power import MEANINGFUL_MISS
from t2i_fairness.gating.sequential import (
    CURTAIL_GAMMA,
    FUTILITY_BETA,
    Reason,
    SequentialEvidence,
    decide_look,
    futility_levels,
    spending_shares,
)
from t2i_fairness.gating.sequential.stopping import conditional_power, df_at_n, drift, fails_possible
from t2i_fairness.gating.thresholds import Bound
from t2i_fairness.metrics.intervals import precision_interval
from t2i_fairness.metrics.sequential import round_sizes


def _share(k: int, n: int) -> Indicator:
    return Indicator(k / n, n, "share", precision_interval(np.r_[np.ones(k, bool), np.zeros(n - k, bool)]))


def test_spending_is_lan_demets_obrien_fleming_and_sums_to_the_level():
    level = 0.05 / 475
    t = [0.125, 0.25, 0.5, 1.0]
    s = spending_shares(t, level)
    z = stats.norm.isf(level / 2)
    cumulative = [2 * stats.norm.sf(z / math.sqrt(x)) for x in t[:-1]] + [level]
    assert np.allclose(np.cumsum(s) * level, cumulative, rtol=1e-9, atol=0)
    assert s.sum() == pytest.approx(1.0) and s[-1] > 0.999  # the last look keeps nearly the fixed-N level
    assert futility_levels(4) == pytest.approx([FUTILITY_BETA / 3] * 3)


def _paths(looks, bound, truth, level, delta_kind="share", curtail=True):
    """Exact: the probability that a binomial share's sequential gate fails early, fails at N, passes by
    futility or by curtailment, over every path of cumulative counts (each look decided by decide_look); ``lost_*``:
    the chance of stopping early by that rule on a path whose images to come would have made the fixed-N test
    fail (the power each pass rule costs, exactly)."""
    N = looks[-1]
    shares = spending_shares([n / N for n in looks], level)
    betas = futility_levels(len(looks)) + [None]
    ks = np.arange(N + 1)
    p_n = np.array([_share(int(k), N).evidence.p_value(bound, "min") for k in ks])
    fails_at_n = (ks / N < bound) & (p_n <= level)
    crit = int(ks[fails_at_n].max()) if fails_at_n.any() else -1  # the fixed-N test fails a count <= crit
    dist = {0: 1.0}  # count -> probability of being open with that count
    prior = {0: None}
    prev = 0
    out = {"fail": 0.0, "futility": 0.0, "curtail": 0.0, "fail_N": 0.0, "lost_futility": 0.0, "lost_curtail": 0.0}
    for k, n in enumerate(looks):
        step = stats.binom.pmf(np.arange(n - prev + 1), n - prev, truth)
        new, new_prior = {}, {}
        for x0, p0 in dist.items():
            for j, pj in enumerate(step):
                if pj < 1e-16:
                    continue
                x = x0 + j
                new[x] = new.get(x, 0.0) + p0 * pj
                new_prior[x] = prior[x0]  # the prior of paths to x: identical for nested counts' decisions
        dist, prior = {}, {}
        for x, p in new.items():
            final = k == len(looks) - 1
            d = decide_look(_share(x, n), bound, "min", level=level, share=float(shares[k]), beta=betas[k],
                            prior=new_prior[x], final=final, fraction=None if final or not curtail else n / N)
            if final:
                if x / n < bound and d.p_sequential is not None and d.p_sequential <= level:
                    out["fail_N"] += p
            elif d.reason in ("fail", "futility", "curtail"):
                out[d.reason] += p
                if d.reason != "fail":
                    out["lost_" + d.reason] += p * float(stats.binom.cdf(crit - x, N - n, truth))
            else:
                dist[x], prior[x] = p, d.p_sequential
        prev = n
    return out


def _fixed(N, bound, truth, level):
    ks = np.arange(N + 1)
    p = np.array([_share(int(k), N).evidence.p_value(bound, "min") for k in ks])
    return float(stats.binom.pmf(ks, N, truth)[(ks / N < bound) & (p <= level)].sum())


@pytest.mark.parametrize("bound", [0.5, 0.8, 0.9])
def test_the_sequential_share_gate_never_exceeds_its_level_exactly(bound):
    """Every path enumerated at the least favourable truth (on the bound): the chance of a fail at any look
    is at most the gate's level (the union bound over the looks holds, and in fact with room)."""
    looks = [48, 96, 192, 360]  # 6 prompts x (8, 16, 32, 60) images
    level = 0.05 / 475
    out = _paths(looks, bound, bound, level)
    assert out["fail"] + out["fail_N"] <= level


def test_power_at_n_is_within_one_point_of_the_fixed_n_test_for_a_miss_of_five_points():
    looks = [162, 324, 648, 1620]  # 27 prompts x (6, 12, 24, 60)
    level, bound = 0.05 / 1435, 0.8
    for truth in (bound - 0.05, bound - 0.08):
        seq = _paths(looks, bound, truth, level)
        fixed = _fixed(looks[-1], bound, truth, level)
        assert seq["fail"] + seq["fail_N"] >= fixed - 0.01, (truth, seq, fixed)
        assert seq["futility"] <= FUTILITY_BETA + 1e-9  # a model missing by the futility miss rarely passes early


@pytest.mark.parametrize("looks", [[6, 12, 24], [12, 24, 48, 96], [48, 96, 192, 360], [162, 324, 648, 1620]])
@pytest.mark.parametrize("bound", [0.5, 0.8, 0.95])
def test_curtailment_costs_at_most_gamma_of_the_power_at_a_meaningful_miss_exactly(looks, bound):
    """Stochastic curtailment's promise, on every path: the chance of passing early by curtailment on a path the
    fixed-N test would have failed is at most CURTAIL_GAMMA at the meaningful miss (0.10) and below it (0.05), at
    sizes from an underpowered 24 images to 1,620 and at the level the run uses; with the futility rule, the
    sequential test's power stays within one point of the fixed-N test's."""
    level = 0.05 / 1435
    for miss in (0.05, MEANINGFUL_MISS["share"]):
        truth = bound - miss
        seq = _paths(looks, bound, truth, level)
        fixed = _fixed(looks[-1], bound, truth, level)
        assert seq["lost_curtail"] <= CURTAIL_GAMMA, (miss, seq)
        assert seq["lost_futility"] <= FUTILITY_BETA, (miss, seq)
        assert seq["fail"] + seq["fail_N"] >= fixed - (CURTAIL_GAMMA + FUTILITY_BETA), (miss, seq, fixed)


def test_curtailment_stops_an_underpowered_gate_early_but_keeps_its_power_against_a_collapse():
    """24 images at 1.5e-4 cannot catch a 0.10 miss (power 0.0035 at a bound of 0.5): a model where the update flow
    puts it (3.3 standard errors above its bound) passes early by curtailment on every path, one at its bound 81% of
    the time, where the futility limit alone never clears; a collapse (0.1 against 0.5) is judged at the look's own
    limit (6 images cannot exclude it) and loses no power: the sequential test's power equals the fixed-N test's."""
    looks, bound, level = [6, 12, 24], 0.5, 0.05 / 337
    assert _share(12, 24).evidence.power(bound, "min", 0.10, level) < 0.01
    above = _paths(looks, bound, bound + 3.3 * math.sqrt(bound * (1 - bound) / 24), level)
    assert above["futility"] == 0.0 and above["curtail"] > 0.999, above
    at = _paths(looks, bound, bound, level)
    assert at["futility"] == 0.0 and at["curtail"] > 0.8, at
    for truth in (0.1, 0.3):
        seq, fixed = _paths(looks, bound, truth, level), _fixed(looks[-1], bound, truth, level)
        assert seq["lost_curtail"] < 1e-6 and seq["fail"] + seq["fail_N"] >= fixed - 1e-6, (truth, seq, fixed)


@pytest.mark.parametrize("truth", [0.0, 0.1, 0.3, 0.5, 0.6])
def test_curtailment_costs_at_most_gamma_plus_beta_at_any_miss_exactly(truth):
    """Beyond the meaningful miss the rule judges a look at its own limit: the power lost at any miss is at most
    CURTAIL_GAMMA + FUTILITY_BETA (a bound of 0.8, 24 to 96 images, misses of 0.2 to 0.8)."""
    for looks in ([6, 12, 24], [12, 24, 48, 96]):
        seq = _paths(looks, 0.8, truth, 0.05 / 1435)
        assert seq["lost_curtail"] + seq["lost_futility"] <= CURTAIL_GAMMA + FUTILITY_BETA, (looks, seq)


def test_a_model_comfortably_above_its_bound_stops_early():
    """Bounds the update flow writes sit about 3.3 standard errors below the model: most such gates pass early, by
    futility or curtailment, before N (the images a null model's run saves); exact over every path."""
    looks = [162, 324, 648, 1620]
    N, bound = looks[-1], 0.8
    se = math.sqrt(bound * (1 - bound) / N)
    out = _paths(looks, bound, bound + 3.3 * se, 0.05 / 1435)
    assert out["futility"] > 0.2 and out["curtail"] > 0.4 and out["futility"] + out["curtail"] > 0.9, out


@pytest.mark.parametrize("looks", [[48, 96, 192, 360], [162, 324, 648, 1620]])
def test_the_default_early_passes_keep_the_fixed_n_power_curve_at_every_miss_exactly(looks):
    """The default futility margin is what N can catch, and curtailment reads the largest miss the look's limit
    leaves possible: at every miss from 0.01 to the meaningful 0.10 the sequential gate fails within one point as
    often as the fixed-N test (exact over every path, 6 and 27 prompts x 60 images, the paper's level), where a
    fixed margin of half the meaningful miss lost most of the power at 0.02-0.04 misses."""
    level, bound = 0.05 / 1435, 0.8
    for miss in (0.01, 0.02, 0.03, 0.04, 0.05, 0.07, 0.10):
        seq = _paths(looks, bound, bound - miss, level)
        fixed = _fixed(looks[-1], bound, bound - miss, level)
        assert seq["fail"] + seq["fail_N"] >= fixed - 0.01, (miss, seq, fixed)
        assert seq["lost_futility"] + seq["lost_curtail"] <= 0.01, (miss, seq)


def test_decide_look_fails_only_where_the_estimand_does_not_move_with_n():
    cov = Indicator(0.2, 400, "coverage", precision_interval(np.r_[np.ones(80, bool), np.zeros(320, bool)]), grows=True)
    assert decide_look(cov, 0.8, "min", level=1e-4, share=0.01, beta=0.002).reason == "open"  # no early fail
    high = Indicator(0.97, 400, "coverage", precision_interval(np.r_[np.ones(388, bool), np.zeros(12, bool)]),
                     grows=True)
    assert decide_look(high, 0.8, "min", level=1e-4, share=0.01, beta=0.002).reason == "futility"
    assert decide_look(_share(80, 400), 0.8, "min", level=1e-4, share=0.01, beta=0.002).reason == "fail"
    undefined = Indicator(math.nan, 0, "share", undefined="collapsed")
    assert decide_look(undefined, 0.8, "min", level=1e-4, share=0.01, beta=0.002).reason == "open"


def test_the_sequential_p_value_is_the_smallest_spent_ratio():
    iv = _share(300, 400).evidence
    ev = SequentialEvidence(iv, share=0.99, prior=1e-3)
    assert ev.p_value(0.8, "min") == pytest.approx(min(1e-3, iv.p_value(0.8, "min") / 0.99))
    assert ev.power(0.8, "min", 0.1, 1e-4) == pytest.approx(iv.power(0.8, "min", 0.1, 0.99e-4))


class _Study:
    """A share per group, at ``n`` images: the truth of each group fixed, the draws seeded."""

    def __init__(self, n: int, seen: list | None = None):
        self.n, self.seen = n, seen if seen is not None else []

    def rate(self, group: str) -> Indicator:
        self.seen.append((group, self.n))
        rng = np.random.default_rng(hash(group) % 2**32)
        p = {"good": 0.95, "bad": 0.5, "edge": 0.82}.get(group, 0.9)
        return _share(int((rng.random(self.n) < p).sum()), self.n)


def test_the_round_loop_decides_each_gate_once_and_asks_open_gates_only():
    seen: list = []
    full = _Study(1024, seen)
    gates = [GateCallSpec(g, "rate", (("group", g),)) for g in ("good", "bad", "edge")]
    bounds = {g: Bound("min", 0.8) for g in ("good", "bad", "edge")}
    loop = Rounds(full, lambda s, n: _Study(n, seen), round_sizes(1024, 64), "images per prompt", gates, bounds,
                  1e-4, raw=lambda s, m, kw: getattr(s, m)(**kw))
    good, bad = loop.indicator("rate", {"group": "good"}), loop.indicator("rate", {"group": "bad"})
    assert good.sequential.reason is Reason.FUTILITY and bad.sequential.reason is Reason.FAIL
    assert good.sequential.at < 1024 and bad.sequential.at < 1024
    # a closed gate is never asked again; an open one is asked at every look before N
    stopped_at = {g: ind.sequential.at for g, ind in (("good", good), ("bad", bad))}
    for g, at in stopped_at.items():
        assert max(n for grp, n in seen if grp == g) == at
    edge = loop.indicator("rate", {"group": "edge"})
    assert edge.sequential.reason in (Reason.FINAL, Reason.FUTILITY, Reason.CURTAIL)
    # a gate the loop was not told of (no bound, or another test's reading) is computed at N, without a record
    other = loop.indicator("rate", {"group": "other"})
    assert other.sequential is None and other.n == 1024


class _Groups(_Study):
    """A worst-of gate over groups, measuring only the groups it is asked for."""

    def worst(self, groups=None, total=None) -> Indicator:
        from t2i_fairness.metrics.evidence import worst_of

        names = groups if groups is not None else ("good", "edge", "other")
        shares = {g: self.rate(g) for g in names}
        ev = worst_of({g: s.evidence for g, s in shares.items()}, total=total)
        return Indicator(ev.estimate, self.n, "worst", ev)


def test_a_worst_of_gate_goes_on_with_its_open_groups_only_and_keeps_its_bonferroni_factor():
    seen: list = []
    full = _Groups(1024, seen)
    loop = Rounds(full, lambda s, n: _Groups(n, seen), round_sizes(1024, 64), "images per prompt",
                  [GateCallSpec("w", "worst", ())], {"w": Bound("min", 0.8)}, 1e-4,
                  raw=lambda s, m, kw: getattr(s, m)(**kw), group_methods={"worst": ("self", "groups", "total")})
    ind = loop.indicator("worst", {})
    looks = sorted({n for _, n in seen})
    # "good" (0.95) and "other" (0.9) clear a 0.05 miss of 0.8 early; "edge" (0.82) is measured further
    last_good = max(n for g, n in seen if g == "good")
    last_edge = max(n for g, n in seen if g == "edge")
    assert last_good < last_edge, (last_good, last_edge, looks)
    if ind.sequential.reason is Reason.FINAL:
        assert ind.sequential.open_groups == ["edge"] and ind.evidence.selection == 3


class _Decorated(Study):
    """A worst-of indicator method as the studies declare them (``families.base.indicator``): the gate test calls it
    without ``groups``/``total``, the decorator hands the round loop every parameter, defaults included."""

    def __init__(self, n: int):
        super().__init__(None)
        self.n = n

    @indicator("worst")
    def worst(self, groups=None, total=None) -> Indicator:
        from t2i_fairness.metrics.evidence import worst_of

        truth = {"low": 0.3, "high": 0.95}
        names = groups if groups is not None else tuple(truth)
        ev = worst_of({g: _share(int(truth[g] * self.n), self.n).evidence for g in names}, total=total)
        return Indicator(ev.estimate, self.n, "worst", ev)


def test_a_worst_of_gate_read_through_its_indicator_method_gets_the_round_loops_record():
    """The spec of a worst-of gate leaves ``groups``/``total`` out (fixtures/studies.py); the decorator passes them as
    ``None``: the loop must still find the gate (it once keyed them apart: every worst-of gate ran to N without a
    record, judged by the fixed-N test)."""
    full = _Decorated(1024)
    full.round_loop = Rounds(full, lambda s, n: _Decorated(n), [256, 512, 1024], "images", [GateCallSpec("w", "worst", ())],
                             {"w": Bound("min", 0.8)}, 1e-4, raw=lambda s, m, kw: s.raw_indicator(m, kw),
                             group_methods={"worst": ("self", "groups", "total")})
    ind = full.worst()
    assert ind.sequential is not None and ind.sequential.reason is Reason.FAIL and ind.sequential.at == 256


def test_a_gate_that_cannot_fail_early_is_tested_at_n_alone_with_its_whole_level():
    """Coverage grows with the images: a look's p-value (far below the bound at a few images) tests another
    hypothesis than the gate's at N. It never enters the sequential p-value, and the gate spends its whole level
    at N; a share gate's early looks do count (min_k p_k / s_k)."""
    from t2i_fairness.gating.rounds import GateCallSpec, Rounds
    from t2i_fairness.gating.sequential import SequentialEvidence
    from t2i_fairness.gating.thresholds import Bound

    class S:  # coverage far below its bound early, just at it at N
        def __init__(self, n):
            self.n = n

        def rate(self, kind):
            k = int(0.3 * self.n) if self.n < 400 else int(0.8 * self.n)
            return Indicator(k / self.n, self.n, kind, precision_interval(np.r_[np.ones(k, bool), np.zeros(self.n - k, bool)]),
                             grows=kind == "coverage")

    gates = [GateCallSpec(kind, "rate", (("kind", kind),)) for kind in ("coverage", "share")]
    loop = Rounds(S(400), lambda s, n: S(n), [50, 100, 200, 400], "images per prompt", gates,
                  {g.gate: Bound("min", 0.8) for g in gates}, 1e-3, raw=lambda s, m, kw: getattr(s, m)(**kw))
    cov, share = loop.indicator("rate", {"kind": "coverage"}), loop.indicator("rate", {"kind": "share"})
    assert cov.sequential.reason is Reason.FINAL and cov.sequential.earlier_looks_p is None
    assert cov.sequential.alpha_share == 1.0
    ev = SequentialEvidence(cov.evidence, cov.sequential.alpha_share, cov.sequential.earlier_looks_p)
    assert ev.p_value(0.8, "min") == cov.evidence.p_value(0.8, "min") > 0.4  # the fixed-N p: at its bound
    assert share.sequential.reason is Reason.FAIL  # the same early data fail a share gate


def test_a_worst_of_futility_pass_counts_no_selection_and_keeps_its_promise():
    """A worst-of gate's futility limit is the least of its groups' limits at ``beta`` itself (no Bonferroni
    factor): with a team's indifference margin ``delta``, a model missing through one group (exactly ``delta``
    below the bound, 49 other groups far above it)
    is passed early with probability at most ``beta``, by exact enumeration of that group's images through the
    product's ``decide_look``; and it does pass early sometimes (the check is not vacuous), more often than with
    the selection counted (the old rule), never more than ``beta``."""
    import numpy as np
    from scipy.stats import binom

    from t2i_fairness.gating.indicator import Indicator
    from t2i_fairness.gating.sequential import decide_look
    from t2i_fairness.gating.sequential.stopping import open_groups
    from t2i_fairness.metrics.evidence import worst_of
    from t2i_fairness.metrics.intervals import precision_interval

    def share(k, n):
        return precision_interval(np.r_[np.ones(k, bool), np.zeros(n - k, bool)])

    n, groups, beta, bound, delta = 80, 50, 0.002, 0.8, 0.05
    theta = bound - delta  # the missing group's true rate
    high = {f"g{i}": share(79, n) for i in range(groups - 1)}
    passed = passed_counting_selection = open_after = 0.0
    for x in range(n + 1):
        ev = worst_of({**high, "miss": share(x, n)})
        d = decide_look(Indicator(ev.estimate, n * groups, "worst", ev), bound, "min", level=1e-4, share=1e-6,
                        beta=beta, indifference=delta)
        weight = float(binom.pmf(x, n, theta))
        passed += weight * (d.reason == "futility")
        passed_counting_selection += weight * (ev.limit(beta, "low") > bound - delta)
        open_after += weight * ("miss" in open_groups(ev, bound, "min", beta, 1e-4, None, indifference=delta))
        assert ev.open_groups(bound, "min", beta, delta) == open_groups(ev, bound, "min", beta, 1e-4, None,
                                                                        indifference=delta)
    assert 0 < passed_counting_selection < passed <= beta
    assert 1 - open_after == pytest.approx(passed, abs=1e-12)  # the group-by-group rule clears it as often


def test_conditional_power_is_zero_where_no_outcome_at_n_can_fail_and_a_union_over_a_worst_ofs_groups():
    from t2i_fairness.metrics.evidence import worst_of
    from t2i_fairness.metrics.intervals import Interval, floor_to_units

    # 2 of 4 prompts: a test over 4 prompts claims no p below 2^-4, so at 1e-4 nothing at N fails the gate
    two = floor_to_units(Interval(0.5, 0.3, 0.7, "t", 0.95, 2, se=0.1, df=1.0), 2)
    assert conditional_power(two, 0.9, "min", 0.10, 1e-4, 0.5) == 0.0
    assert 0.0 < conditional_power(two, 0.9, "min", 0.10, 0.1, 0.5) <= 1.0  # at 0.1 > 2^-4 it may
    groups = {r: precision_interval(np.r_[np.ones(k, bool), np.zeros(60 - k, bool)]) for r, k in
              [("a", 50), ("b", 44), ("c", 41)]}
    w, level = worst_of(groups), 1e-3
    each = [conditional_power(g, 0.6, "min", 0.10, level / 3, 0.25, 0.002) for g in groups.values()]
    assert conditional_power(w, 0.6, "min", 0.10, level, 0.25, 0.002) == pytest.approx(min(1.0, sum(each)))
    assert max(each) > 0  # the worst group is not the only one that may fail at N


def test_conditional_power_of_a_binomial_share_is_the_exact_chance_of_its_test_at_n():
    """A precision's images: the chance is the exact one (the images to come binomial at the missed value, the
    product's own p-value at N deciding), for both directions, where the normal model overstated small looks (6 of 8
    images against 0.78: no outcome of 16 fails, the normal model said 0.15)."""
    for N, n, level in ((64, 16, 1e-4), (16, 8, 1.4e-4), (48, 24, 1.4e-4)):
        ks = np.arange(N + 1)
        for bound in (0.6, 0.78, 0.9):
            p_n = np.array([_share(int(c), N).evidence.p_value(bound, "min") for c in ks])
            crit = ks[(ks / N < bound) & (p_n <= level)]
            for k in sorted({n // 2, 3 * n // 4, n - 1, n}):
                exact = stats.binom.cdf(crit.max() - k, N - n, bound - 0.10) if crit.size else 0.0
                got = conditional_power(_share(k, n).evidence, bound, "min", 0.10, level, n / N)
                assert got == pytest.approx(exact, abs=1e-12), (N, n, bound, k, got, exact)
                # a ceiling (max): the mirror image, failures counted
                q_n = np.array([_share(int(c), N).evidence.p_value(1 - bound, "max") for c in ks])
                up = ks[(ks / N > 1 - bound) & (q_n <= level)]
                mirror = stats.binom.sf(up.min() - (n - k) - 1, N - n, 1 - bound + 0.10) if up.size else 0.0
                got_max = conditional_power(_share(n - k, n).evidence, 1 - bound, "max", 0.10, level, n / N)
                assert got_max == pytest.approx(mirror, abs=1e-12), (N, n, bound, k, got_max, mirror)
    assert conditional_power(_share(6, 8).evidence, 0.78, "min", 0.10, 1.4e-4, 0.5) == 0.0


def test_a_hoeffding_gates_conditional_power_reads_its_own_critical_distance_at_n():
    """Word-level's test fails a gate where the estimate lies a Hoeffding half-width beyond its bound (its p-value
    there is the level): the conditional power reads that distance at N, wider than the normal one ``z se``, so the
    chance is the smaller of the two and still a chance of the test the run uses (a look at 2 of 6 images)."""
    from t2i_fairness.metrics.evidence import Hoeffding
    from t2i_fairness.metrics.sequential import conditional_power as model

    h = Hoeffding.from_half_width(0.14, 0.2, (0.0, 0.34), 72)
    t, level, bound, beta = 1 / 3, 1.4e-4, 0.24, 0.0025
    full = h.scaled(1 / t)
    d = full.critical_distance(bound, level)
    assert dataclasses.replace(full, estimate=bound + d).p_value(bound, "max") == pytest.approx(level, rel=1e-9)
    normal_d = stats.norm.isf(level) * full.se_at(bound)
    assert d > normal_d
    miss = max(0.10, h.futility_limit(beta, "high") - bound)  # judged at the look's own limit (it cannot exclude it)
    se = full.se_at(bound + miss)
    got = conditional_power(h, bound, "max", 0.10, level, t, beta=beta)
    assert got == pytest.approx(model(bound - h.estimate, miss, d, se, t), rel=1e-12)
    assert 0.0 < got < model(bound - h.estimate, miss, normal_d, se, t)

def test_a_low_percentiles_expectation_moves_with_n_as_the_normal_order_statistics_say():
    from t2i_fairness.metrics.intervals import normal_percentile_mean

    rng = np.random.default_rng(7)
    for n in (2, 8, 48):
        mc = float(np.percentile(rng.standard_normal((100_000, n)), 10, axis=1).mean())
        assert normal_percentile_mean(n, 10.0) == pytest.approx(mc, abs=0.01)
    assert normal_percentile_mean(48, 10.0) < normal_percentile_mean(12, 10.0) < normal_percentile_mean(3, 10.0)


def _consistency(rng, mu, n, sd=0.03, groups=6):
    from t2i_fairness.metrics.intervals import percentile_mean_interval

    scores = {f"o{g}": rng.normal(mu, sd, n) for g in range(groups)}
    return scores, percentile_mean_interval(scores)


def test_percentile_curtailment_counts_the_drift_and_keeps_the_power_at_n():
    """A mean of 10th percentiles (6 objects, looks at 12, 24, 48 images each, normal scores) judged at 0.05 / 10:
    curtailment reads the drift of the look's estimate toward N (its expectation falls with n); on simulated models
    on the bound and missing it by up to a meaningful miss (0.02) it passes some runs early (never one the fixed-N
    test would fail here), and it never stops a run the fixed-N test fails more than 0.005 + MC error of the time."""
    from t2i_fairness.metrics.intervals import percentile_mean_interval

    looks, level, sd = [12, 24, 48], 0.05 / 10, 0.03
    bound = 0.3 + sd * stats.norm.ppf(0.1)  # the population 10th percentile of N(0.3, sd)
    rng = np.random.default_rng(11)
    _, iv = _consistency(rng, 0.3, 12)
    flat = dataclasses.replace(iv, sizes=())
    assert drift(iv, 0.25) < 0 and drift(flat, 0.25) == 0.0
    assert conditional_power(iv, bound, "min", 0.02, level, 0.25) >= conditional_power(flat, bound, "min", 0.02, level, 0.25)
    shares = spending_shares([n / 48 for n in looks], level)
    betas = futility_levels(len(looks))
    runs, curtailed, fixed_fails = 200, 0, 0
    for miss in (0.0, 0.005, 0.01, 0.02):
        lost = 0
        for _ in range(runs):
            full = {f"o{g}": rng.normal(0.3 - miss, sd, 48) for g in range(6)}
            at_n = percentile_mean_interval(full)
            fails = at_n.estimate < bound and at_n.p_value(bound, "min") <= level
            fixed_fails += fails
            for k, n in enumerate(looks[:-1]):
                ev = percentile_mean_interval({o: v[:n] for o, v in full.items()})
                ind = Indicator(ev.estimate, n * 6, "percentile", ev, grows=True)
                d = decide_look(ind, bound, "min", level=level, share=float(shares[k]), beta=betas[k], fraction=n / 48,
                                units_grow=False)
                if d.stopped:
                    curtailed += d.reason == "curtail"
                    lost += fails and d.reason != "fail"
                    break
        assert lost / runs <= CURTAIL_GAMMA + FUTILITY_BETA + 3 * math.sqrt(0.01 / runs), (miss, lost)
    assert curtailed > 0 and fixed_fails > 0  # both rules had something to decide


def test_a_curtailed_gate_says_what_it_promises_in_its_message_and_report_line():
    from t2i_fairness.gating.gate import early_record
    from t2i_fairness.gating.session import GateRecord
    from t2i_fairness.report.sequential import gate_line

    where = {"round": 1, "rounds": 3, "unit": "images per prompt", "at": 2, "planned": 8, "gate_level": 1.4e-4,
             "p": 1.0, "level": 1e-12, "alpha_share": 1e-8, "p_sequential": 1.0, "kind": "share", "early": True}
    seq = {**where, "reason": "pass: curtailed", "conditional_power": 3e-4, "curtail_miss": 0.1, "curtail_gamma": 0.005}
    r = GateRecord("g", "t::g", 0.72, 24, "min", "inconclusive", 0.75, None, "g: measured 0.7200; p = 0.3", {})
    e = early_record(r, seq, Bound("min", 0.75))
    # its look's estimate misses the bound without evidence: inconclusive, as the fixed-N test says of such a value
    assert e.status == "inconclusive" and "passed early by curtailment at look 1 of 3 (2 of 8 images per prompt)" in e.message
    assert "probability 0.0003 given this look (< 0.005)" in e.message and "misses the bound without evidence" in e.message
    assert gate_line(seq).endswith("(conditional power 0.0003 at a miss of 0.1)")
    never = {**seq, "conditional_power": 0.0, "curtail_miss": None}
    e = early_record(dataclasses.replace(r, status="pass"), never, Bound("min", 0.75))
    assert "no outcome of its test at N can fail it at its level 0.00014" in e.message
    assert gate_line(never).endswith("(conditional power 0)")


def test_an_estimated_df_is_not_carried_to_n_so_a_collapse_seen_on_a_look_is_never_curtailed():
    """The case the paper-size bench found (degrade_region:africa:0.6, seed 2): a region's coverage 0.014 against a
    bound of 0.50 at 32 of 60 images per prompt, its jackknife interval's Satterthwaite df 2.0 at that look (5.6 to
    7.8 at the others). Read as N's df, t_2 at 3.5e-5 made the critical distance huge and the chance 0; the test
    at N (another df) failed the gate. An estimated df now gives the normal quantile; a t over the look's units
    (df = units - 1) and a design's count (PercentileMean's groups) keep theirs."""
    from t2i_fairness.metrics.intervals import Interval, PercentileMean

    look = Interval(0.0142, 0.005, 0.03, "jackknife_wilson_df", 0.95, 1620, se=0.0037, df=2.0, n_effective=1043.6)
    assert df_at_n(look, 32 / 60, units_grow=False) is None
    assert conditional_power(look, 0.4957, "min", 0.10, 3.5e-5, 32 / 60, beta=0.0017, units_grow=False) > 0.99
    ind = Indicator(look.estimate, 1620, "coverage", look, grows=True)
    d = decide_look(ind, 0.4957, "min", level=3.5e-5, share=0.01, beta=0.0017, fraction=32 / 60, units_grow=False)
    assert d.reason == "open"
    t_over_units = Interval(0.4, 0.3, 0.5, "t", 0.95, 4, se=0.05, df=3.0)
    assert df_at_n(t_over_units, 0.5, units_grow=True) == 7.0 and df_at_n(t_over_units, 0.5, units_grow=False) == 3.0
    groups = PercentileMean(0.3, 0.2, 0.4, "jackknife_t", 0.95, 72, se=0.01, df=6, sizes=(12,) * 6, sds=(0.03,) * 6)
    assert df_at_n(groups, 0.25, units_grow=False) == 6.0


def test_curtailment_is_off_without_a_fraction_as_under_inconclusive_fail():
    """Rounds(curtail=False) (the gates' fixture under --t2i-inconclusive fail, where a miss of the estimate alone
    fails a gate at N) passes no fraction: the same look of an underpowered share is then left open."""
    ind = _share(5, 6)  # 6 images of 24 at a bound of 0.5 and 1.5e-4: N cannot catch a 0.10 miss
    kw = dict(level=0.05 / 337, share=1e-6, beta=0.0025)
    assert decide_look(ind, 0.5, "min", **kw, fraction=0.25, units_grow=False).reason == "curtail"
    assert decide_look(ind, 0.5, "min", **kw, fraction=None).reason == "open"
    import inspect
    from pathlib import Path

    studies = (Path(__file__).resolve().parents[1] / "fixtures" / "studies.py").read_text(encoding="utf-8")
    assert 'curtail=options.inconclusive != "fail"' in studies
    assert "curtail" in inspect.signature(Rounds).parameters


def _floored_ratio(rng, g: int, den_mean: float):
    """A Fieller ratio over ``g`` prompts (numerator ~0.3, denominator ~``den_mean``), floored at 2^-g."""
    from t2i_fairness.metrics.evidence import fieller_ratio
    from t2i_fairness.metrics.intervals import floor_to_units

    num, den = 0.3 + 0.02 * rng.standard_normal(g), den_mean + 0.01 * rng.standard_normal(g)
    drop = [np.delete(np.arange(g), i) for i in range(g)]
    return floor_to_units(fieller_ratio([num[d].mean() for d in drop], [den[d].mean() for d in drop], num.mean(),
                                        den.mean()), g)


def test_a_ratio_left_undefined_by_noise_on_a_look_is_never_stopped_there():
    """IndicTTI's CLGC(l) / CLGC(English): English's CLGC at or below 0 on a look's images leaves the ratio undefined
    there, but it may be defined at N, where the fixed-N test decides it (the procedural suite's 5 ratios pass at N).
    So the look leaves it open, even where no outcome of its test at N can fail it (4 prompts: no p below 2^-4), which
    curtails the same gate once its value is defined."""
    rng = np.random.default_rng(3)
    kw = dict(level=0.05 / 351, share=1e-6, beta=0.0017, fraction=0.25, units_grow=False)

    def undefined(ev, inconclusive=True):
        return Indicator(math.nan, 0, "ratio", ev, inconclusive=inconclusive, undefined="CLGC(English) <= 0")

    ev = _floored_ratio(rng, 4, -0.003)
    assert not fails_possible(ev, 0.8, "min", kw["level"], kw["fraction"], False)
    for ind in (undefined(ev), undefined(_floored_ratio(rng, 40, -0.003)), undefined(ev, inconclusive=False),
                undefined(None)):
        assert decide_look(ind, 0.8, "min", **kw).reason == "open"
    assert decide_look(undefined(ev), 0.8, "min", **kw, final=True).reason == "final"
    defined = Indicator(0.7, 4, "ratio", _floored_ratio(rng, 4, 0.4))
    assert decide_look(defined, 0.8, "min", **kw).reason == "curtail"


def test_the_round_loop_takes_a_gate_undefined_at_its_first_look_on_to_n_where_it_is_decided_as_fixed_n():
    """A ratio undefined at the first look (of 2 of 8 images per prompt) and defined from the second: the loop keeps it
    open at the first look and decides it at the second as it would any defined gate (here: curtailed, no outcome at N
    can fail it over 4 prompts); one undefined at every look before N reaches N and reads the fixed-N indicator."""
    rng = np.random.default_rng(5)
    evidence = {n: _floored_ratio(rng, 4, -0.003 if n == 2 else 0.4) for n in (2, 4, 8)}

    class S:
        def __init__(self, n, undefined_below):
            self.n, self.undefined_below = n, undefined_below

        def ratio(self):
            if self.n < self.undefined_below:
                return Indicator(math.nan, 0, "ratio", evidence[self.n], inconclusive=True, undefined="den <= 0")
            return Indicator(0.75, 4 * self.n, "ratio", evidence[self.n])

    def rounds(undefined_below):
        return Rounds(S(8, undefined_below), lambda s, n: S(n, undefined_below), [2, 4, 8], "images per prompt",
                      [GateCallSpec("r", "ratio", ())], {"r": Bound("min", 0.8)}, 0.05 / 351,
                      raw=lambda s, m, kw: getattr(s, m)(**kw))

    seen = rounds(4).indicator("ratio", {})
    assert (seen.sequential.reason, seen.sequential.at, seen.undefined) == (Reason.CURTAIL, 4, None)
    assert seen.value == 0.75
    at_n = rounds(8).indicator("ratio", {})
    assert (at_n.sequential.reason, at_n.sequential.at, at_n.undefined) == (Reason.FINAL, 8, None)
    assert at_n.value == S(8, 8).ratio().value and at_n.evidence is evidence[8]


def test_a_spread_or_ratio_of_coverages_no_outcome_can_fail_passes_early_and_none_fails_by_brute_force():
    """Coverages count at most their real balls as trials (``trials_cap``), so a spread or a ratio of regions with few
    real images may be unable to fail at any number of generated images: ``fails_possible`` says so from every
    achievable value at the cap. Checked against the product's own test on 3,000 random coverings (3 to 60 generated
    images per region, extremes included: every ball held, none held); with 200 real balls a region it claims
    nothing. The look then passes such a gate (conditional power 0)."""
    from t2i_fairness.metrics.evidence import pairs
    from t2i_fairness.metrics.intervals import coverage_interval

    rng = np.random.default_rng(11)
    balls, a = (9, 6, 12, 7, 10), 0.05 / 351

    def covering(r: int, n: int, share: float) -> np.ndarray:
        m = np.zeros((n, r), dtype=bool)
        held = rng.random(r) < share
        for j in np.flatnonzero(held):
            m[rng.integers(0, n, size=rng.integers(1, 3)), j] = True
        return m

    for contrast, bound, direction in (("difference", 0.45, "max"), ("ratio", 0.5, "min")):
        ev = pairs([coverage_interval(covering(r, 8, 0.5)) for r in balls], contrast=contrast)
        assert not fails_possible(ev, bound, direction, a)
        for _ in range(1500):
            n = int(rng.integers(3, 61))
            shares = rng.choice([0.0, 1.0, rng.random()], size=len(balls))
            draw = pairs([coverage_interval(covering(r, n, s)) for r, s in zip(balls, shares)], contrast=contrast)
            assert draw.p_value(bound, direction) > a, (contrast, n, shares)
        ind = Indicator(ev.estimate, 8, "spread" if contrast == "difference" else "ratio", ev,
                        higher_is_better=direction == "min", grows=True)
        d = decide_look(ind, bound, direction, level=a, share=1e-9, beta=0.0017, fraction=0.25, units_grow=False)
        assert (d.reason, d.conditional_power) == ("curtail", 0.0)
    # 200 real balls a region: the cap no longer rules a failure out, so the look leaves the gate to its test
    wide = [coverage_interval(covering(200, 8, 0.5)) for _ in range(3)]
    for contrast, bound, direction in (("difference", 0.45, "max"), ("ratio", 0.5, "min")):
        assert fails_possible(pairs(wide, contrast=contrast), bound, direction, a)


def test_a_teams_indifference_margin_is_explicit_in_the_thresholds_file_and_in_every_early_pass(tmp_path):
    """The default early passes keep the fixed-N power; a team that trades power for images writes its indifference
    margin per kind (top-level ``indifference:``) or per gate (a gate's ``indifference:``, which wins) in the
    thresholds file, the round loop reads it, and every early pass on it says so in its message and report line."""
    import numpy as np

    from t2i_fairness.gating.thresholds import ThresholdFileError
    from t2i_fairness.gating.indicator import Indicator
    from t2i_fairness.gating.sequential import early_record, gate_line
    from t2i_fairness.gating.session import GateRecord
    from t2i_fairness.gating.thresholds import ThresholdFile
    from t2i_fairness.metrics.intervals import precision_interval

    path = tmp_path / "t.yaml"
    path.write_text("indifference:\n  share: 0.05\ngates:\n  a:\n    min: 0.8\n  b:\n    min: 0.8\n    indifference: 0.0\n")
    t = ThresholdFile.load(path)
    assert t.indifference == {"share": 0.05} and t.gates["b"].indifference == 0.0 and t.gates["a"].indifference is None
    t.save()
    assert ThresholdFile.load(path).indifference == {"share": 0.05} and "indifference: 0.0" in path.read_text()
    from t2i_fairness.gating.thresholds import BoundUpdate

    moved = ThresholdFile.load(path)
    moved.apply_updates([BoundUpdate("b", "min", 0.81, {"seed": 1})])  # an update keeps the gate's margin
    assert moved.gates["b"].indifference == 0.0 and moved.gates["b"].value == 0.81
    for bad, says in (("indifference:\n  shares: 0.05\n", "unknown gate kind 'shares'"),
                      ("indifference:\n  share: -0.1\n", "must be a finite number >= 0"),
                      ("gates:\n  a:\n    min: 0.8\n    indifference: -1\n", "indifference must be >= 0")):
        path.write_text(bad)
        with pytest.raises(ThresholdFileError, match=says):
            ThresholdFile.load(path)

    class S:  # 85% of n images inside: 0.05 clear of the bound 0.8 in expectation
        def __init__(self, n):
            self.n = n

        def rate(self, which):
            k = int(round(0.85 * self.n))
            return Indicator(k / self.n, self.n, "share", precision_interval(np.r_[np.ones(k, bool), np.zeros(self.n - k, bool)]))

    gates = [GateCallSpec(w, "rate", (("which", w),)) for w in ("a", "b")]
    loop = Rounds(S(1024), lambda s, n: S(n), [256, 512, 1024], "images per prompt", gates, t.gates, 1e-4,
                  raw=lambda s, m, kw: getattr(s, m)(**kw), indifference=t.indifference)
    a, b = (loop.indicator("rate", {"which": w}).sequential for w in ("a", "b"))
    assert (a.reason, a.futility_basis, a.futility_miss, a.at) == (Reason.FUTILITY, "indifference", 0.05, 256)
    assert b.futility_basis != "indifference"  # its own margin 0 wins over the kind's: the default rule
    record = GateRecord("a", "t::a", 0.85, 256, "min", "pass", 0.8, None, "a: measured 0.8500", {})
    message = early_record(record, a, t.gates["a"]).message
    assert "any miss is below 0.05, the margin this gate allows" in message and "indifference" in message
    assert "indifference margin 0.05" in gate_line(a)
    default = Rounds(S(1024), lambda s, n: S(n), [256, 512, 1024], "images per prompt", gates[:1],
                     {"a": t.gates["a"]}, 1e-4, raw=lambda s, m, kw: getattr(s, m)(**kw))
    assert default.indicator("rate", {"which": "a"}).sequential.futility_basis != "indifference"
