"""bench/bench_betting.py decides each run as the product does (cluster_mean_interval's p-value: Korn-Graubard's
and the betting part, the larger), its "cannot fail" shortcut is sound, and its samplers and rows run."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="module")
def bench(load_bench):
    return load_bench("bench_betting")


@pytest.mark.parametrize("k", [1, 8])
def test_the_bench_s_verdicts_are_the_products(bench, k):
    from t2i_fairness.metrics.intervals import cluster_mean_interval

    rng = np.random.default_rng(k)
    seen = set()
    for _ in range(40):
        g = int(rng.integers(30, 120))
        q = rng.beta(0.6, 1.2, g)
        images = rng.binomial(k, np.repeat(q[:, None], bench.IMAGES, 1))  # prompts x images, each count of k
        bound, level = float(q.mean() + rng.uniform(-0.05, 0.2)), float(rng.choice([0.05, 1e-3]))
        iv = cluster_mean_interval((images / k).ravel(), np.repeat(np.arange(g), bench.IMAGES))
        product = iv.estimate < bound and iv.p_value(bound, "min") <= level
        assert bool(bench.gate_fails(images.sum(axis=1)[None], k, bound, level)["both"][0]) == product
        seen.add(product)
    assert seen == {True, False}


def test_where_the_bench_says_no_outcome_fails_none_does(bench):
    from t2i_fairness.metrics.intervals import betting_p_value

    said = []
    for g, bound, level in [(16, 0.5, 1e-4), (60, 0.192, 3.49e-5), (40, 0.3, 1e-3), (200, 0.3, 1e-3)]:
        extreme = np.zeros((1, g))  # every prompt at 0: the most a min bound's bets can win
        p = float(betting_p_value(extreme, bound, "min")[0])
        said.append(bench.never_rejects(g, bound, level))
        if said[-1]:
            assert p > level
    assert said == [True, True, False, False]


def test_a_size_row_and_a_power_row_run(bench):
    rng = np.random.default_rng(0)
    pmf = bench.count_pmf("bimodal", 1, draws=20_000)
    row = bench.size_row("bimodal", pmf, 1, 200, 1e-2, 400, rng)
    assert row["both"][0] <= row["kg"][0] and row["both"][2] > 0
    power = bench.power_row(pmf, 1, 1000, 3.49e-5, 0.10, 50, rng)
    assert power["both"] == 1.0
