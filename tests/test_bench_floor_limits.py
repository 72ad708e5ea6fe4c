"""bench/bench_floor_limits.py at a few draws: the betting limit it measures (the product's
metrics.intervals.betting_limit, which the futility rule reads) is a lower limit that holds (seeded coverage),
widens as the level falls, and is narrower than the Hoeffding / Maurer-Pontil limit once a component has tens
of prompts; its table prints a row per (sd, prompts)."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="module")
def bench(load_bench):
    return load_bench("bench_floor_limits")


def test_the_betting_limit_covers_and_widens_as_the_level_falls(bench):
    from t2i_fairness.metrics.intervals import betting_limit

    assert bench.betting_limit is betting_limit  # the bench measures the product's limit, not a copy
    assert bench.coverage(0.5, 0.3, 35, 300, 0.05, seed=1) <= 0.05
    x = bench.draw(np.random.default_rng(2), 0.5, 0.3, 70)
    limits = [betting_limit(x, a, "low") for a in (0.1, 0.01, 0.001)]
    assert 0 < limits[-1] <= limits[1] <= limits[0] < x.mean()


def test_it_is_narrower_than_the_law_free_limit_at_tens_of_prompts(bench, capsys):
    w = bench.widths(0.5, 0.2, 70, 10, 0.00125, seed=0)
    assert w["betting"] < 0.7 * w["law_free"]
    assert bench.main(["--quick", "--prompts", "18", "--sd", "0.3", "--draws", "3"]) == 0
    out = capsys.readouterr().out
    assert "| 18 | 0.3 |" in out and "betting (futility's)" in out
