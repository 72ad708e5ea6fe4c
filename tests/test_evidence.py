"""The gates' tests (issue #28): exact shares, worst-of selection, MOVER pairs and combinations, Fieller
ratios and Hoeffding bounds, each checked against an independent reference (scipy's binomial and beta
distributions, brute-force loops over pairs, root finding, exact enumeration of every outcome)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize, stats

from t2i_fairness.metrics.evidence import (
    Hoeffding,
    combination,
    fieller_ratio,
    images_for_power,
    minimum_detectable,
    mover_limit,
    pairs,
    worst_of,
)
from t2i_fairness.metrics.intervals import (
    P_FLOOR,
    Interval,
    cluster_mean_interval,
    coverage_interval,
    invert_limit,
    precision_interval,
    share_limit,
    share_power,
    share_tail,
)


def _share(k: int, n: int) -> Interval:
    return precision_interval(np.r_[np.ones(k, bool), np.zeros(n - k, bool)])


# -- one share: the exact binomial test ---------------------------------------------------------------

@settings(max_examples=80, deadline=None)
@given(n=st.integers(1, 200), data=st.data(), bound=st.floats(0.001, 0.999))
def test_share_tail_is_the_binomial_tail_and_agrees_with_its_limit(n, data, bound):
    k = data.draw(st.integers(0, n))
    assert share_tail(k, n, bound, "min") == pytest.approx(max(stats.binom.cdf(k, n, bound), P_FLOOR), rel=1e-9, abs=1e-300)
    assert share_tail(k, n, bound, "max") == pytest.approx(max(stats.binom.sf(k - 1, n, bound), P_FLOOR), rel=1e-9, abs=1e-300)
    for alpha in (0.05, 1e-3, 3.5e-5):  # the test rejects exactly when Clopper-Pearson's limit excludes the bound
        for side, direction, beyond in (("high", "min", lambda lim: lim <= bound), ("low", "max", lambda lim: lim >= bound)):
            tail = share_tail(k, n, bound, direction)
            if abs(tail - alpha) <= 1e-12 * alpha:  # a tie in exact arithmetic (0 of 1 at 0.999, alpha 1e-3): rounding decides
                continue
            assert (tail <= alpha) == beyond(share_limit(k, n, alpha, side))
    hi = stats.beta.ppf(1 - 0.01, k + 1, n - k) if k < n else 1.0
    lo = stats.beta.ppf(0.01, k, n - k + 1) if k > 0 else 0.0
    assert share_limit(k, n, 0.01, "high") == pytest.approx(hi, abs=1e-9)
    assert share_limit(k, n, 0.01, "low") == pytest.approx(lo, abs=1e-9)


def test_a_share_never_reports_p_zero_and_its_interval_p_value_is_the_exact_tail():
    assert share_tail(0, 6, 1.0, "min") == P_FLOOR  # a miss of a bound of 1: certain for a binomial, said as 1e-300
    iv = _share(45, 60)
    assert iv.p_value(0.9, "min") == pytest.approx(stats.binom.cdf(45, 60, 0.9), rel=1e-12)
    assert iv.p_value(0.5, "min") == pytest.approx(stats.binom.cdf(45, 60, 0.5), rel=1e-12)


@pytest.mark.parametrize("n, bound", [(6, 0.9), (60, 0.9), (60, 0.98), (1620, 0.95), (18, 0.9)])
@pytest.mark.parametrize("level", [0.05 / 486, 0.05 / 1431])  # the smoke and paper runs (bench_gate_sizes.count_gates)
def test_exact_size_of_a_share_gate_is_at_most_its_level_where_wilsons_score_test_is_not(n, bound, level):
    """Exact enumeration of every count: the gate's test never exceeds its level; Wilson's score test
    (the gates' p-value before issue #28) exceeds it several times over at these bounds."""
    ks = np.arange(n + 1)
    pmf = stats.binom.pmf(ks, n, bound)
    ours = pmf[[_share(int(k), n).p_value(bound, "min") <= level for k in ks]].sum()
    assert ours <= level
    score = stats.norm.cdf((ks / n - bound) / math.sqrt(bound * (1 - bound) / n))
    if (n, bound) in ((60, 0.9), (60, 0.98), (18, 0.9)):
        assert pmf[score <= level].sum() > 1.2 * level  # the defect the exact test removes


def test_share_power_is_the_binomial_probability_of_the_critical_region():
    n, b, level = 60, 0.9, 1e-4
    crit = max(k for k in range(n + 1) if stats.binom.cdf(k, n, b) <= level)
    for truth in (0.85, 0.8, 0.7):
        assert share_power(n, b, truth, "min", level, integer=True) == pytest.approx(stats.binom.cdf(crit, n, truth))
        assert _share(50, n).power(b, "min", b - truth, level) == pytest.approx(stats.binom.cdf(crit, n, truth))
    # a ceiling: the mirror image
    assert share_power(60, 0.1, 0.2, "max", level, integer=True) == pytest.approx(
        share_power(60, 0.9, 0.8, "min", level, integer=True))


def test_cluster_shares_shrink_their_trials_with_few_prompts_at_far_levels():
    y = np.tile([1.0, 0.0, 1.0, 1.0], 3)
    iv = cluster_mean_interval(y, np.repeat([0, 1, 2, 3], 3), law_free=False)  # Korn-Graubard's part
    z, t = stats.norm.isf(1e-4), stats.t.isf(1e-4, 3)
    assert iv.trials(1e-4) == pytest.approx(iv.n_effective * (z / t) ** 2)
    # p-value and limits agree: p <= a exactly when the limit at a excludes the bound
    for bound in (0.8, 0.9, 0.99):  # 9 of 12 images over 4 prompts: each bound excluded at some level below 1/2
        p = iv.p_value(bound, "min")
        assert p < 0.5
        assert iv.limit(p * 1.001, "high") < bound <= iv.limit(p * 0.999, "high")
    # at alpha = 1/2 the few-prompt correction is the ratio of the densities at 0, not 0 / 0
    assert iv.trials(0.5) == pytest.approx(iv.n_effective * (stats.t.pdf(0, 3) / stats.norm.pdf(0)) ** 2)
    assert iv.trials(0.4999999) == pytest.approx(iv.trials(0.5), rel=1e-4)


# -- the worst of G groups ------------------------------------------------------------------------------

def test_worst_of_is_bonferroni_over_the_groups():
    groups = {"a": _share(40, 60), "b": _share(50, 60), "c": _share(58, 60)}
    w = worst_of(groups)
    assert w.worst_label == "a" and w.selection == 3 and w.estimate == pytest.approx(40 / 60)
    for bound in (0.8, 0.9, 0.95):
        expect = min(1.0, 3 * min(g.p_value(bound, "min") for g in groups.values()))
        assert w.p_value(bound, "min") == pytest.approx(expect, rel=1e-12)
        p = w.p_value(bound, "min")
        if p < 1:  # and the inversion of its simultaneous limit gives the same p
            assert invert_limit(w.limit, bound, "min") == pytest.approx(p, rel=1e-6)
    # the displayed interval is simultaneous: the worst group's limits at (1 - conf) / 2 / G
    assert w.high == pytest.approx(min(g.limit(0.025 / 3, "high") for g in groups.values()))


@pytest.mark.parametrize("n, g, bound", [(60, 6, 0.9), (18, 6, 0.8), (60, 20, 0.7)])
def test_exact_size_of_a_worst_of_gate_with_every_group_on_its_bound(n, g, bound):
    """Every group exactly on the bound (the least favourable null): the groups are independent, so the
    chance that the worst-of test rejects is 1 - prod(1 - P(group rejects at level / G)), enumerated."""
    level = 0.05 / 475
    ks = np.arange(n + 1)
    per = stats.binom.pmf(ks, n, bound)[[share_tail(int(k), n, bound, "min") * g <= level for k in ks]].sum()
    size = 1 - (1 - per) ** g
    assert size <= level
    # and the test agrees with that enumeration on a draw where one group sits on its critical count
    crit = max(int(k) for k in ks if share_tail(int(k), n, bound, "min") * g <= level) if per > 0 else None
    if crit is not None:
        groups = [_share(crit, n)] + [_share(n, n)] * (g - 1)
        assert worst_of(groups).p_value(bound, "min") <= level < worst_of([_share(crit + 1, n)] + groups[1:]).p_value(bound, "min")


def test_worst_of_power_is_the_weakest_groups_at_its_share_of_the_level():
    groups = [_share(50, 60), _share(100, 120)]
    w = worst_of(groups)
    assert w.power(0.9, "min", 0.1, 1e-3) == pytest.approx(min(g.power(0.9, "min", 0.1, 5e-4) for g in groups))
    assert w.power(0.9, "min", 0.1, 1e-3) < groups[0].power(0.9, "min", 0.1, 1e-3)  # selection costs power


# -- pairs: spreads and parity ------------------------------------------------------------------------

def _brute_pair_lower(a: Interval, b: Interval, alpha: float) -> float:
    """MOVER's lower limit of a - b, written out by hand."""
    la, ua = a.limit(alpha, "low"), a.limit(alpha, "high")
    lb, ub = b.limit(alpha, "low"), b.limit(alpha, "high")
    return (a.estimate - b.estimate) - math.sqrt((a.estimate - la) ** 2 + (ub - b.estimate) ** 2)


@settings(max_examples=30, deadline=None)
@given(counts=st.lists(st.integers(0, 18), min_size=2, max_size=5), s=st.floats(0.0, 0.6))
def test_a_spread_rejects_exactly_when_some_ordered_pair_does(counts, s):
    groups = [_share(k, 18) for k in counts]
    sp = pairs(groups)
    K = len(groups) * (len(groups) - 1)
    assert sp.estimate == pytest.approx((max(counts) - min(counts)) / 18)
    for level in (0.05, 1e-3):
        brute = any(_brute_pair_lower(a, b, level / K) > s for a, b in itertools.permutations(groups, 2))
        assert (sp.p_value(s, "max") <= level) == brute
    assert 0.0 <= sp.low <= sp.high <= 1.0  # inside the parameter space, always


def test_six_of_six_minus_zero_of_six_stays_inside_the_parameter_space_and_cannot_fail_at_the_runs_level():
    sp = pairs([_share(6, 6), _share(0, 6)])
    assert (sp.estimate, sp.high) == (1.0, 1.0) and 0 < sp.low < 1
    assert sp.p_value(0.0, "max") > 0.05 / 475  # the old normal interval failed it: size 30x the level


@pytest.mark.parametrize("n, s", [(6, 0.0), (12, 0.5), (18, 0.1), (60, 0.5),
                                  pytest.param(60, 0.0, marks=pytest.mark.slow)])  # 22 s: the largest enumeration
def test_exact_size_of_a_two_group_difference_at_the_runs_level(n, s):
    """Every pair of counts enumerated, the nuisance share on a grid: P(reject) <= level (the issue's
    cases: n = 6, bound 0 was 30x the level; n = 12 and 60 at bound 0.5 were 9.5x and 5.9x)."""
    level = 0.05 / 475
    reject = np.zeros((n + 1, n + 1), bool)
    for i in range(n + 1):
        for j in range(n + 1):
            reject[i, j] = (i - j) / n > s and pairs([_share(i, n), _share(j, n)]).p_value(s, "max") <= level
    ks = np.arange(n + 1)
    worst = max(np.outer(stats.binom.pmf(ks, n, t + s), stats.binom.pmf(ks, n, t))[reject].sum()
                for t in np.linspace(0.0, 1.0 - s, 101))
    assert worst <= level


def test_mover_r_is_the_inversion_of_the_linear_hypothesis():
    """The ratio's upper limit is the r at which MOVER's upper limit of theta_g - r theta_h reaches 0."""
    g, h = _share(30, 60), _share(50, 60)
    alpha = 1e-3
    par = pairs([g, h], contrast="ratio")
    upper = par.pair_limits(alpha, "high")[0, 1]

    def contrast_high(r):
        return mover_limit([g.estimate, h.estimate], [g.limit(alpha / 2, "low"), h.limit(alpha / 2, "low")],
                           [g.limit(alpha / 2, "high"), h.limit(alpha / 2, "high")], [1.0, -r], "high")

    root = optimize.brentq(contrast_high, 0.0, 5.0)
    assert upper == pytest.approx(root, rel=1e-6)
    # the gate's p at a bound r is the smallest level at which that contrast is significantly below 0
    p = par.p_value(0.9, "min")
    assert par.limit(p * 1.0001, "high") < 0.9 <= par.limit(p * 0.9999, "high")


def test_parity_of_zeros_is_one_and_cannot_fail():
    par = pairs([_share(0, 6), _share(0, 6)], contrast="ratio")
    assert par.estimate == 1.0 and par.p_value(0.8, "min") == 1.0


# -- combinations, Fieller, Hoeffding -----------------------------------------------------------------

def test_mover_of_normal_terms_is_the_normal_combination():
    a = Interval(0.7, 0.6, 0.8, "t", 0.95, 40, se=0.05)
    b = Interval(0.5, 0.42, 0.58, "t", 0.95, 30, se=0.04)
    c = combination([a, b], [1.0, -1.0])
    half = stats.norm.ppf(0.975) * math.hypot(0.05, 0.04)
    assert (c.low, c.high) == pytest.approx((0.2 - half, 0.2 + half))
    assert c.p_value(0.3, "min") == pytest.approx(stats.norm.cdf(-0.1 / math.hypot(0.05, 0.04)), rel=1e-6)


def test_a_combination_of_shares_stays_in_its_bounds():
    c = combination([_share(0, 6), _share(6, 6)], [-1.0, 1.0], bounds=(-1.0, 1.0))
    assert -1.0 <= c.low <= c.estimate == 1.0 == c.high


def test_fieller_is_the_t_test_of_the_linear_contrast():
    rng = np.random.default_rng(3)
    num_units, den_units = rng.normal(0.5, 0.05, 8), rng.normal(0.8, 0.05, 8)
    num, den = num_units.mean(), den_units.mean()
    jn = np.array([np.delete(num_units, i).mean() for i in range(8)])
    jd = np.array([np.delete(den_units, i).mean() for i in range(8)])
    f = fieller_ratio(jn, jd, num, den)
    r = 0.7
    d = num_units - r * den_units  # the paired differences: a one-sample t test
    t = d.mean() / (d.std(ddof=1) / math.sqrt(8))
    assert f.p_value(r, "min") == pytest.approx(stats.t.cdf(t, 7), rel=1e-9)
    p = f.p_value(r, "min")
    assert (f.limit(p * 1.0001, "high") < r) and (f.limit(p * 0.9999, "high") >= r)


def test_hoeffding_p_value_is_its_inequality_and_holds_its_level():
    h = Hoeffding.from_half_width(0.25, math.sqrt(math.log(40) / 200), (0.1, 0.4), 100)
    assert h.variance_proxy == pytest.approx(1 / 100)
    assert h.p_value(0.1, "max") == pytest.approx(2 * math.exp(-2 * 0.15**2 * 100))
    # the size of "|p_hat - p| <= x" tests on 100 Bernoulli(0.5) images (the truth on the bound x = 0):
    rng = np.random.default_rng(0)
    phat = rng.binomial(100, 0.5, 200_000) / 100
    rejected = np.mean([Hoeffding(abs(v - 0.5), 0, 1, "h", 0.95, 100, variance_proxy=0.01).p_value(0.0, "max") <= 0.01
                        for v in phat[:20000]])
    assert rejected <= 0.01


# -- power as a plan --------------------------------------------------------------------------------

def test_minimum_detectable_and_images_for_power_invert_power():
    iv = _share(54, 60)
    level = 0.05 / 475
    mde = minimum_detectable(iv, 0.9, "min", level)
    assert iv.power(0.9, "min", mde, level) == pytest.approx(0.8, abs=0.02)  # a binomial's power moves in steps
    f = images_for_power(iv, 0.9, "min", 0.1, level)
    assert f > 1 and iv.scaled(f).power(0.9, "min", 0.1, level) == pytest.approx(0.8, abs=1e-3)
    cov = coverage_interval(np.eye(20, dtype=bool)[:, :20] | np.eye(20, k=1, dtype=bool))
    assert cov.power(0.5, "min", 0.1, level) <= 1.0


def test_a_clustered_share_far_below_its_bound_has_a_tiny_p_value():
    """CIS_K over 100 prompts x 16 images at 0.5 against a floor of 0.8: the exact test at the effective size
    rejects far below the run's level (a cluster share must be able to fail)."""
    rng = np.random.default_rng(0)
    q = rng.beta(5, 5, size=100)
    y = (rng.random((100, 16)) < q[:, None]).astype(float).ravel()
    iv = cluster_mean_interval(y, np.repeat(np.arange(100), 16))
    # the law-free part is the larger: about 2 exp(-100 KL(0.5 || 0.8)) = 4e-10
    assert iv.p_value(0.8, "min") < 1e-8 and iv.p_value(0.3, "min") == 1.0
    assert cluster_mean_interval(y, np.repeat(np.arange(100), 16), law_free=False).p_value(0.8, "min") < 1e-12


def test_a_combination_of_few_prompt_shares_states_its_own_tests_power():
    """CIS's drop at the smoke size (4 prompts per K, t on 3 df): each term's test at 1e-4 has
    n_eff (z / t_3)^2 trials, so the drop's stated power is near 0 (bench/bench_gate_sizes.py measures 0
    for a 0.10 miss); at 10,000 prompts it is the normal one."""
    level = 0.05 / 486
    few = [cluster_mean_interval(np.r_[np.ones(5), np.zeros(3)], np.repeat(np.arange(4), 2)) for _ in range(4)]
    many = [cluster_mean_interval(np.tile([1.0, 0.0, 1.0, 1.0], 2500), np.repeat(np.arange(5000), 2))
            for _ in range(4)]
    w = [0.1, 0.05, -0.02, -0.13]
    stated = combination(few, w).power(0.0, "max", 0.1, level)
    z_only = combination([Interval(t.estimate, 0, 1, "wilson", 0.95, 4, se=t.se, n_effective=t.n_effective)
                          for t in few], w).power(0.0, "max", 0.1, level)
    assert stated < 0.05 < z_only  # the normal-quantile figure (before) promised power the test never has
    assert combination(many, w).power(0.0, "max", 0.1, level) == pytest.approx(
        combination([Interval(t.estimate, 0, 1, "wilson", 0.95, 4, se=t.se, n_effective=t.n_effective)
                     for t in many], w).power(0.0, "max", 0.1, level), rel=1e-3)


def test_a_few_cluster_share_keeps_its_correction_down_to_the_smallest_level():
    """A share over 7 prompts (df 6) with a large effective size: scipy's t.isf is -inf at 1e-300 on few df,
    and ndtri(1 - a) is infinite below 1e-16, so Interval.trials dropped the (z / t)^2 correction there and
    invert_limit reported p = 1e-300 for a bound the test's own limits exclude only from 9e-11 up."""
    iv = Interval(0.3, 0.0, 1.0, "wilson", 0.95, 7, se=0.003, df=6.0, n_effective=20000.0)
    levels = np.geomspace(1e-300, 0.4, 80)
    assert np.all(np.diff([iv.trials(a) for a in levels]) > 0)  # fewer trials the further out the level
    p = iv.p_value(0.6, "min")
    assert p > 1e-250
    assert iv.limit(p * 1.01, "high") < 0.6 <= iv.limit(p * 0.99, "high")
