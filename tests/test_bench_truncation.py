"""bench/bench_truncation.py's smallest failing miss is where the product's unit_mean (bets capped at
NARROW_TRUNCATION) turns from passing to failing, and 0.9 needs a smaller miss than 1/2 on narrow units."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="module")
def bench(load_bench):
    return load_bench("bench_truncation")


def test_the_bench_s_smallest_failing_miss_is_where_the_product_turns(bench):
    from t2i_fairness.metrics.evidence import unit_mean
    from t2i_fairness.metrics.intervals import NARROW_TRUNCATION, TRUNCATION

    rng = np.random.default_rng(7)
    level = bench.LEVELS["paper"]
    eff = bench.SPREAD * rng.standard_normal((3, 60))
    miss = bench.smallest_failing_miss(eff, level, NARROW_TRUNCATION)
    for e, d in zip(eff, miss):
        def fails(x):
            return unit_mean(np.clip(bench.SCORE - x + e, -1, 1), (-1.0, 1.0), limits=False).fails(
                bench.SCORE, "min", level)
        assert fails(d + 1e-3) and not fails(d - 1e-3)
    assert np.all(miss < 0.75 * bench.smallest_failing_miss(eff, level, TRUNCATION))
