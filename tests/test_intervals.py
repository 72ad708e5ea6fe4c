"""Tests of t2i_fairness.metrics.intervals: brute-force references, established implementations
(scipy, statsmodels), hypothesis properties, and fixed-seed coverage simulations per chosen method
(bench/bench_interval_coverage.py measures the same on the full grid)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize, stats

from t2i_fairness.metrics import intervals as iv
from t2i_fairness.metrics.intervals import (
    BoundedUnits,
    Interval,
    TUNED_LEVEL,
    betting_limits,
    bounded_mean_limit,
    bounded_mean_tail,
    cluster_bootstrap_interval,
    cluster_mean_interval,
    coverage_interval,
    normal_percentile_variance,
    percentile_mean_interval,
    precision_interval,
    stratified_mean_interval,
)

FAST = settings(max_examples=40, deadline=None)
memberships = st.integers(0, 2**31 - 1).flatmap(
    lambda seed: st.tuples(st.integers(2, 40), st.integers(1, 30), st.floats(0.0, 0.3)).map(
        lambda t: np.random.default_rng(seed).random((t[0], t[1])) < t[2]
    )
)


# ----------------------------------------------------------------------------- coverage


def _coverage(m: np.ndarray) -> float:
    return float(m.any(axis=0).mean())


@FAST
@given(memberships)
def test_coverage_jackknife_equals_deleting_each_image(m):
    brute = np.array([_coverage(np.delete(m, i, axis=0)) for i in range(m.shape[0])])
    np.testing.assert_allclose(iv._coverage_jackknife(m), brute, atol=1e-15)
    n = m.shape[0]
    se = math.sqrt((n - 1) / n * np.sum((brute - brute.mean()) ** 2))
    res = coverage_interval(m, method="jackknife")
    assert res.estimate == _coverage(m)
    assert res.se == pytest.approx(se, abs=1e-15)


@FAST
@given(memberships, st.sampled_from(iv.COVERAGE_METHODS))
def test_coverage_intervals_are_shares_and_seeded(m, method):
    a = coverage_interval(m, method=method, n_resamples=50, seed=3)
    b = coverage_interval(m, method=method, n_resamples=50, seed=3)
    assert a == b
    assert 0.0 <= a.low <= a.high <= 1.0
    if method in ("jackknife_wilson", "jackknife"):
        assert a.low <= a.estimate <= a.high


@FAST
@given(memberships)
def test_coverage_score_interval_is_the_wilson_interval_at_the_effective_size(m):
    res = coverage_interval(m, method="jackknife_wilson")
    assume_inner = 0.0 < res.estimate < 1.0
    z = stats.norm.ppf(0.975)
    n_eff = res.n_effective
    assert 1.0 <= n_eff <= m.shape[1]
    if assume_inner:
        # every value v on the interval's ends solves |estimate - v| = z sqrt(v (1 - v) / n_eff)
        for v in (res.low, res.high):
            if 0.0 < v < 1.0:
                assert abs(res.estimate - v) == pytest.approx(z * math.sqrt(v * (1 - v) / n_eff), rel=1e-9)


def test_percentile_bootstrap_of_coverage_sits_below_the_estimate():
    """The issue's symptom (`0.1167 [0.0667, 0.1167]`): resampling with replacement loses images."""
    rng = np.random.default_rng(0)
    m = rng.random((60, 60)) < 0.004
    est = _coverage(m)
    pct = coverage_interval(m, method="percentile")
    assert pct.high <= est + 1e-12
    chosen = coverage_interval(m)
    assert chosen.low < est < chosen.high


def test_collapsed_generator_has_a_coverage_interval_not_an_error():
    m = np.zeros((36, 50), dtype=bool)
    m[:, :2] = True  # every generated image is the same one, inside two balls
    res = coverage_interval(m)
    assert res.estimate == 0.04 and res.low <= 0.04 <= res.high < 0.25


@pytest.mark.parametrize(
    "m, match",
    [
        (np.zeros((1, 5), bool), "at least 2 generated rows"),
        (np.zeros(5, bool), "2-D"),
        (np.full((3, 3), 0.5), "boolean"),
    ],
)
def test_coverage_refuses_bad_membership(m, match):
    with pytest.raises(ValueError, match=match):
        coverage_interval(m)


def test_coverage_refuses_unknown_method_and_confidence():
    m = np.eye(4, dtype=bool)
    with pytest.raises(ValueError, match="unknown `method` 'bootstrap'"):
        coverage_interval(m, method="bootstrap")
    with pytest.raises(ValueError, match="`confidence` must be in"):
        coverage_interval(m, confidence=1.0)


# ----------------------------------------------------------------------------- precision


@FAST
@given(st.integers(1, 400).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))), st.floats(0.5, 0.99))
def test_precision_intervals_match_established_implementations(nk, conf):
    n, k = nk
    inside = np.r_[np.ones(k, bool), np.zeros(n - k, bool)]
    ci = stats.binomtest(k, n).proportion_ci
    for method, ref in (("wilson", ci(conf, "wilson")), ("clopper_pearson", ci(conf, "exact"))):
        got = precision_interval(inside, method=method, confidence=conf)
        assert (got.low, got.high) == pytest.approx((ref.low, ref.high), abs=1e-9)
    confint = pytest.importorskip("statsmodels.stats.proportion").proportion_confint
    for method, sm in (("agresti_coull", "agresti_coull"), ("jeffreys", "jeffreys")):
        got = precision_interval(inside, method=method, confidence=conf)
        low, high = confint(k, n, alpha=1 - conf, method=sm)
        if method == "jeffreys":  # Brown, Cai & DasGupta (2001): the end at 0 of 0 (1 of n of n) is 0 (1)
            low, high = (0.0 if k == 0 else low), (1.0 if k == n else high)
        assert (got.low, got.high) == pytest.approx((low, high), abs=1e-9)


def test_precision_from_membership_matrix_and_missing_images():
    m = np.zeros((10, 4), bool)
    m[:6, 1] = True
    a = precision_interval(m, n_missing=2)
    b = precision_interval(np.r_[np.ones(6, bool), np.zeros(6, bool)])
    assert a == b and a.estimate == 0.5 and a.n_units == 12


@pytest.mark.parametrize(
    "m, kwargs, match",
    [
        (np.zeros(0, bool), {}, "at least one generated image"),
        (np.zeros((2, 2, 2), bool), {}, r"\(n_scored, n_real\)"),
        (np.ones(3, bool), {"n_missing": -1}, "`n_missing` must be a non-negative integer"),
        (np.ones(3, bool), {"method": "exact"}, "unknown `method` 'exact'"),
    ],
)
def test_precision_refuses_bad_input(m, kwargs, match):
    with pytest.raises(ValueError, match=match):
        precision_interval(m, **kwargs)


# ----------------------------------------------------------------------------- percentiles


@settings(max_examples=60, deadline=None)
@given(st.integers(3, 40), st.floats(0, 100), st.integers(0, 2**31 - 1))
def test_percentile_jackknife_variance_equals_brute_force(n, q, seed):
    x = np.sort(np.random.default_rng(seed).normal(size=n))
    loo = np.array([np.percentile(np.delete(x, i), q) for i in range(n)])
    brute = (n - 1) / n * np.sum((loo - loo.mean()) ** 2)
    assert iv._loo_percentile_variance(x, q) == pytest.approx(brute, rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("n, q", [(2, 50.0), (6, 10.0), (12, 10.0), (30, 10.0), (60, 10.0), (7, 0.0), (9, 100.0), (31, 50.0)])
def test_normal_percentile_variance_matches_simulation(n, q):
    z = np.random.default_rng(n).standard_normal((100_000, n))
    mc = np.percentile(z, q, axis=1).var()
    assert normal_percentile_variance(n, q) == pytest.approx(mc, rel=0.02)  # MC relative SE ~0.45%


def test_normal_percentile_variance_refuses_bad_input():
    with pytest.raises(ValueError, match="`n` must be a positive integer"):
        normal_percentile_variance(0, 10.0)
    with pytest.raises(ValueError, match=r"`percentile` must be in \[0, 100\]"):
        normal_percentile_variance(5, 101.0)


@FAST
@given(st.lists(st.integers(2, 30), min_size=1, max_size=5), st.integers(0, 2**31 - 1))
def test_percentile_jackknife_t_formula(sizes, seed):
    rng = np.random.default_rng(seed)
    groups = [rng.normal(0.3, 0.03, n) for n in sizes]
    res = percentile_mean_interval(groups)
    k = len(groups)
    assert res.estimate == pytest.approx(np.mean([np.percentile(g, 10) for g in groups]), abs=1e-15)
    var = sum(max(iv._loo_percentile_variance(np.sort(g), 10.0), g.var(ddof=1) * normal_percentile_variance(g.size, 10.0))
              for g in groups)
    assert res.se == pytest.approx(math.sqrt(var) / k, rel=1e-9)
    half = stats.t.ppf(0.975, k) * res.se
    assert (res.low, res.high) == pytest.approx((res.estimate - half, res.estimate + half), rel=1e-9)
    assert res.df == k


def test_percentile_groups_from_mapping_sequence_or_matrix_agree():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 8))
    a = percentile_mean_interval({"a": x[0], "b": x[1], "c": x[2]})
    assert a == percentile_mean_interval(list(x)) == percentile_mean_interval(x)


@pytest.mark.parametrize(
    "scores, kwargs, match",
    [
        ({}, {}, "holds no group"),
        ({"bag": [0.1]}, {}, r"`scores\['bag'\]` must be 1-D with at least 2"),
        ({"bag": [0.1, float("nan")]}, {}, r"`scores\['bag'\]` holds a non-finite value"),
        ({"bag": [0.1, 0.2]}, {"percentile": 120}, r"`percentile` must be a number in \[0, 100\]"),
        ("bag", {}, "must map group names"),
    ],
)
def test_percentile_refuses_bad_input(scores, kwargs, match):
    with pytest.raises(ValueError, match=match):
        percentile_mean_interval(scores, **kwargs)


@FAST
@given(st.sampled_from(iv.PERCENTILE_METHODS), st.integers(0, 1000))
def test_percentile_methods_are_seeded(method, seed):
    groups = [np.random.default_rng(seed).normal(size=7) for _ in range(2)]
    a = percentile_mean_interval(groups, method=method, n_resamples=40, seed=seed)
    assert a == percentile_mean_interval(groups, method=method, n_resamples=40, seed=seed)
    assert a.low <= a.high


# ----------------------------------------------------------------------------- cluster


def test_cluster_t_matches_statsmodels_cluster_robust_se():
    sm = pytest.importorskip("statsmodels.api")
    rng = np.random.default_rng(0)
    sizes = rng.integers(1, 9, 15)
    labels = np.repeat(np.arange(15), sizes)
    y = rng.random(labels.size) + 0.3 * rng.random(15)[labels]
    fit = sm.OLS(y, np.ones((y.size, 1))).fit(cov_type="cluster", cov_kwds={"groups": labels})
    res = cluster_mean_interval(y, labels, method="t")
    assert res.estimate == pytest.approx(fit.params[0], rel=1e-12)
    assert res.se == pytest.approx(fit.bse[0], rel=1e-9)  # G/(G-1) correction, (N-1)/(N-K) = 1
    assert res.df == 14


@FAST
@given(st.integers(2, 12), st.integers(1, 6), st.integers(0, 2**31 - 1))
def test_cluster_weighting_by_prompt_is_the_t_interval_of_prompt_means(g, m, seed):
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(g), rng.integers(1, m + 1, g))
    y = rng.random(labels.size)
    means = np.array([y[labels == c].mean() for c in range(g)])
    res = cluster_mean_interval(y, labels, weighting="cluster", method="t")
    assert res.estimate == pytest.approx(means.mean(), abs=1e-12)
    assert res.se == pytest.approx(means.std(ddof=1) / math.sqrt(g), rel=1e-9, abs=1e-15)


@FAST
@given(st.integers(2, 10), st.integers(1, 5), st.integers(0, 2**31 - 1))
def test_cluster_jackknife_of_a_mean_of_prompt_means_is_the_classical_se(g, m, seed):
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(g), m)
    y = rng.random(labels.size)

    def stat(idx):
        return float(np.mean([y[idx][labels[idx] == c].mean() for c in np.unique(labels[idx])]))

    res = cluster_bootstrap_interval(stat, labels)
    means = y.reshape(g, m).mean(axis=1)
    assert res.estimate == pytest.approx(means.mean(), abs=1e-12)
    assert res.se == pytest.approx(means.std(ddof=1) / math.sqrt(g), rel=1e-9, abs=1e-15)


def test_cluster_bootstrap_resamples_whole_prompts():
    labels = np.repeat(["p0", "p1", "p2", "p3"], 3)
    seen = []

    def stat(idx):
        seen.append(idx)
        return float(len(idx))

    cluster_bootstrap_interval(stat, labels, method="percentile", n_resamples=20, seed=0)
    for idx in seen[1:]:
        picked = labels[idx]
        # every prompt drawn brings all 3 of its images, as often as it was drawn
        for p in np.unique(picked):
            assert np.count_nonzero(picked == p) % 3 == 0


@FAST
@given(st.integers(2, 10), st.integers(0, 2**31 - 1))
def test_cluster_wilson_is_korn_graubard(g, seed):
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(g), 4)
    y = (rng.random(labels.size) < rng.random()).astype(float)
    res = cluster_mean_interval(y, labels)  # 0/1 values: auto picks wilson
    t = cluster_mean_interval(y, labels, method="t")
    assert res.method == "wilson"
    assert 0.0 <= res.low <= res.estimate <= res.high <= 1.0
    p = res.estimate
    n_raw = labels.size if t.se == 0 else min(labels.size, p * (1 - p) / t.se**2)  # capped for 0/1 values
    # the interval records the unadjusted effective size and its degrees of freedom; Korn & Graubard's
    # (z / t_{G-1})^2 is applied at each level: at 95% for the displayed interval
    assert res.n_effective == pytest.approx(max(n_raw, 1.0), rel=1e-9) and res.df == g - 1
    z, tq = stats.norm.ppf(0.975), stats.t.ppf(0.975, g - 1)
    n_star = max(n_raw, 1.0) * (z / tq) ** 2
    centre = (p + z * z / (2 * n_star)) / (1 + z * z / n_star)
    half = z / (1 + z * z / n_star) * np.sqrt(p * (1 - p) / n_star + z * z / (4 * n_star**2))
    # displayed: the wider of Wilson's and the law-free (betting, the gate's p-value's bets) limits over the shares
    shares = y.reshape(g, 4).mean(axis=1)
    free = [float(betting_limits(shares, 0.025, side, tuned=TUNED_LEVEL)) for side in ("low", "high")]
    assert res.bounded == BoundedUnits(g, pytest.approx(shares.mean()), pytest.approx(shares.var(ddof=1)))
    assert res.low == pytest.approx(min(max(0.0, min(centre - half, p)), free[0]), abs=1e-12)
    assert res.high == pytest.approx(max(min(1.0, max(centre + half, p)), free[1]), abs=1e-12)
    assert res.trials(0.025) == pytest.approx(n_star, rel=1e-12)


def test_cluster_auto_picks_t_outside_the_unit_interval():
    assert cluster_mean_interval([-0.5, 0.2, 0.3, 0.9], ["a", "a", "b", "b"]).method == "t"


def test_cluster_refuses_bad_input():
    with pytest.raises(ValueError, match="at least 2 clusters"):
        cluster_mean_interval([0.1, 0.2], ["a", "a"])
    with pytest.raises(ValueError, match="one label per value"):
        cluster_mean_interval([0.1, 0.2], ["a"])
    with pytest.raises(ValueError, match=r"values in \[0, 1\]"):
        cluster_mean_interval([0.1, 2.0], ["a", "b"], method="wilson")
    with pytest.raises(ValueError, match="unknown `weighting`"):
        cluster_mean_interval([0.1, 0.2], ["a", "b"], weighting="prompt")
    with pytest.raises(ValueError, match="not finite on the full sample"):
        cluster_bootstrap_interval(lambda idx: float("nan"), ["a", "b"])


# ----------------------------------------------------------------------------- stratified


def test_stratified_t_matches_welch_for_two_strata():
    rng = np.random.default_rng(1)
    a, b = rng.random(7), rng.random(11) * 0.5
    res = stratified_mean_interval(np.r_[a, b], np.r_[np.zeros(7), np.ones(11)])
    welch = stats.ttest_ind(a, b, equal_var=False)
    # the mean of the two means has the Welch variance / 4 and the same degrees of freedom
    assert res.se == pytest.approx(math.sqrt(a.var(ddof=1) / 7 + b.var(ddof=1) / 11) / 2, rel=1e-12)
    assert res.df == pytest.approx(welch.df, rel=1e-12)


def test_stratified_single_stratum_is_the_one_sample_t_interval():
    x = np.random.default_rng(2).random(9)
    res = stratified_mean_interval(x)
    ref = stats.ttest_1samp(x, 0.0).confidence_interval(0.95)
    assert (res.low, res.high) == pytest.approx((ref.low, ref.high), rel=1e-12)


def test_stratified_refuses_tiny_strata():
    with pytest.raises(ValueError, match="stratum 'b' has 1 value"):
        stratified_mean_interval([0.1, 0.2, 0.3], ["a", "a", "b"])


# ----------------------------------------------------------------------------- Interval


def test_interval_se_at_for_score_and_normal_intervals():
    normal = Interval(0.5, 0.4, 0.6, "t", 0.95, 10, se=0.05, df=9)
    score = Interval(0.5, 0.4, 0.6, "wilson", 0.95, 10, se=0.05, n_effective=100.0)
    assert normal.se_at(0.9) == 0.05
    assert score.se_at(0.9) == pytest.approx(0.03)
    assert Interval(0.5, 0.4, 0.6, "percentile", 0.95, 10).se_at(0.9) is None


# ----------------------------------------------------------------------------- coverage simulations
# Worlds with a known truth; each chosen method must cover 90-99% at 95% nominal (fixed seeds).

DIM = 16


def _radii(real):
    d = np.sqrt(((real[:, None] - real[None]) ** 2).sum(-1))
    d.sort(axis=1)
    return d[:, 3]


def _coverage_rate(n_real, n_fake, mu, reps, seed):
    rng = np.random.default_rng(seed)
    real = rng.standard_normal((n_real, DIM))
    rad = _radii(real)
    p = stats.ncx2.cdf(rad**2, DIM, ((real - mu) ** 2).sum(1))
    truth = float(np.mean(1 - (1 - p) ** n_fake))
    hits = {"jackknife_wilson": 0, "percentile": 0}
    for r in range(reps):
        fake = mu + np.random.default_rng([seed, r]).standard_normal((n_fake, DIM))
        m = np.sqrt(((fake[:, None] - real[None]) ** 2).sum(-1)) < rad
        for method in hits:
            hits[method] += coverage_interval(m, method=method, n_resamples=200, seed=r).contains(truth)
    return truth, {k: v / reps for k, v in hits.items()}


def test_coverage_interval_covers_and_the_percentile_bootstrap_does_not():
    truth, rates = _coverage_rate(n_real=50, n_fake=120, mu=0.5, reps=150, seed=11)
    assert 0.3 < truth < 0.97
    assert 0.90 <= rates["jackknife_wilson"] <= 0.99, (truth, rates)
    assert rates["percentile"] < 0.6, (truth, rates)


@pytest.mark.slow
@pytest.mark.parametrize("n_real, n_fake, mu", [(200, 36, 0.0), (10, 360, 1.0), (200, 360, 1.0), (50, 36, 0.5)])
def test_coverage_interval_covers_across_sizes(n_real, n_fake, mu):
    truth, rates = _coverage_rate(n_real, n_fake, mu, reps=300, seed=n_real + n_fake)
    assert 0.90 <= rates["jackknife_wilson"] <= 0.99, (truth, rates)


@pytest.mark.parametrize("n", [36, 120, 360])
def test_wilson_precision_covers(n):
    rng = np.random.default_rng(n)
    hits = total = 0
    for pi in (0.05, 0.3, 0.6, 0.95):
        for r in range(250):
            hits += precision_interval(rng.random(n) < pi).contains(pi)
            total += 1
    assert 0.90 <= hits / total <= 0.99


def test_wilson_precision_covers_with_duplicates_removed():
    """30% of the images are one collapsed image (outside the manifold), the rest inside with
    probability 0.6; exact duplicates are dropped (drop_all) or kept once (keep_one)."""
    n, q, pi = 60, 0.3, 0.6
    for mode in ("keep_one", "drop_all"):
        g = np.random.default_rng(5)
        runs = 200_000
        n_atom = g.binomial(n, q, runs)
        keep = (n_atom >= 1) if mode == "keep_one" else (n_atom == 1)
        truth = float(np.mean(g.binomial(n - n_atom, pi) / (n - n_atom + keep)))
        hits = 0
        for r in range(400):
            rr = np.random.default_rng([7, r])
            k = rr.binomial(n, q)
            inside = rr.random(n - k) < pi
            if (k >= 1) if mode == "keep_one" else (k == 1):
                inside = np.r_[inside, False]
            hits += precision_interval(inside).contains(truth)
        assert 0.90 <= hits / 400 <= 0.99, (mode, truth, hits / 400)


def _p10_rate(kind, k, n, reps, seed):
    def draw(g, mean, size):
        if kind == "tail":
            tail = g.random(size) < 0.15
            return np.where(tail, g.normal(mean - 0.1, 0.03, size), g.normal(mean, 0.02, size))
        return mean + 0.04 - g.gamma(2.0, 0.02, size)

    means = 0.22 + 0.1 * np.arange(k) / max(k - 1, 1)
    tg = np.random.default_rng(99)
    truth = float(np.mean([np.percentile(draw(tg, mu, (100_000, n)), 10, axis=1).mean() for mu in means]))
    hits = 0
    for r in range(reps):
        g = np.random.default_rng([seed, r])
        hits += percentile_mean_interval([draw(g, mu, n) for mu in means]).contains(truth)
    return hits / reps


def test_p10_interval_covers_at_six_images_per_object():
    assert 0.90 <= _p10_rate("tail", k=6, n=6, reps=400, seed=1) <= 0.99


@pytest.mark.slow
@pytest.mark.parametrize("kind, k, n", [("tail", 2, 6), ("skewed", 2, 12), ("tail", 27, 30), ("skewed", 6, 60)])
def test_p10_interval_covers_across_sizes(kind, k, n):
    assert 0.90 <= _p10_rate(kind, k, n, reps=400, seed=k * n) <= 0.99


@pytest.mark.parametrize("method, n_prompts, binary", [("t", 12, False), ("wilson", 12, False), ("wilson", 6, True)])
@pytest.mark.parametrize("law_free", [False, True])
def test_cluster_interval_covers(method, n_prompts, binary, law_free):
    """Korn-Graubard's alone covers about as stated; with the law-free limits beside it, at least that."""
    a, b = 0.6, 4.0  # rare: most prompts rarely show it
    truth = a / (a + b)
    if binary:  # P(Binomial(3, r) >= 2) = E[3 r^2 - 2 r^3], from the Beta moments
        m2 = a * (a + 1) / ((a + b) * (a + b + 1))
        truth = 3 * m2 - 2 * m2 * (a + 2) / (a + b + 2)
    hits = 0
    for r in range(500):
        g = np.random.default_rng([n_prompts, r])
        rates = g.beta(a, b, n_prompts)
        labels = np.repeat(np.arange(n_prompts), 4 if not binary else 8)
        y = g.binomial(3, rates[labels]) / 3.0
        if binary:
            y = (y > 0.5).astype(float)
        hits += cluster_mean_interval(y, labels, method=method, law_free=law_free).contains(truth)
    assert 0.90 <= hits / 500 <= (1.0 if law_free else 0.99), hits / 500


def test_cluster_t_fails_rare_shares_at_few_prompts_and_wilson_does_not():
    """Why shares get Korn-Graubard's Wilson: 6 prompts, a rare 0/1 value."""
    a, b = 0.6, 4.0
    m2 = a * (a + 1) / ((a + b) * (a + b + 1))
    truth = 3 * m2 - 2 * m2 * (a + 2) / (a + b + 2)
    hits = {"t": 0, "wilson": 0}
    for r in range(400):
        g = np.random.default_rng([17, r])
        labels = np.repeat(np.arange(6), 2)
        y = (g.binomial(3, g.beta(a, b, 6)[labels]) >= 2).astype(float)
        for method in hits:
            hits[method] += cluster_mean_interval(y, labels, method=method, law_free=False).contains(truth)
    assert hits["t"] / 400 < 0.8 and 0.90 <= hits["wilson"] / 400 <= 0.99, hits


def test_cluster_statistic_interval_covers():
    hits = 0
    for r in range(150):
        g = np.random.default_rng([3, r])
        rates = g.beta(2.0, 3.0, 12)
        labels = np.repeat(np.arange(12), 6)
        y = (g.random(labels.size) < rates[labels]).astype(float)
        elig = (g.random(labels.size) < 0.6).astype(float)
        elig[::6] = 1.0
        res = cluster_bootstrap_interval(lambda idx: float((y[idx] * elig[idx]).sum() / elig[idx].sum()), labels)
        hits += res.contains(0.4)
    assert 0.90 <= hits / 150 <= 0.99


@pytest.mark.parametrize("strata, n", [(1, 4), (6, 4), (6, 30)])
def test_stratified_interval_covers(strata, n):
    params = [(2.0 + 6.0 * i / max(strata - 1, 1), 2.0) for i in range(strata)]
    truth = float(np.mean([a / (a + b) for a, b in params]))
    labels = np.repeat(np.arange(strata), n)
    hits = 0
    for r in range(500):
        g = np.random.default_rng([strata, n, r])
        y = np.concatenate([g.beta(a, b, n) for a, b in params])
        hits += stratified_mean_interval(y, labels).contains(truth)
    assert 0.90 <= hits / 500 <= 0.99


def test_scalar_share_limit_and_t_quantile_are_the_vectorised_and_scipy_values():
    """The fast paths (one share's limit on floats, Student's t quantile by ``special.stdtrit``, its density at 0 in
    closed form) give the values of the vectorised code and of ``scipy.stats.t`` exactly."""
    import itertools

    from t2i_fairness.metrics.intervals import _t_density_at_0, share_limit, upper_quantile

    for x, n, a, side in itertools.product([0, 0.5, 3, 7.25, 59, 60, 1e4], [0, 1e-13, 1, 7.25, 60, 1e4, 2.5e5],
                                           [1e-300, 1e-200, 1e-30, 1e-6, 0.025, 0.5, 0.9], ["low", "high"]):
        one = share_limit(x, n, a, side)
        many = float(share_limit(np.array([x]), np.array([n]), np.array([a]), side)[0])
        assert type(one) is float and (one == many or (math.isnan(one) and math.isnan(many))), (x, n, a, side)
    for a, df in itertools.product([1e-150, 1e-30, 1e-6, 0.025, 0.5, 0.7], [1.0, 2.5, 8.0, 139.0, 1e6]):
        assert upper_quantile(a, df) == float(-stats.t.ppf(a, df)), (a, df)
    for df in (1.0, 2.5, 8.0, 139.0):
        assert _t_density_at_0(df) == pytest.approx(float(stats.t.pdf(0.0, df)), rel=1e-14)


# -- the law-free test of a mean of unit values in [0, 1] (cluster shares: CIS_K, the CIS rate floor) --------

@pytest.mark.parametrize("n, bound, alpha", [(5, 0.3, 0.05), (20, 0.05, 0.01), (40, 0.5, 1e-3), (140, 0.6, 3.5e-8)])
def test_law_free_test_holds_its_level_for_0_1_units_exactly(n, bound, alpha):
    """0/1 units are the most spread law on [0, 1] for a mean: every count of successes enumerated."""
    k = np.arange(n + 1)
    mean = k / n
    var = mean * (1 - mean) * n / (n - 1)  # sample variance (ddof=1) of k ones and n - k zeros
    for direction, truth in (("min", bound), ("max", bound)):
        p = bounded_mean_tail(mean, var, n, bound, direction)
        size = float(stats.binom.pmf(k, n, truth)[p <= alpha].sum())
        assert size <= alpha, (direction, size)
        # and it is a test: the farthest count is rejected wherever Hoeffding's part alone allows it
        far_kl = -np.log1p(-bound) if direction == "min" else -np.log(bound)
        if 2 * np.exp(-n * far_kl) <= alpha:
            assert p[0 if direction == "min" else n] <= alpha
        else:
            assert (p > alpha).all() or direction == "max"


@pytest.mark.parametrize("a, b", [(0.05 * 9, 0.95 * 9), (0.3 * 2.33, 0.7 * 2.33)])
def test_law_free_test_holds_its_level_for_skewed_prompt_rates(a, b):
    """Prompt shares over 16 images with beta-distributed rates (the skew that breaks the t-based test in the
    far tail), 40 prompts, level 0.01: simulated size at most the level (20,000 runs)."""
    rng = np.random.default_rng(7)
    runs, n, images, alpha = 20_000, 40, 16, 0.01
    rates = rng.beta(a, b, size=(runs, n))
    shares = rng.binomial(images, rates) / images
    p = bounded_mean_tail(shares.mean(1), shares.var(1, ddof=1), n, a / (a + b), "min")
    assert (p <= alpha).mean() <= alpha


def test_law_free_parts_are_hoeffding_and_maurer_pontil():
    n, mean, var, bound = 100, 0.2, 0.03, 0.35
    kl = mean * np.log(mean / bound) + (1 - mean) * np.log((1 - mean) / (1 - bound))
    # Maurer & Pontil's deviation at d, inverted: sqrt(2 V L / n) + 7 L / (3 (n - 1)) = gap with L = ln(2 / d)
    L = optimize.brentq(lambda L: np.sqrt(2 * var * L / n) + 7 * L / (3 * (n - 1)) - (bound - mean), 1e-9, 1e3)
    expected = min(1.0, 2 * min(np.exp(-n * kl), 2 * np.exp(-L)))
    assert float(bounded_mean_tail(mean, var, n, bound, "min")) == pytest.approx(expected, rel=1e-9)
    assert float(bounded_mean_tail(1 - mean, var, n, 1 - bound, "max")) == pytest.approx(expected, rel=1e-9)


@given(st.floats(0.01, 0.99), st.floats(0.0, 0.1), st.integers(2, 5000), st.floats(1e-9, 0.2))
@FAST
def test_law_free_limits_are_where_the_test_starts_to_reject(mean, var, n, alpha):
    low, high = (float(bounded_mean_limit(mean, var, n, alpha, s)) for s in ("low", "high"))
    assert 0.0 <= low <= mean <= high <= 1.0
    if low > 1e-6:
        assert bounded_mean_tail(mean, var, n, low * (1 - 1e-6), "max") <= alpha * (1 + 1e-6)
        assert bounded_mean_tail(mean, var, n, low + 1e-6, "max") > alpha * (1 - 1e-6) or low + 1e-6 > mean


def test_law_free_limits_match_bisection_of_the_test_itself():
    """The closed-form / divergence-only limit is the one a bisection over :func:`bounded_mean_tail`'s own
    rejection finds, edges included (no units' spread, a share of 0 or 1, one unit, the far tail)."""
    rng = np.random.default_rng(11)
    cases = [(m, v, n, a) for m in (0.0, 1.0, 1e-6, 0.3, 0.97) for v in (0.0, 0.02) for n in (1, 2, 40, 10_000)
             for a in (3.49e-5, 0.05)]
    cases += [(rng.random() ** 3, rng.random() * 0.1, int(rng.integers(2, 20_000)), 10 ** rng.uniform(-10, -1))
              for _ in range(200)]

    def bisect(mean, var, n, alpha, side):
        lo, hi = (0.0, mean) if side == "low" else (mean, 1.0)
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            rejected = float(bounded_mean_tail(mean, var, n, mid, "max" if side == "low" else "min")) <= alpha
            if side == "low":
                lo, hi = (mid, hi) if rejected else (lo, mid)
            else:
                lo, hi = (lo, mid) if rejected else (mid, hi)
        return lo if side == "low" else hi

    for side in ("low", "high"):
        scalar = [float(bounded_mean_limit(*case, side)) for case in cases]
        assert scalar == pytest.approx([bisect(*case, side) for case in cases], abs=1e-12)
        # the vectorised path (many limits at once) gives the scalar path's
        vector = bounded_mean_limit(*(np.array(col, dtype=float) for col in zip(*cases)), side)
        assert vector == pytest.approx(scalar, abs=1e-14)


def test_a_guarded_share_is_never_surer_than_either_test():
    """The gate's p-value is the larger of Korn-Graubard's and the law-free one; its limits the wider."""
    rng = np.random.default_rng(3)
    labels = np.repeat(np.arange(60), 16)
    y = (rng.random(labels.size) < np.repeat(rng.beta(0.5, 5, 60), 16)).astype(float)
    iv = cluster_mean_interval(y, labels)
    bare = dataclasses.replace(iv, bounded=None)
    for bound in (0.12, 0.2, 0.3):
        assert iv.p_value(bound, "min") == pytest.approx(max(bare.p_value(bound, "min"), iv.bounded.p_value(bound, "min")), rel=1e-12)
        assert iv.limit(1e-4, "high") == pytest.approx(max(bare.limit(1e-4, "high"), iv.bounded.limit(1e-4, "high")), rel=1e-12)
        assert iv.power(bound, "min", 0.05, 1e-4) <= bare.power(bound, "min", 0.05, 1e-4)
    assert "law_free_units" in iv.record() and iv.scaled(4).bounded.n == 240


@pytest.mark.parametrize("law", ["beta", "bernoulli", "two_point"])
@pytest.mark.parametrize("n", [5, 20, 100])
def test_the_betting_limit_covers_the_mean_whatever_the_law(law, n):
    """betting_limit (Waudby-Smith & Ramdas, the futility rule's law-free side) covers at its level, seeded, for
    laws a test of Gaussian shape would not cover: prompt shares from a Beta, 0/1 values at a low rate, a
    skewed two-point law. Checked on both sides at 0.05 over 2,000 draws (valid: at most 0.05, three standard
    errors of slack)."""
    from t2i_fairness.metrics.intervals import betting_limit

    rng = np.random.default_rng([n, len(law)])
    draw = {"beta": lambda: rng.binomial(16, rng.beta(1.2, 1.2, n)) / 16,
            "bernoulli": lambda: (rng.random(n) < 0.1).astype(float),
            "two_point": lambda: np.where(rng.random(n) < 0.95, 0.9, 0.0)}[law]
    mean = {"beta": 0.5, "bernoulli": 0.1, "two_point": 0.95 * 0.9}[law]
    draws = [draw() for _ in range(2000)]
    above = np.mean([betting_limit(x, 0.05, "low") > mean for x in draws])
    below = np.mean([betting_limit(x, 0.05, "high") < mean for x in draws])
    slack = 3 * math.sqrt(0.05 * 0.95 / 2000)
    assert above <= 0.05 + slack and below <= 0.05 + slack


def test_a_cluster_share_s_futility_limit_is_the_wider_of_its_own_and_the_betting_limit():
    """The futility rule's limit of a cluster share: the betting limit over its prompts' shares in their order
    (kept by cluster_mean_interval) beside the interval's own, the wider of the two; the gate's own limit bets
    too (tuned for the presets' level), both narrower than Hoeffding / Maurer-Pontil at 70 prompts that vary
    little; without the units kept (a scaled interval, planning power), the gate's own limit."""
    from t2i_fairness.metrics.intervals import betting_limit, cluster_mean_interval

    rng = np.random.default_rng(5)
    rates = rng.beta(6, 6, 70)
    values = (rng.random((70, 16)) < rates[:, None]).astype(float)
    iv = cluster_mean_interval(values.ravel(), np.repeat(np.arange(70), 16))
    shares = values.mean(axis=1)
    assert iv.bounded.values == tuple(shares.tolist())
    kg = dataclasses.replace(iv, bounded=None)
    for side in ("low", "high"):
        lim, own = iv.futility_limit(0.00125, side), kg.limit(0.00125, side)
        bet = betting_limit(shares, 0.00125, side)
        assert lim == (min(own, bet) if side == "low" else max(own, bet))
    hoeffding = float(bounded_mean_limit(iv.bounded.mean, iv.bounded.var, 70, 0.00125, "low"))
    assert hoeffding < iv.limit(0.00125, "low") < iv.estimate  # the gate's own law-free side bets too
    assert abs(iv.limit(0.00125, "low") - iv.futility_limit(0.00125, "low")) < 0.01  # bets tuned for 1.25e-3
    assert iv.scaled(2.0).futility_limit(0.00125, "low") == iv.scaled(2.0).limit(0.00125, "low")


def test_a_combinations_futility_limit_is_mover_over_its_terms_futility_limits():
    """CIS's drop per component (minus the slope of four cluster shares over K): its futility rule reads MOVER over
    each CIS_K's futility limit (the betting side), as each CIS_K's own rule does; within 0.01 of its test's
    limit (which bets too), never beyond its estimate; the gate's test and interval keep ``limit`` (bench/bench_drop_futility.py
    measures the promise)."""
    from t2i_fairness.families.cis.study import slope_weights
    from t2i_fairness.metrics.evidence import combination, mover_limit
    from t2i_fairness.metrics.intervals import cluster_mean_interval

    rng = np.random.default_rng(11)
    terms = []
    for mean in (0.8, 0.7, 0.6, 0.5):
        rates = rng.beta(mean * 4, (1 - mean) * 4, 12)
        values = (rng.random((12, 16)) < rates[:, None]).astype(float)
        terms.append(cluster_mean_interval(values.ravel(), np.repeat(np.arange(12), 16)))
    w = [-float(x) for x in slope_weights([1, 2, 4, 8])]
    drop = combination(terms, w, bounds=(-0.5, 0.5))
    for side in ("low", "high"):
        want = mover_limit([t.estimate for t in terms], [t.futility_limit(0.001, "low") for t in terms],
                           [t.futility_limit(0.001, "high") for t in terms], w, side)
        assert drop.futility_limit(0.001, side) == pytest.approx(min(max(want, -0.5), 0.5), abs=1e-12)
    assert drop.estimate < drop.futility_limit(0.001, "high")  # both sides bet: near each other
    assert abs(drop.futility_limit(0.001, "high") - drop.limit(0.001, "high")) < 0.01
    assert drop.futility_limit(0.001, "low") < drop.estimate
    assert abs(drop.futility_limit(0.001, "low") - drop.limit(0.001, "low")) < 0.01
