"""The CIS order test with power (issue #28, item 3): ``metrics.cis.order_position_test`` and the paper's
chi-square by component with the same permutations.

* validity by exact enumeration: every within-prompt labelling of tiny studies enumerated, the statistic
  recomputed from its definition with the exact permutation covariance (an independent reference), and
  the Monte Carlo p compared with the exact one;
* false alarms under H0 at 0.05 over 300 simulated studies whose prompts and components differ (rates
  drawn from a population) within the binomial band; power > 0.8 on a planted effect; the issue's
  first-position effect rejected where the old pooled-counts chi-square is not;
* p never 0, determinism by seed, errors that name the argument, uniform balanced masks.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest
from scipy.stats import binom, chisquare

from t2i_fairness.metrics import cis as cis_math
from t2i_fairness.metrics.cis import (
    order_arrays,
    order_component_permutation_test,
    order_invariance_permutation_test,
    order_invariance_test_by_component,
    order_position_power,
    order_position_test,
    order_resamples,
    simulate_order_study,
)


def population_rates(rng, prompts: int, k: int) -> np.ndarray:
    """Inclusion rates that differ by prompt and by component (logit-normal around 0.62)."""
    logit = 0.5 + rng.normal(0, 0.7, (prompts, 1)) + rng.normal(0, 1.0, (prompts, k))
    return 1 / (1 + np.exp(-logit))


# -- an independent reference: the statistic from its definition, the covariance by enumeration ----------


def _definition_z(pooled: np.ndarray, order: np.ndarray, shuffled_sets) -> np.ndarray:
    """Z_q = sum_i D_{i, order[i, q]} - D_{i, q}, D = (shuffled-labelled mean - original-labelled mean) of
    each original component's detection."""
    m, two_n, k = pooled.shape
    z = np.zeros(k)
    for i, s in enumerate(shuffled_sets):
        rest = [j for j in range(two_n) if j not in s]
        d = pooled[i, list(s)].mean(axis=0) - pooled[i, rest].mean(axis=0)
        z += d[order[i]] - d
    return z


def exact_position_p(original, shuffled, order) -> tuple[float, float, int]:
    """``(exact p, observed T, labelings)`` over every within-prompt labelling."""
    m, n, k = original.shape
    pooled = np.concatenate([original, shuffled], axis=1).astype(float)
    subsets = list(itertools.combinations(range(2 * n), n))
    labelings = list(itertools.product(subsets, repeat=m))
    zs = np.array([_definition_z(pooled, order, lab) for lab in labelings])
    assert np.allclose(zs.mean(axis=0), 0)  # E*[Z] = 0 over the permutations
    cov = zs.T @ zs / len(zs)
    inv = np.linalg.pinv(cov, rcond=1e-10)
    t = np.einsum("bk,kl,bl->b", zs, inv, zs)
    observed = float(_definition_z(pooled, order, [tuple(range(n, 2 * n))] * m) @ inv
                     @ _definition_z(pooled, order, [tuple(range(n, 2 * n))] * m))
    return float(np.mean(t >= observed - 1e-9 * max(1, observed))), observed, len(labelings)


@pytest.mark.parametrize("m, n, k, seed", [(3, 2, 3, 0), (2, 3, 4, 1), (3, 2, 4, 2), (2, 2, 3, 3)])
def test_monte_carlo_p_matches_the_exact_permutation_p(m, n, k, seed):
    rng = np.random.default_rng(seed)
    rates = population_rates(rng, m, k)
    for effect in (0.0, 0.6):
        original, shuffled, order = simulate_order_study(rates, n, rng, effect)
        order[0] = np.roll(np.arange(k), 1)  # at least one prompt whose shuffle moved every component
        exact, observed, labelings = exact_position_p(original, shuffled, order)
        r = order_position_test(original, shuffled, order, n_resamples=20_000, seed=seed)
        if r.dof == 0:
            continue
        assert r.statistic == pytest.approx(observed, rel=1e-6, abs=1e-9)
        assert abs(r.pvalue - exact) < 4 * math.sqrt(exact * (1 - exact) / 20_000) + 2e-4, (r.pvalue, exact)
        assert exact >= r.min_exact_pvalue - 1e-12 and r.min_exact_pvalue >= 2 / labelings - 1e-12


def test_false_alarms_at_0_05_under_no_order_effect_are_within_the_binomial_band():
    rng = np.random.default_rng(11)
    runs, rejected = 300, 0
    for i in range(runs):
        original, shuffled, order = simulate_order_study(population_rates(rng, 20, 4), 4, rng)
        rejected += order_position_test(original, shuffled, order, n_resamples=199, seed=i).pvalue <= 0.05
    low, high = binom.ppf(0.001, runs, 0.05), binom.ppf(0.999, runs, 0.05)
    assert low <= rejected <= high, (rejected, low, high)


def test_power_above_0_8_on_a_moderate_position_effect():
    rng = np.random.default_rng(5)
    runs, rejected = 40, 0
    for i in range(runs):  # the first-named component drawn 0.3 more often than the last-named
        original, shuffled, order = simulate_order_study(population_rates(rng, 30, 4), 4, rng, 0.3)
        rejected += order_position_test(original, shuffled, order, n_resamples=199, seed=i).pvalue <= 0.05
    assert rejected / runs > 0.8, rejected


def test_the_issue_s_first_position_effect_is_seen_where_the_pooled_counts_chi_square_is_blind():
    """Inclusion 1.0 / 0.7 / 0.5 / 0.4 by position, 100 prompts x 16 images (issue #28): the pooled counts
    of components detected per image have the same expectation in both groups, whatever the effect."""
    rng = np.random.default_rng(2)
    by_position = np.array([1.0, 0.7, 0.5, 0.4])
    new = old = 0
    for i in range(20):
        original, shuffled, order = simulate_order_study(np.zeros((100, 4)), 16, rng, by_position)
        new += order_position_test(original, shuffled, order, n_resamples=199, seed=i).pvalue <= 0.05
        old += order_invariance_permutation_test(original.sum(axis=2), shuffled.sum(axis=2), 4,
                                                 n_resamples=199, seed=i).pvalue <= 0.05
    assert new == 20 and old <= 5, (new, old)


def test_p_is_never_zero_and_is_seeded():
    rng = np.random.default_rng(0)
    order = np.array([rng.permutation(4) for _ in range(12)])
    original = np.ones((12, 6, 4), int)
    original[..., -1] = 0  # the last-named never drawn, wherever it is
    shuffled = (np.argsort(order, axis=1) != 3)[:, None, :].repeat(6, axis=1).astype(int)
    r = order_position_test(original, shuffled, order, n_resamples=499)
    assert r.pvalue == r.resolution == pytest.approx(1 / 500) and r.exceed == 0 and r.asymptotic_pvalue < 1e-6
    a, b, o = simulate_order_study(population_rates(rng, 15, 4), 4, rng)
    first, again = (order_position_test(a, b, o, n_resamples=999, seed=3) for _ in range(2))
    assert (first.pvalue, first.exceed, first.statistic) == (again.pvalue, again.exceed, again.statistic)
    p = {order_position_test(a, b, o, n_resamples=999, seed=s).pvalue for s in range(4)}
    assert len(p) > 1 and all(0 < x <= 1 for x in p)  # another seed moves only the Monte Carlo error


def test_uninformative_studies_give_no_statistic():
    order = np.tile(np.arange(3), (4, 1))  # every shuffle left the order as it was
    r = order_position_test(np.ones((4, 2, 3), int), np.zeros((4, 2, 3), int), order, n_resamples=99)
    assert (r.dof, r.statistic, r.pvalue, r.informative) == (0, 0.0, 1.0, 0)


def test_statistic_alone_without_resamples():
    rng = np.random.default_rng(1)
    a, b, o = simulate_order_study(population_rates(rng, 10, 3), 3, rng)
    r = order_position_test(a, b, o, n_resamples=0)
    assert math.isnan(r.pvalue) and r.resamples == 0
    assert r.statistic == order_position_test(a, b, o, n_resamples=9).statistic


@pytest.mark.parametrize("args, message", [
    ((np.zeros((2, 2, 3)), np.zeros((2, 3, 3)), np.zeros((2, 3), int)), "one shape"),
    ((np.full((2, 2, 3), 2), np.zeros((2, 2, 3)), np.tile(np.arange(3), (2, 1))), "0/1"),
    ((np.zeros((2, 2, 3)), np.zeros((2, 2, 3)), np.zeros((2, 3), int)), "permutations of 0..2"),
])
def test_errors_name_the_argument(args, message):
    with pytest.raises(ValueError, match=message):
        order_position_test(*args)
    with pytest.raises(ValueError, match="n_resamples"):
        order_position_test(np.zeros((1, 1, 2)), np.zeros((1, 1, 2)), np.array([[1, 0]]), n_resamples=-1)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 20, 33])
def test_balanced_masks_are_uniform_over_the_n_subsets(n):
    rows = cis_math._balanced_masks(np.random.default_rng(n), 6000, n)
    assert rows.shape == (6000, 2 * n) and (rows.sum(axis=1) == n).all()
    assert abs(rows.mean() - 0.5) < 0.01 and np.abs(rows.mean(axis=0) - 0.5).max() < 0.05
    if math.comb(2 * n, n) <= 20:  # every subset equally often
        seen = Counter(map(bytes, rows))
        assert len(seen) == math.comb(2 * n, n)
        assert chisquare(list(seen.values())).pvalue > 1e-3


def test_order_resamples_keep_the_resolution_below_a_third_of_the_level():
    for level in (0.05, 0.05 / 6, 0.05 / 475, 0.05 / 1435, 1e-6):
        b = order_resamples(level)
        assert 1 / (b + 1) <= level / 3 * (1 + 1e-9) and (b + 1) % 10_000 == 0


def test_order_arrays_index_components_by_their_original_position():
    a = order_arrays([("crab", "sock", "vase")], [("vase", "crab", "sock")],
                     [[("crab", "vase"), ()]], [[("sock",), ("crab", "sock", "vase")]])
    assert a.original[0].tolist() == [[1, 0, 1], [0, 0, 0]] and a.shuffled[0].tolist() == [[0, 1, 0], [1, 1, 1]]
    assert a.order.tolist() == [[2, 0, 1]] and a.names == ("crab", "sock", "vase")
    with pytest.raises(ValueError, match="not a reordering"):
        order_arrays([("crab", "sock")], [("crab", "vase")], [[()]], [[()]])
    with pytest.raises(ValueError, match="does not name"):
        order_arrays([("crab", "sock")], [("sock", "crab")], [[("vase",)]], [[()]])


def test_paper_variant_is_the_paper_s_chi_square_with_a_valid_permutation_p():
    rng = np.random.default_rng(4)
    ids = np.array([rng.choice(25, 3, replace=False) for _ in range(30)])
    names = [f"c{i}" for i in range(25)]
    a, b, _ = simulate_order_study(population_rates(rng, 30, 3), 4, rng)
    r = order_component_permutation_test(a, b, ids, n_resamples=999, seed=1)
    by = order_invariance_test_by_component(
        [tuple(names[c] for c, hit in zip(ids[i], img) if hit) for i in range(30) for img in a[i]],
        [tuple(names[c] for c, hit in zip(ids[i], img) if hit) for i in range(30) for img in b[i]])
    assert r.statistic == pytest.approx(by.statistic) and r.dof == by.dof
    rejected = 0
    for i in range(200):  # valid under no order effect
        a, b, _ = simulate_order_study(population_rates(rng, 30, 3), 4, rng)
        rejected += order_component_permutation_test(a, b, ids, n_resamples=99, seed=i).pvalue <= 0.05
    assert rejected <= binom.ppf(0.999, 200, 0.05), rejected


def test_power_function_says_when_a_design_cannot_reject():
    smoke = order_position_power(np.full((4, 8), 0.6), 2, level=0.05 / 475, runs=10)
    assert not smoke.reachable and smoke.power == 0.0 and smoke.floor == pytest.approx(2 / 6**4)
    big = order_position_power(np.full((300, 8), 0.6), 8, level=0.05 / 475, runs=20)
    none = order_position_power(np.full((300, 8), 0.6), 8, level=0.05 / 475, effect=0.0, runs=20)
    assert big.reachable and big.power == 1.0 and none.power <= 0.05
