"""Tests of t2i_fairness.metrics.stats against formulas written out here and simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from t2i_fairness.metrics.stats import (
    hoeffding_half_width,
    hoeffding_half_width_combination,
    hoeffding_half_width_difference,
    percentile_bootstrap,
)

FAST = settings(max_examples=40, deadline=None)


# ----------------------------------------------------------------------------- Hoeffding


@FAST
@given(st.integers(1, 10**6), st.floats(1e-6, 0.5))
def test_single_mean_matches_textbook_formula(n, delta):
    assert hoeffding_half_width(n, delta) == pytest.approx(math.sqrt(math.log(2 / delta) / (2 * n)), rel=1e-12)


@FAST
@given(st.integers(1, 10**5), st.integers(1, 10**5), st.floats(1e-6, 0.5))
def test_difference_matches_formula_and_is_tighter_than_summed_bounds(n1, n2, delta):
    got = hoeffding_half_width_difference(n1, n2, delta)
    assert got == pytest.approx(math.sqrt(math.log(2 / delta) / 2 * (1 / n1 + 1 / n2)), rel=1e-12)
    looser = math.sqrt(math.log(2 / delta) / 2) * (1 / math.sqrt(n1) + 1 / math.sqrt(n2))
    assert got <= looser * (1 + 1e-12)
    assert got == pytest.approx(hoeffding_half_width_combination([1, -1], [n1, n2], delta), rel=1e-12)


@FAST
@given(st.integers(1, 10**5), st.integers(1, 10**5))
def test_half_width_shrinks_as_one_over_sqrt_n(n1, n2):
    assert hoeffding_half_width(4 * n1) / hoeffding_half_width(n1) == pytest.approx(0.5, rel=1e-12)
    ratio = hoeffding_half_width_difference(4 * n1, 4 * n2) / hoeffding_half_width_difference(n1, n2)
    assert ratio == pytest.approx(0.5, rel=1e-12)


def test_ratio_at_four_n_is_one_half():
    assert hoeffding_half_width(400) / hoeffding_half_width(100) == 0.5
    assert hoeffding_half_width_difference(400, 400) / hoeffding_half_width_difference(100, 100) == 0.5


@FAST
@given(st.lists(st.tuples(st.floats(-3, 3), st.integers(1, 500)), min_size=1, max_size=8))
def test_combination_is_sum_of_squared_ranges(terms):
    w = [t[0] for t in terms]
    n = [t[1] for t in terms]
    # Hoeffding: each of the n_s values of sample s contributes a term of range |w_s|/n_s.
    ranges_sq = sum(n_s * (abs(w_s) / n_s) ** 2 for w_s, n_s in zip(w, n))
    expected = math.sqrt(math.log(2 / 0.05) * ranges_sq / 2)
    assert hoeffding_half_width_combination(w, n) == pytest.approx(expected, rel=1e-9, abs=1e-15)


def test_difference_bound_covers_in_simulation():
    rng = np.random.default_rng(0)
    n1, n2, p1, p2, reps = 30, 50, 0.3, 0.6, 4000
    est = rng.binomial(n1, p1, reps) / n1 - rng.binomial(n2, p2, reps) / n2
    t = hoeffding_half_width_difference(n1, n2, 0.05)
    assert np.mean(np.abs(est - (p1 - p2)) >= t) <= 0.05


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: hoeffding_half_width(0), "`n` must be a positive integer"),
        (lambda: hoeffding_half_width(10, delta=1.0), r"`delta` must be in \(0, 1\)"),
        (lambda: hoeffding_half_width(10, delta=0.0), r"`delta` must be in \(0, 1\)"),
        (lambda: hoeffding_half_width_difference(10, -1), "`n2` must be a positive integer"),
        (lambda: hoeffding_half_width_combination([1, 2], [3]), "same length"),
        (lambda: hoeffding_half_width_combination([], []), "non-empty"),
        (lambda: hoeffding_half_width_combination([float("nan")], [3]), "finite"),
    ],
)
def test_hoeffding_errors_name_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_hoeffding_rejects_non_integer_counts():
    with pytest.raises(TypeError, match="`n`"):
        hoeffding_half_width(10.5)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- bootstrap


def _mean(a):
    return a.mean(axis=-1)


def test_bootstrap_is_seeded_and_matches_a_loop_reference():
    x = np.arange(10.0)
    y = np.array([0.0, 1.0, 1.0, 0.0, 1.0])
    got = percentile_bootstrap([x, y], lambda a, b: _mean(a) - _mean(b), n_resamples=300, seed=7)
    assert got == percentile_bootstrap([x, y], lambda a, b: _mean(a) - _mean(b), n_resamples=300, seed=7)
    # reference: same generator calls, statistic evaluated one resample at a time
    rng = np.random.default_rng(7)
    ix = rng.integers(0, x.size, size=(300, x.size))
    iy = rng.integers(0, y.size, size=(300, y.size))
    stats = [x[ix[b]].mean() - y[iy[b]].mean() for b in range(300)]
    assert got == pytest.approx(tuple(np.quantile(stats, [0.025, 0.975])))


def test_bootstrap_degenerate_sample_has_zero_width():
    assert percentile_bootstrap([np.full(12, 0.25)], _mean) == (0.25, 0.25)


def test_bootstrap_covers_a_bernoulli_mean_most_of_the_time():
    rng = np.random.default_rng(1)
    hits = 0
    for rep in range(60):
        x = rng.binomial(1, 0.3, 200)
        lo, hi = percentile_bootstrap([x], _mean, n_resamples=400, seed=rep)
        hits += lo <= 0.3 <= hi
    assert hits >= 50  # nominal 57 of 60


def test_bootstrap_width_shrinks_with_more_units():
    rng = np.random.default_rng(2)
    small = rng.binomial(1, 0.5, 50)
    large = rng.binomial(1, 0.5, 5000)
    w_small = np.subtract(*percentile_bootstrap([small], _mean)[::-1])
    w_large = np.subtract(*percentile_bootstrap([large], _mean)[::-1])
    assert w_large < w_small / 4


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(samples=[]), "at least one sample"),
        (dict(samples=[[]]), r"`samples\[0\]` must be a non-empty 1-D"),
        (dict(samples=[[1.0]], n_resamples=0), "`n_resamples`"),
        (dict(samples=[[1.0]], confidence=1.0), "`confidence`"),
        (dict(samples=np.ones(3)), "wrap a single 1-D sample"),
        (dict(samples=[[1.0, 2.0]], statistic=lambda a: a), "must reduce over the last axis"),
    ],
)
def test_bootstrap_errors(kwargs, match):
    kwargs.setdefault("statistic", _mean)
    with pytest.raises(ValueError, match=match):
        percentile_bootstrap(**kwargs)
