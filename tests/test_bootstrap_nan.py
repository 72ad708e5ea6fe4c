"""Issue 15, finding 10: a bootstrap over a sample or statistic with NaN is an error naming it.

Before, ``numpy.quantile`` propagated the NaN and the gate reported the interval ``(nan, nan)``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from t2i_fairness.metrics.stats import index_bootstrap, percentile_bootstrap


def mean(a):
    return a.mean(axis=-1)


def test_percentile_bootstrap_rejects_a_sample_with_nan_and_names_the_gate():
    with pytest.raises(ValueError, match=r"^test_cis\[k2\]: `samples\[1\]` holds NaN at positions \[0, 2\] \(2 of 3 values\)"):
        percentile_bootstrap([[0.5, 1.0], [math.nan, 0.0, math.nan]], lambda a, b: mean(a) - mean(b), name="test_cis[k2]")


def test_percentile_bootstrap_rejects_nan_without_a_name():
    with pytest.raises(ValueError, match=r"^`samples\[0\]` holds NaN at positions \[1\]"):
        percentile_bootstrap([[0.0, math.nan, 1.0]], mean)


def test_percentile_bootstrap_rejects_a_statistic_that_is_nan_on_some_resample():
    # sample [0, 1]: a resample is [0, 0], [0, 1], [1, 0] or [1, 1]; 0/0 on [0, 0] is NaN
    def ratio(a):
        with np.errstate(invalid="ignore", divide="ignore"):
            return a.sum(axis=-1) / a.sum(axis=-1)

    with pytest.raises(ValueError, match=r"^gate-x: `statistic` returned NaN on \d+ of 200 bootstrap resamples"):
        percentile_bootstrap([[0.0, 1.0]], ratio, n_resamples=200, seed=0, name="gate-x")


def fixed(values):
    """A statistic that ignores the resample and returns ``values`` (one per resample)."""
    return lambda a: np.asarray(values, dtype=float)


def test_an_always_infinite_statistic_gives_an_infinite_interval_not_nan():
    # a best/worst ratio whose worst value is 0 on every resample is infinite, not undefined;
    # numpy's linear quantile alone gives inf - inf = NaN here
    assert percentile_bootstrap([[1.0, 1.0]], fixed([math.inf] * 4), n_resamples=4) == (math.inf, math.inf)
    assert index_bootstrap(lambda idx: math.inf, 2, n_resamples=4) == (math.inf, math.inf)


def test_partly_infinite_statistic_interpolates_as_numpy():
    # values 1, 2, 3, inf; confidence 0.5 -> quantiles 0.25 and 0.75 at positions 0.75 and 2.25:
    # low = 1 + 0.75 * (2 - 1) = 1.75, high = 3 + 0.25 * (inf - 3) = inf
    assert percentile_bootstrap([[0.0]], fixed([1, 2, 3, math.inf]), n_resamples=4, confidence=0.5) == (1.75, math.inf)


def test_quantile_between_minus_and_plus_infinity_is_an_error():
    with pytest.raises(ValueError, match=r"^g: the 0\.25 quantile of the resampled statistic lies between -inf and inf"):
        percentile_bootstrap([[0.0]], fixed([-math.inf, math.inf, math.inf, math.inf]), n_resamples=4, confidence=0.5, name="g")


def test_index_bootstrap_rejects_a_nan_statistic_and_names_the_gate():
    values = np.array([0.2, np.nan, 0.4])
    with pytest.raises(ValueError, match=r"^test_region_coverage\[geode-object-africa\]: `statistic` returned NaN on \d+ of 50"):
        index_bootstrap(lambda idx: values[idx].mean(), 3, n_resamples=50, name="test_region_coverage[geode-object-africa]")


def test_index_bootstrap_counts_the_nan_resamples():
    # statistic NaN exactly when unit 0 is drawn twice; with 2 units and a seeded rng, count them by hand
    def stat(idx):
        return math.nan if (idx == 0).all() else 1.0

    rng = np.random.default_rng(7)
    draws = [rng.integers(0, 2, 2) for _ in range(40)]
    expected_nan = sum(bool((d == 0).all()) for d in draws)
    assert expected_nan > 0
    with pytest.raises(ValueError, match=rf"returned NaN on {expected_nan} of 40 bootstrap resamples"):
        index_bootstrap(stat, 2, n_resamples=40, seed=7)


def test_finite_inputs_give_the_same_interval_as_before():
    x = np.r_[np.zeros(50), np.ones(50)]
    lo, hi = percentile_bootstrap([x], mean, seed=1, name="anything")
    assert (lo, hi) == percentile_bootstrap([x], mean, seed=1)
    assert 0.3 < lo < 0.5 < hi < 0.7
