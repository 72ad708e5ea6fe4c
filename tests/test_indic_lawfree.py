"""IndicTTI's tests over prompts free of the prompts' law (``metrics.evidence.units``): exact validity by
enumeration, the decision and p-value agree, the ratio is its contrast's test, the words a blind gate prints, and
the sizes of ``bench/bench_indic_lawfree.py`` on skewed prompt laws (docs/calibration.md)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from t2i_fairness.gating.power import power_record, power_words
from t2i_fairness.metrics.evidence import law_free_reach, unit_mean, unit_ratio
from t2i_fairness.metrics.intervals import normal_tail


def _exact_size(values, probs, g, alpha, rule):
    """P(rule fails) over every sequence of ``g`` draws from a discrete law, enumerated."""
    total = 0.0
    for seq in itertools.product(range(len(values)), repeat=g):
        x = np.asarray(values)[list(seq)]
        if rule(x):
            total += float(np.prod(np.asarray(probs)[list(seq)]))
    return total


@pytest.mark.parametrize("p", [0.2, 0.4])
def test_law_free_mean_holds_its_level_exactly_where_the_t_does_not(p):
    """Two-point prompt law on [-1, 1] (most prompts at -0.9, a share ``p`` at the top edge), the bound on its mean,
    11 prompts at 0.05, every sequence enumerated: the betting test's size is at most 0.05 (and not 0 at p = 0.4:
    it fails the studies with no prompt at the edge); the t test fails those whenever they are likely."""
    g, alpha = 11, 0.05
    values, probs = [-0.9, 1.0], [1.0 - p, p]
    bound = float(np.dot(values, probs))
    size = _exact_size(values, probs, g, alpha,
                       lambda x: unit_mean(x, (-1, 1), limits=False).fails(bound, "min", alpha))
    assert size <= alpha
    assert size > 0 or p < 0.4  # the check can bite: at p = 0.4 the test does fail some studies

    def t_fails(x):
        p_t = normal_tail(x.mean(), x.std(ddof=1) / math.sqrt(g), bound, "min", g - 1)
        return x.mean() < bound and p_t <= alpha

    assert _exact_size(values, probs, g, alpha, t_fails) >= (1.0 - p) ** g


def test_fails_is_the_p_value_at_the_level():
    rng = np.random.default_rng(3)
    for _ in range(40):
        g = int(rng.integers(2, 80))
        x = np.clip(rng.normal(rng.uniform(-0.5, 0.8), rng.uniform(0.01, 0.3), g), -1, 1)
        m = unit_mean(x, (-1, 1), limits=False)
        bound, alpha = float(x.mean() + rng.uniform(-0.6, 0.6)), float(rng.choice([0.05, 1e-3, 1e-4]))
        for direction in ("min", "max"):
            p = m.p_value(bound, direction)
            if abs(math.log(p / alpha)) > 1e-6:  # away from the bisection's edge
                assert m.fails(bound, direction, alpha) == (p <= alpha)


def test_ratio_is_its_contrasts_test_and_its_limit_is_where_the_test_turns():
    rng = np.random.default_rng(4)
    den = np.clip(0.6 + 0.03 * rng.standard_normal(300), -1, 1)
    num = np.clip(0.5 * den + 0.01 * rng.standard_normal(300), -1, 1)
    u = unit_ratio(num, den, (-1, 1), (-1, 1))
    for r in (0.5, 0.6, 0.7, 0.9):
        c = unit_mean(num - r * den, (-1 - r, 1 + r), limits=False)
        assert u.fails(r, "min", 1e-3) == c.fails(0.0, "min", 1e-3)
        assert u.p_value(r, "min") == pytest.approx(c.p_value(0.0, "min"), rel=1e-9)
    high = u.limit(1e-3, "high")
    assert u.estimate < high < math.inf
    assert not u.fails(high - 1e-6, "min", 1e-3) and u.fails(high + 1e-3, "min", 1e-3)
    assert u.low <= u.estimate <= u.high


def test_the_reach_bounds_every_law_free_test():
    """No sample at the bound minus less than the reach fails (values all equal: the tightest possible)."""
    for g, alpha in ((16, 3.49e-5), (60, 1.03e-4), (200, 3.49e-5)):
        reach = law_free_reach(0.7, g, alpha)
        assert not unit_mean(np.full(g, 0.3 - 0.98 * reach), (-1, 1)).fails(0.3, "min", alpha)


def test_blind_gate_says_it_needs_prompts():
    m = unit_mean(0.3 + 0.05 * np.random.default_rng(0).standard_normal(27), (-1, 1))
    record = power_record(m, 0.35, "min", 3.49e-5, "score", 27 * 4)
    assert record["underpowered"] and record["reach"] > 0.05 and record["units"] == 27
    words = power_words(record, "pass")
    assert "valid for any law of its 27 prompts" in words and "needs more prompts" in words


def test_bad_units_are_named():
    with pytest.raises(ValueError, match="unit 2 is 1.5"):
        unit_mean([0.1, 0.2, 1.5], (-1, 1))
    with pytest.raises(ValueError, match="pair the same units"):
        unit_ratio([0.1, 0.2], [0.5, 0.5, 0.5], (-1, 1), (-1, 1))
    with pytest.raises(ValueError, match="lo < hi"):
        unit_mean([0.1], (1, -1))


# -- the bench's sizes on skewed prompt laws -------------------------------------------------------------------

@pytest.fixture(scope="module")
def bench(load_bench):
    return load_bench("bench_indic_lawfree")


@pytest.mark.parametrize("kind", ["score", "ratio"])
@pytest.mark.parametrize("law", ["gamma", "far10", "lognormal", "outliers"])
def test_law_free_size_on_skewed_prompts(bench, kind, law):
    """27 prompts, 80,000 studies: the product's law-free test holds 1.2 x the paper level (Clopper-Pearson upper
    bound), where the t / Fieller rule it replaced measurably exceeds the smoke level (its lower bound above it)."""
    out = bench.sizes(kind, law, 27, 80_000, np.random.default_rng(5))
    for name, level in bench.LEVELS.items():
        assert out[(name, "betting")].upper <= 1.2 * level
    t = out[("smoke", "t")]
    assert t.hits / t.runs > 2 * bench.LEVELS["smoke"]
