"""The vectorised forms of the gates' rules (what the benches measure over simulated runs) decide as the
scalar gate does: each array entry equals the scalar interval's own limit, p-value or verdict."""

from __future__ import annotations

import numpy as np
import pytest

from t2i_fairness.metrics.intervals import Interval, share_limits, share_trials, upper_quantile, upper_quantiles


def _share(estimate, n_eff, df):
    return Interval(float(estimate), 0.0, 1.0, "wilson", 0.95, 10, n_effective=float(n_eff),
                    df=None if df is None else float(df))


@pytest.mark.parametrize("alpha", [0.5, 0.05, 1e-4, 1e-12, 1e-250])
@pytest.mark.parametrize("with_df", [False, True])
def test_share_limits_over_runs_are_each_runs_interval_limit(alpha, with_df):
    rng = np.random.default_rng(0)
    est = np.r_[0.0, 1.0, rng.uniform(0, 1, 60)]
    n_eff = np.r_[5.0, 5.0, rng.uniform(1, 400, 60)]
    df = np.r_[1.0, 2.0, rng.integers(1, 60, 60).astype(float)] if with_df else None
    for side in ("low", "high"):
        got = share_limits(est, n_eff, alpha, side, df)
        want = [_share(e, n, None if df is None else d).limit(alpha, side)
                for e, n, d in zip(est, n_eff, df if with_df else [None] * est.size)]
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-300)


def test_scalar_share_limits_are_the_interval_limit_exactly():
    rng = np.random.default_rng(1)
    for _ in range(200):
        e, n, d = float(rng.uniform()), float(rng.uniform(1, 300)), float(rng.integers(1, 40))
        a = float(rng.choice([0.3, 1e-3, 1e-9]))
        for side in ("low", "high"):
            assert share_limits(e, n, a, side, d) == _share(e, n, d).limit(a, side)
            assert share_trials(n, a, d) == _share(e, n, d).trials(a)


def test_upper_quantiles_are_the_scalar_quantile():
    alphas = np.array([0.5, 0.025, 1e-6, 1e-250, 1e-300])
    for df in (None, 1.0, 3.0, 30.0, np.inf):
        got = upper_quantiles(alphas, None if df is None else np.full(alphas.size, df))
        want = [upper_quantile(a, df) for a in alphas]
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_mover_over_runs_is_each_runs_combination_limit():
    from t2i_fairness.metrics.evidence import combination, mover_limit

    rng = np.random.default_rng(2)
    runs, weights = 40, [-0.3, -0.1, 0.1, 0.3]
    est = rng.uniform(0.1, 0.9, (4, runs))
    n = rng.uniform(5, 200, (4, runs))
    for alpha, side in ((1e-3, "low"), (0.05, "high")):
        lims = {s: share_limits(est, n, alpha, s, np.full((4, runs), 7.0)) for s in ("low", "high")}
        got = mover_limit(est, lims["low"], lims["high"], weights, side, bounds=(-0.2, 0.2))
        for r in range(runs):
            c = combination([_share(e, k, 7.0) for e, k in zip(est[:, r], n[:, r])], weights, bounds=(-0.2, 0.2))
            assert got[r] == pytest.approx(c.limit(alpha, side), rel=1e-13, abs=1e-15)


def test_pair_limit_over_runs_is_the_pairs_table():
    from t2i_fairness.metrics.evidence import pair_limit, pairs

    rng = np.random.default_rng(3)
    est, n = rng.uniform(0.1, 0.9, (2, 30)), rng.uniform(5, 200, (2, 30))
    for contrast, side in (("difference", "low"), ("ratio", "high")):
        lo, hi = share_limits(est, n, 1e-3 / 2, "low"), share_limits(est, n, 1e-3 / 2, "high")
        got = pair_limit(contrast, side, est[0], lo[0], hi[0], est[1], lo[1], hi[1])
        for r in range(30):
            table = pairs([_share(est[0, r], n[0, r], None), _share(est[1, r], n[1, r], None)],
                          contrast=contrast).pair_limits(1e-3, side)
            assert got[r] == pytest.approx(table[0, 1], rel=1e-13)


def test_hoeffding_tail_over_runs_is_each_runs_p_value():
    from t2i_fairness.metrics.evidence import Hoeffding, hoeffding_tail

    rng = np.random.default_rng(4)
    est, v = rng.uniform(0, 0.6, 200), float(rng.uniform(0.001, 0.05))
    got = hoeffding_tail(est - 0.2, v)
    want = [Hoeffding(float(e), 0.0, 1.0, "Hoeffding", 0.95, 10, variance_proxy=v).p_value(0.2, "max") for e in est]
    np.testing.assert_allclose(got, want, rtol=4e-16 * 8, atol=0)


def test_normal_tail_over_runs_is_each_runs_p_value():
    from t2i_fairness.metrics.intervals import floor_to_units, normal_tail

    rng = np.random.default_rng(5)
    est, se = rng.normal(0.5, 0.05, 100), np.r_[0.0, rng.uniform(0.001, 0.05, 99)]
    for df, units in ((None, None), (3.0, 4), (np.inf, None)):
        for direction in ("min", "max"):
            floor = 0.0 if units is None else 0.5**units
            got = normal_tail(est, se, 0.5, direction, df, p_floor=floor)
            for e, s, p in zip(est, se, got):
                iv = Interval(float(e), 0.0, 1.0, "t", 0.95, 4, se=float(s), df=df)
                iv = iv if units is None else floor_to_units(iv, units)
                assert p == iv.p_value(0.5, direction)


def test_percentile_variance_over_runs_is_the_intervals_standard_error():
    from t2i_fairness.metrics.intervals import percentile_mean_interval, percentile_variance

    rng = np.random.default_rng(6)
    x = rng.gamma(2.0, 0.05, (20, 3, 9))
    se = np.sqrt(percentile_variance(x).sum(axis=-1)) / 3
    for r in range(20):
        assert se[r] == pytest.approx(percentile_mean_interval(x[r]).se, rel=1e-14)


@pytest.mark.parametrize("k", [1, 4])
def test_cluster_share_runs_are_each_runs_cluster_interval(k):
    from t2i_fairness.metrics.intervals import cluster_mean_interval, cluster_share_runs

    rng = np.random.default_rng(7 + k)
    prompts, images = 6, 3
    c = rng.binomial(k, np.repeat(rng.beta(0.5, 0.5, size=(25, prompts))[..., None], images, 2))  # runs x P x N
    binary = np.isin(c, (0, k)).all(axis=(1, 2))
    runs = cluster_share_runs(c.sum(axis=2) / k, images, binary)
    for r in range(25):
        iv = cluster_mean_interval((c[r] / k).ravel(), np.repeat(np.arange(prompts), images))
        assert runs["estimate"][r] == pytest.approx(iv.estimate, rel=1e-14)
        assert runs["n_effective"][r] == pytest.approx(iv.n_effective, rel=1e-12)
        assert runs["df"][r] == iv.df and runs["units"][r] == iv.bounded.n
        assert runs["mean"][r] == pytest.approx(iv.bounded.mean, rel=1e-14)
        assert runs["var"][r] == pytest.approx(iv.bounded.var, rel=1e-12, abs=1e-16)
        atoms, counts = np.unique(c[r].sum(axis=1), return_counts=True)
        by_counts = cluster_share_runs(atoms / k, images, binary[r], multiplicity=counts)
        assert float(by_counts["n_effective"]) == pytest.approx(iv.n_effective, rel=1e-12)


def test_jackknife_se_df_over_runs_is_each_runs():
    from t2i_fairness.metrics.intervals import jackknife_se_df

    rng = np.random.default_rng(9)
    jack = np.r_[np.full((1, 8), 0.5), rng.uniform(0.3, 0.6, (30, 8))]
    se, df = jackknife_se_df(jack)
    for r in range(jack.shape[0]):
        one = jackknife_se_df(jack[r])
        assert se[r] == pytest.approx(one[0], rel=1e-14) and df[r] == pytest.approx(one[1], rel=1e-13)


def test_the_benches_fail_rule_is_the_gates_verdict():
    """``decisions.fails`` over arrays gives, run by run, the verdict ``decide`` gives one gate."""
    from t2i_fairness.metrics.decisions import decide, fails

    rng = np.random.default_rng(3)
    est, p = rng.uniform(0.2, 0.4, 500), rng.uniform(0, 2e-4, 500)
    for direction in ("min", "max"):
        vectorised = fails(est, 0.3, direction, p=p, level=1e-4)
        one_by_one = [decide(float(e), 0.3, direction, float(q), 1e-4) == "fail" for e, q in zip(est, p)]
        assert vectorised.tolist() == one_by_one and 0 < vectorised.sum() < 500
    with pytest.raises(ValueError, match="give `p` with `level`, or `limit`"):
        fails(est, 0.3, "min", p=p)
