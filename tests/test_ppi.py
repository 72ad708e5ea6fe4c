"""Prediction-powered inference (metrics/ppi.py) against ppi_python, by hand, and by simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from t2i_fairness.metrics.intervals.lawfree import betting_limit
from t2i_fairness.metrics.ppi import (labels_for_width, power_tuning, ppi_estimate, ppi_limit, prediction_powered)


def _data(rng, n, big_n, p=0.7, accuracy=0.85):
    y = (rng.random(n) < p).astype(float)
    f = np.where(rng.random(n) < accuracy, y, 1 - y)
    fu = (rng.random(big_n) < p * accuracy + (1 - p) * (1 - accuracy)).astype(float)
    return y, f, fu


@pytest.mark.parametrize("lam", [None, 0.0, 0.5, 1.0])
def test_the_normal_form_is_ppi_pythons_interval(lam):
    ppi_py = pytest.importorskip("ppi_py")
    rng = np.random.default_rng(3)
    for _ in range(5):
        y, f, fu = _data(rng, int(rng.integers(20, 400)), int(rng.integers(400, 5000)))
        low, high = ppi_py.ppi_mean_ci(y, f, fu, alpha=0.1, lam=lam)
        assert ppi_limit(y, f, fu, 0.05, "low", lam=lam, form="normal") == pytest.approx(float(np.ravel(low)[0]), abs=1e-12)
        assert ppi_limit(y, f, fu, 0.05, "high", lam=lam, form="normal") == pytest.approx(float(np.ravel(high)[0]), abs=1e-12)


def test_power_tuning_is_ppi_pythons_and_the_formula_by_hand():
    ppi_py = pytest.importorskip("ppi_py")
    from ppi_py.ppi import _calc_lam_glm

    rng = np.random.default_rng(5)
    y, f, fu = _data(rng, 150, 2000)
    theta = fu.mean() + (y - f).mean()
    expected = _calc_lam_glm(y - theta, f - theta, fu - theta, np.eye(1), clip=True)
    assert power_tuning(y, f, fu) == pytest.approx(float(expected), abs=1e-12)
    # by hand: Cov(Y, f) / ((1 + n / N) Var(f)), Var over every judgement
    by_hand = np.mean((y - y.mean()) * (f - f.mean())) / ((1 + 150 / 2000) * np.var(np.r_[f, fu], ddof=1))
    assert power_tuning(y, f, fu) == pytest.approx(min(1.0, max(0.0, by_hand)))
    # the unlabelled values as prompt means: each variance on its own units
    means = fu.reshape(500, 4).mean(axis=1)
    by_hand = np.mean((y - y.mean()) * (f - f.mean())) / (np.var(f, ddof=1) + 150 / 500 * np.var(means, ddof=1))
    assert power_tuning(y, f, means, means=True) == pytest.approx(min(1.0, max(0.0, by_hand)))
    # ppi_python's point estimate
    assert ppi_estimate(y, f, fu)[0] == pytest.approx(float(np.ravel(ppi_py.ppi_mean_pointestimate(y, f, fu))[0]))


def test_lambda_zero_is_the_labels_alone_and_lambda_one_classic_ppi_by_hand():
    rng = np.random.default_rng(7)
    y, f, fu = _data(rng, 200, 3000)
    z = stats.norm.ppf(0.99)
    assert ppi_limit(y, f, fu, 0.01, "low", lam=0.0, form="normal") == pytest.approx(
        y.mean() - z * y.std() / math.sqrt(200))
    from t2i_fairness.metrics.ppi import ORDER_SEED  # the betting form reads the labels in a seeded order

    ordered = y[np.random.default_rng(ORDER_SEED).permutation(200)]
    assert ppi_limit(y, f, fu, 0.01, "low", lam=0.0) == pytest.approx(betting_limit(ordered, 0.01, "low"))
    se = math.sqrt(fu.var() / 3000 + (y - f).var() / 200)
    assert ppi_limit(y, f, fu, 0.01, "high", lam=1.0, form="normal") == pytest.approx(
        fu.mean() + (y - f).mean() + z * se)


def test_the_betting_form_covers_at_a_small_level_where_the_normal_form_falls_short():
    """Simulation at alpha = 1e-2, 40 labels, a scorer that misses 5% of the true yes and no true no: with no miss
    among the labels (0.95^32 of the time) the normal rectifier has no variance and its upper limit sits below the
    truth; the betting form's misses stay within the level."""
    rng = np.random.default_rng(11)
    alpha, sims, truth = 1e-2, 400, 0.8
    misses = {"normal": 0, "betting": 0, "exact": 0}
    for _ in range(sims):
        y = (rng.random(40) < truth).astype(float)
        f = (y * (rng.random(40) < 0.95)).astype(float)
        fu = ((rng.random(3000) < truth) & (rng.random(3000) < 0.95)).astype(float)
        for form in misses:
            misses[form] += ppi_limit(y, f, fu, alpha, "high", lam=None if form == "exact" else 1.0, form=form) < truth
    assert max(misses["betting"], misses["exact"]) <= stats.binom.ppf(0.999, sims, alpha)
    assert misses["normal"] > 10 * alpha * sims  # about 0.19 of the runs


def test_labels_for_width_gives_a_labels_only_interval_at_most_that_wide():
    for width, conf in ((0.1, 0.95), (0.2, 0.9), (0.05, 0.99)):
        n = labels_for_width(width, conf)
        z = stats.norm.ppf(0.5 + conf / 2)
        assert 2 * z * 0.5 / math.sqrt(n) <= width < 2 * z * 0.5 / math.sqrt(n - 1)
    with pytest.raises(ValueError, match="width"):
        labels_for_width(0.0)


def test_the_evidence_p_value_inverts_its_limit_and_bad_input_is_refused():
    rng = np.random.default_rng(13)
    y, f, fu = _data(rng, 120, 2000)
    ev = prediction_powered(y, f, fu, confidence=0.9)
    low = ev.limit(0.01, "low")
    assert ev.p_value(low, "max") == pytest.approx(0.01, rel=1e-3)
    assert ev.low == pytest.approx(ev.limit(0.05, "low")) and ev.low < ev.estimate < ev.high
    assert ev.record()["labels"] == 120 and ev.record()["judgements"] == 2120
    with pytest.raises(ValueError, match="of one length"):
        ppi_limit(y, f[:-1], fu, 0.05, "low")
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        ppi_limit(y * 2, f, fu, 0.05, "low")
    with pytest.raises(ValueError, match="form"):
        ppi_limit(y, f, fu, 0.05, "low", form="wald")


def test_the_exact_form_is_the_tighter_of_the_labels_alone_and_classic_ppi_with_exact_error_rates():
    from t2i_fairness.metrics.intervals.tails import share_limit
    from t2i_fairness.metrics.ppi import ORDER_SEED

    rng = np.random.default_rng(17)
    y, f, fu = _data(rng, 150, 3000, accuracy=0.95)
    alpha = 1e-4
    ordered = fu[np.random.default_rng(ORDER_SEED).permutation(fu.size)]
    alone_high = share_limit(y.sum(), 150, alpha / 2, "high")
    ppi_high = betting_limit(ordered, alpha / 4, "high") + share_limit(np.sum(y * (1 - f)), 150, alpha / 4, "high")
    assert ppi_limit(y, f, fu, alpha, "high", form="exact") == pytest.approx(min(1.0, alone_high, ppi_high))
    alone_low = share_limit(y.sum(), 150, alpha / 2, "low")
    ppi_low = betting_limit(ordered, alpha / 4, "low") - share_limit(np.sum((1 - y) * f), 150, alpha / 4, "high")
    assert ppi_limit(y, f, fu, alpha, "low", form="exact") == pytest.approx(max(0.0, alone_low, ppi_low))
    # a good scorer: classic PPI is the tighter; a scorer that is no better than chance: the labels alone
    assert ppi_high < alone_high
    noise = (rng.random(150) < 0.5).astype(float)
    assert ppi_limit(y, noise, fu, alpha, "high", form="exact") == pytest.approx(alone_high)
    with pytest.raises(ValueError, match="0/1 labels"):
        ppi_limit(y * 0.5, f, fu, alpha, "high", form="exact")


def _stratum(rng, n_images: int, labels: int, rate: float, sens: float, spec: float):
    """One prompt text's images: truth ~ Bernoulli(rate), the scorer's judgement with its sensitivity and specificity;
    the first ``labels`` images labelled (the images are independent draws, so any value-free choice will do)."""
    y = (rng.random(n_images) < rate).astype(float)
    f = np.where(y == 1, rng.random(n_images) < sens, rng.random(n_images) >= spec).astype(float)
    return prediction_powered(y[:labels], f[:labels], f)


def test_a_sum_of_strata_is_the_union_bound_of_its_terms_limits_by_hand():
    from t2i_fairness.metrics.ppi import prediction_powered_sum

    rng = np.random.default_rng(0)
    a, b, c = (_stratum(rng, 60, 30, r, 0.8, 0.9) for r in (0.7, 0.3, 0.5))
    s = prediction_powered_sum([a, b, c], [1.0, -0.5, -0.5])
    alpha = 1e-3
    assert s.estimate == pytest.approx(a.estimate - 0.5 * b.estimate - 0.5 * c.estimate)
    assert s.limit(alpha, "low") == pytest.approx(a.limit(alpha / 3, "low") - 0.5 * b.limit(alpha / 3, "high")
                                                  - 0.5 * c.limit(alpha / 3, "high"))
    d = prediction_powered_sum([a, b, c], [1.0, -0.5, -0.5], centre=0.1, absolute=True)
    lo, hi = s.limit(alpha / 2, "low") - 0.1, s.limit(alpha / 2, "high") - 0.1
    assert d.estimate == pytest.approx(abs(s.estimate - 0.1))
    assert d.limit(alpha, "high") == pytest.approx(max(hi, -lo))
    assert d.limit(alpha, "low") == pytest.approx(lo if lo > 0 else -hi if hi < 0 else 0.0)
    # the p-value inverts the limit: at that level the low limit reaches the bound
    big = prediction_powered_sum([_stratum(rng, 2_000, 1_000, r, 0.8, 0.9) for r in (0.7, 0.3, 0.5)],
                                 [1.0, -0.5, -0.5], centre=0.1, absolute=True)
    p = big.p_value(0.1, "max")
    assert 1e-12 < p < 0.5 and big.limit(p * 1.01, "low") > 0.1 > big.limit(p * 0.99, "low")
    with pytest.raises(ValueError, match="of one length"):
        prediction_powered_sum([a], [1.0, 2.0])


@pytest.mark.parametrize("absolute", [False, True])
def test_a_sum_of_strata_covers_with_scorer_errors_that_differ_by_stratum(absolute):
    """Strata whose scorer errs differently (one misses 40% of what it shows), 12 labels of 40 images each: the
    one-sided limit at 0.05 and 0.01 misses the truth no more often than its level (upper 99.9% binomial bound,
    600 runs)."""
    from t2i_fairness.metrics.ppi import prediction_powered_sum

    rng = np.random.default_rng(11)
    rates, weights, centre = (0.6, 0.2, 0.5), (1.0, -0.5, -0.5), 0.1
    truth = sum(w * r for w, r in zip(weights, rates))
    target = abs(truth - centre) if absolute else truth
    runs, levels = 600, (0.05, 0.01)
    misses = np.zeros((len(levels), 2), int)
    for _ in range(runs):
        terms = [_stratum(rng, 40, 12, r, sens, spec) for r, (sens, spec) in zip(rates, [(0.6, 0.95), (0.95, 0.9),
                                                                                          (1.0, 1.0)])]
        s = prediction_powered_sum(terms, weights, centre=centre, absolute=absolute)
        for i, alpha in enumerate(levels):
            misses[i] += (s.limit(alpha, "low") > target + 1e-12, s.limit(alpha, "high") < target - 1e-12)
    for i, alpha in enumerate(levels):
        allowed = stats.binom.ppf(0.999, runs, alpha)
        assert misses[i].max() <= allowed, (alpha, misses[i])
