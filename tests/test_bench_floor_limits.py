"""bench/bench_floor_limits.py at a few draws: its betting limit (written apart from the product's
metrics.intervals.betting_limit, which the futility rule reads) is a lower limit that holds (seeded coverage),
is monotone in the mean it tests, agrees with the product's, and is narrower than the Hoeffding / Maurer-Pontil
limit once a component has tens of prompts; its table prints a row per (sd, prompts)."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="module")
def bench(load_bench):
    return load_bench("bench_floor_limits")


def test_the_betting_limit_covers_and_its_test_is_monotone(bench):
    assert bench.coverage(0.5, 0.3, 35, 300, 0.05, seed=1) <= 0.05
    x = bench.draw(np.random.default_rng(2), 0.5, 0.3, 70)
    rejected = [bench.betting_rejects(x, m, 0.01) for m in np.linspace(0.01, float(x.mean()), 30)]
    assert rejected[0] and not rejected[-1] and rejected == sorted(rejected, reverse=True)
    lim = bench.betting_limit(x, 0.01)
    assert 0 < lim < x.mean() and bench.betting_rejects(x, lim - 1e-3, 0.01) and not bench.betting_rejects(x, lim, 0.01)


def test_it_is_narrower_than_the_law_free_limit_at_tens_of_prompts(bench, capsys):
    w = bench.widths(0.5, 0.2, 70, 10, 0.00125, seed=0)
    assert w["betting"] < 0.7 * w["law_free"]
    assert bench.main(["--quick", "--prompts", "18", "--sd", "0.3", "--draws", "3"]) == 0
    out = capsys.readouterr().out
    assert "| 18 | 0.3 |" in out and "betting (futility's)" in out


def test_the_bench_s_loop_and_the_product_s_betting_limit_agree(bench):
    from t2i_fairness.metrics.intervals import betting_limit

    rng = np.random.default_rng(11)
    for n in (5, 35, 140, 1000):
        for alpha in (0.05, 0.00125):
            x = bench.draw(rng, float(rng.uniform(0.2, 0.8)), 0.3, n)
            assert bench.betting_limit(x, alpha) == pytest.approx(betting_limit(x, alpha, "low"), abs=1e-9)
