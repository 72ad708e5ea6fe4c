"""Confidence intervals on gates: --t2i-gate point|significant and the seeded index bootstrap."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import given, settings, strategies as st

from t2i_fairness.gating.verdicts import Bound, Measurement, ThresholdFile, evaluate
from t2i_fairness.metrics.decisions import GateLevel
from t2i_fairness.metrics.manifold import ball_membership as membership, precision_coverage, real_radii
from t2i_fairness.metrics.stats import index_bootstrap


def _thresholds(direction, value):
    return ThresholdFile(Path("t.yaml"), {"g": Bound(direction, value)})


def test_three_verdicts_pass_inconclusive_fail_and_point_mode_has_two():
    t = _thresholds("min", 0.5)
    straddles = Measurement("g", 0.45, n=30, interval=(0.40, 0.55))  # misses, but not significantly
    below = Measurement("g", 0.45, n=30, interval=(0.40, 0.49))  # the interval misses too: p < 0.025
    meets = Measurement("g", 0.55, n=30, interval=(0.40, 0.70))
    assert evaluate(straddles, t, {}).status == "inconclusive"
    assert evaluate(straddles, t, {}, mode="point").status == "fail"  # no statistics: the estimate alone
    assert evaluate(below, t, {}).status == "fail"
    assert evaluate(meets, t, {}).status == "pass"
    tmax = _thresholds("max", 2.0)
    assert evaluate(Measurement("g", 2.2, n=6, direction="max", interval=(1.8, 2.6)), tmax, {}).status == "inconclusive"
    assert evaluate(Measurement("g", 2.2, n=6, direction="max", interval=(2.1, 2.3)), tmax, {}).status == "fail"


def test_inconclusive_passes_with_a_warning_unless_asked_to_fail():
    t = _thresholds("min", 0.5)
    straddles = Measurement("g", 0.45, n=30, interval=(0.40, 0.55))
    warned = evaluate(straddles, t, {})
    assert (warned.status, warned.failed) == ("inconclusive", False) and "INCONCLUSIVE" in warned.message
    blocked = evaluate(straddles, t, {}, inconclusive="fail")
    assert (blocked.status, blocked.failed) == ("inconclusive", True)


def test_the_run_time_level_is_alpha_over_the_number_of_gates():
    # se 0.02: z = (0.45 - 0.5) / 0.02 = -2.5, p = 0.0062: significant alone, not among 10 gates (0.005)
    t = _thresholds("min", 0.5)
    m = Measurement("g", 0.45, n=100, interval=(0.45 - 1.959964 * 0.02, 0.45 + 1.959964 * 0.02))
    assert evaluate(m, t, {}, level=GateLevel(0.05, 1)).status == "fail"
    assert evaluate(m, t, {}, level=GateLevel(0.05, 10)).status == "inconclusive"
    assert evaluate(m, t, {}, level=GateLevel(0.05, 10, "none")).status == "fail"
    v = evaluate(m, t, {}, level=GateLevel(0.05, 10))
    assert abs(v.p_value - 0.00621) < 1e-4 and v.threshold == 0.005


def test_failure_message_shows_estimate_interval_bound_and_n():
    v = evaluate(Measurement("g", 0.45, n=30, interval=(0.40, 0.49)), _thresholds("min", 0.5), {})
    assert "0.4500 [0.4000, 0.4900] (n=30)" in v.message and "min 0.5" in v.message


def test_index_bootstrap_is_seeded_and_stratified():
    x = np.r_[np.zeros(40), np.ones(10)]
    a = index_bootstrap(lambda i: x[i].mean(), 50, seed=3)
    assert a == index_bootstrap(lambda i: x[i].mean(), 50, seed=3)
    # within strata each group keeps its size: the mean of a two-valued stratified sample cannot move
    strata = ["zero"] * 40 + ["one"] * 10
    assert index_bootstrap(lambda i: x[i].mean(), 50, strata=strata, seed=3) == (0.2, 0.2)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.integers(6, 30), st.integers(1, 25))
def test_membership_reproduces_precision_and_coverage(seed, n_real, n_fake):
    rng = np.random.default_rng(seed)
    real, fake = rng.normal(size=(n_real, 4)), rng.normal(size=(n_fake, 4))
    radii = real_radii(real, 3)
    m = membership(real, radii, fake)
    expected = precision_coverage(real, fake, 3)
    assert m.any(axis=1).mean() == expected["precision"]
    assert m.any(axis=0).mean() == expected["coverage"]
