"""Every gate kind's false-alarm rate at the run's own level (issue #28, item 4): ``bench/bench_gate_sizes.py``.

Three kinds of checks:

* the bench's rules over simulated runs, built from the product's vectorised functions (``share_limits``,
  ``cluster_share_runs``, ``jackknife_se_df``, ``percentile_variance``, ``normal_tail``, ``mover_limit``,
  ``pair_limit``, ``hoeffding_tail``; each held to its scalar gate in ``tests/test_vectorised_rules.py``), decide
  exactly as the gates' own objects do (``pairs(...).p_value``, the cluster share's ``Interval.p_value``,
  ``coverage_interval``, ``percentile_mean_interval``, Fieller, the drop's and the template improvement's
  MOVER) on random cases, and each importance sampler agrees with plain simulation at a moderate level;
* the sizes: exact rows computed live (every smoke size, the paper sizes where enumeration is cheap), the
  simulated rows at reduced runs where a size of several times the level is still seen (a lower 95% bound
  above ``1.2 x level`` fails). A kind whose size the bench measures above ``1.2 x`` its level with the current
  statistics is a strict ``xfail`` naming the measurement: it fails the day the statistic is fixed, so the
  marker goes with the fix;
* docs/calibration.md's table was produced by the current code: the gate counts ``m`` it states are what the
  suite collects, and a cheap exact row matches its line.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "calibration.md"
FLAG = 1.2


@pytest.fixture(scope="module")
def b(load_bench):
    return load_bench("bench_gate_sizes")


def _doc_m() -> dict[str, int]:
    text = DOC.read_text()
    found = re.search(r"gates per run \(FAMILY_SIZE\): smoke (\d+), paper (\d+)", text)
    assert found, "docs/calibration.md must carry the bench's output line with the gate counts"
    return {"smoke": int(found.group(1)), "paper": int(found.group(2))}


@pytest.fixture(scope="module")
def levels():
    m = _doc_m()
    return {p: 0.05 / m[p] for p in m}


# -- the bench's runs read the product's rules ---------------------------------------------------------------

def _share(k, n):
    from t2i_fairness.metrics.intervals import precision_interval

    return precision_interval(np.r_[np.ones(k, bool), np.zeros(n - k, bool)])


def test_exact_share_and_worst_of_rules_are_the_products(b):
    from t2i_fairness.metrics.evidence import worst_of

    rng = np.random.default_rng(0)
    for _ in range(60):
        n, g = int(rng.integers(1, 80)), int(rng.integers(1, 7))
        bound, level = float(rng.uniform(0.05, 0.99)), float(rng.choice([1e-2, 1e-4, 3.5e-5]))
        crit = b.share_critical(n, [bound], level / g)[0]
        counts = rng.integers(0, n + 1, size=g)
        ev = worst_of([_share(int(k), n) for k in counts])
        assert (ev.estimate < bound and ev.p_value(bound, "min") <= level) == (counts.min() <= crit)


def test_pair_thresholds_decide_as_pairs_p_value(b):
    """The spread / parity gate fails exactly when the (largest, smallest) counts fall in the bench's set: the
    brute force over every group with the product's ``pairs(...).p_value``."""
    from t2i_fairness.metrics.evidence import pairs

    rng = np.random.default_rng(1)
    for contrast, direction in (("difference", "max"), ("ratio", "min")):
        for n, g in ((6, 6), (18, 3), (36, 6))[: 3 if contrast == "difference" else 2]:
            level = float(rng.choice([1e-2, 1e-3, 1.03e-4]))
            lim = b.pair_limit_matrix(n, g, level, contrast)
            for bound in ((0.0, 0.1, 0.3) if contrast == "difference" else (0.5, 0.8, 0.95)):
                thr = b.pair_thresholds(lim, n, bound, contrast)
                for _ in range(12):
                    counts = rng.integers(0, n + 1, size=g)
                    ev = pairs([_share(int(k), n) for k in counts], contrast=contrast)
                    missed = ev.estimate > bound if direction == "max" else ev.estimate < bound
                    product = bool(missed and ev.p_value(bound, direction) <= level)
                    bench = bool(thr[counts.max()] >= counts.min())
                    assert product == bench, (contrast, n, g, bound, counts.tolist())


def test_extremes_probability_is_the_enumeration_of_every_outcome(b):
    n, g = 4, 3
    thr = np.array([-1, 0, 0, 1, 2])
    thetas = (0.3, 0.5, 0.7)
    ks = np.arange(n + 1)
    cdfs = [stats.binom.cdf(ks, n, t) for t in thetas]
    brute = 0.0
    for counts in np.ndindex(*(n + 1,) * g):
        p = np.prod([stats.binom.pmf(c, n, t) for c, t in zip(counts, thetas)])
        brute += p * (thr[max(counts)] >= min(counts) and max(counts) > min(counts))
    assert b.extremes_probability(thr, cdfs) == pytest.approx(brute, rel=1e-12)


def test_cluster_share_rule_is_the_products(b):
    from t2i_fairness.metrics.intervals import cluster_share_runs

    rng = np.random.default_rng(2)
    for _ in range(150):
        k, n, m = int(rng.choice([1, 2, 4, 8])), int(rng.integers(1, 5)), int(rng.integers(2, 9))
        c = rng.binomial(k, np.repeat(rng.beta(0.5, 0.5, size=m)[:, None], n, 1))
        bound, level = float(rng.uniform(0.05, 0.99)), float(rng.choice([0.05, 1e-3, 1e-5]))
        iv = b.cluster_interval(c, k, n)
        product = iv.estimate < bound and iv.p_value(bound, "min") <= level
        runs = cluster_share_runs(c.sum(axis=1)[None] / k, n, bool(np.isin(c, (0, k)).all()))
        assert bool(b.cluster_share_fails(runs, bound, level)[0]) == product
        atoms, counts = np.unique(c.sum(axis=1), return_counts=True)  # runs as counts of distinct sums: ordered
        again = np.sort(atoms[b.ordered(np.stack([counts, counts]), rng)], axis=1)
        assert np.array_equal(again, np.stack([np.sort(c.sum(axis=1))] * 2))


def test_drop_rule_is_the_products_combination(b):
    """The CIS drop gate over runs (MOVER over every CIS_K's cluster-share limits) decides as the product's
    ``combination`` of the runs' cluster intervals, clipped to the slope's range as ``drop_interval`` does."""
    from t2i_fairness.metrics.evidence import combination
    from t2i_fairness.metrics.intervals import cluster_share_runs

    rng = np.random.default_rng(21)
    ks, n, m = (1, 2, 4, 8), 2, 5
    a = -b._slope_weights(ks)
    steep = 0.5 * float(np.abs(a).sum())
    seen = set()
    for _ in range(40):
        level = float(rng.choice([0.05, 0.2]))
        counts = [rng.binomial(k, np.repeat(rng.beta(2, 2, size=m)[:, None] * (1 - 0.08 * k), n, 1)) for k in ks]
        ivs = [b.cluster_interval(c, k, n) for c, k in zip(counts, ks)]
        c = combination(ivs, list(a), bounds=(-steep, steep))
        bound = float(c.estimate - rng.uniform(0.0, 0.3))
        product = c.estimate > bound and c.p_value(bound, "max") <= level
        parts = []
        for cc, k in zip(counts, ks):
            runs = cluster_share_runs(cc.sum(axis=1)[None] / k, n, bool(np.isin(cc, (0, k)).all()))
            parts.append(b.cluster_limits(runs, level))
        assert bool(b.drop_fails(parts, ks, bound)[0]) == product
        seen.add(product)
    assert seen == {True, False}


def test_coverage_stats_are_coverage_interval(b):
    from t2i_fairness.metrics.intervals import coverage_interval

    group = b.coverage_group("off-manifold 30%", 2, 10, 4, 3000, 0)
    rng = np.random.default_rng(3)
    draws = [rng.integers(0, 3000, size=(40, 4)) for _ in range(2)]
    est, n_eff, df = b.coverage_stats(group, draws)
    for r in range(40):
        member = np.zeros((group.n_fake, group.n_real), bool)
        i = 0
        for o in range(2):
            for a in draws[o][r]:
                member[i, group.balls[o][group.indptr[o][a]:group.indptr[o][a + 1]]] = True
                i += 1
        plain = coverage_interval(member, method="jackknife_wilson")
        proposal = coverage_interval(member, method="jackknife_wilson_df")
        assert est[r] == plain.estimate and n_eff[r] == pytest.approx(plain.n_effective, rel=1e-12)
        assert df[r] == pytest.approx(proposal.df, rel=1e-12)
        for bound in (0.3, 0.6, 0.9):
            for level in (1e-2, 1e-4):
                want = plain.estimate < bound and plain.p_value(bound, "min") <= level
                assert bool(b.coverage_fails(est[r:r + 1], n_eff[r:r + 1], bound, level)[0]) == want
                want = proposal.estimate < bound and proposal.p_value(bound, "min") <= level
                assert bool(b.coverage_fails(est[r:r + 1], n_eff[r:r + 1], bound, level, df[r:r + 1])[0]) == want


def test_template_and_pair_rules_on_coverage_intervals_are_the_products(b):
    from t2i_fairness.metrics.evidence import combination, pairs, worst_of
    from t2i_fairness.metrics.intervals import _score

    def iv(e, n):
        return _score("jackknife_wilson", float(e), float(n), 0.95, 10)

    rng = np.random.default_rng(4)
    for _ in range(80):
        g, level = int(rng.integers(2, 7)), float(rng.choice([0.05, 1e-3, 1e-5]))
        es, ns = rng.uniform(0.05, 0.95, g), rng.uniform(5, 300, g)
        for contrast, bound, direction in (("difference", float(rng.uniform(0, 0.5)), "max"),
                                           ("ratio", float(rng.uniform(0.3, 0.99)), "min")):
            ev = pairs([iv(e, n) for e, n in zip(es, ns)], contrast=contrast)
            missed = ev.estimate > bound if direction == "max" else ev.estimate < bound
            product = missed and ev.p_value(bound, direction) <= level
            bench = any(b.pair_fails((es[i:i + 1], ns[i:i + 1]), (es[j:j + 1], ns[j:j + 1]), g, level, contrast,
                                     bound)[0] for i in range(g) for j in range(g) if i != j)
            assert product == bench
        new = [(rng.uniform(0.05, 0.95), rng.uniform(5, 300)) for _ in range(g)]
        old = [(rng.uniform(0.05, 0.95), rng.uniform(5, 300)) for _ in range(g)]
        bound = float(rng.uniform(-0.5, 0.3))
        c = combination([worst_of([iv(e, n) for e, n in new]), worst_of([iv(e, n) for e, n in old])], [1.0, -1.0],
                        bounds=(-1.0, 1.0))
        product = c.estimate < bound and c.p_value(bound, "min") <= level
        arr = lambda gs: [(np.array([e]), np.array([n])) for e, n in gs]  # noqa: E731
        assert product == bool(b.template_fails(arr(new), arr(old), level, bound)[0])


def test_consistency_rule_is_percentile_mean_interval(b):
    from t2i_fairness.metrics.intervals import percentile_mean_interval

    world = b.score_world("off-object", 4)
    rng = np.random.default_rng(5)
    for _ in range(60):
        n = int(rng.integers(2, 30))
        x = world.draw(rng.random((4, n)))
        bound = float(np.percentile(x, 10, axis=1).mean() + rng.normal(0, 0.02))
        level = float(rng.choice([0.05, 1e-3]))
        iv = percentile_mean_interval(x)
        product = iv.estimate < bound and iv.p_value(bound, "min") <= level
        assert bool(b.consistency_fails(x[None], bound, level)[0][0]) == product


def test_t_rule_is_the_jackknife_t_and_fieller(b):
    from t2i_fairness.metrics.evidence import fieller_ratio
    from t2i_fairness.metrics.intervals import cluster_bootstrap_interval, floor_to_units

    rng = np.random.default_rng(6)
    seen = set()
    for _ in range(80):
        g = int(rng.choice([4, 8]))
        v = rng.normal(0.5, 0.05, g)
        level = float(rng.choice([0.05, 1e-2]))
        bound = float(v.mean() + rng.normal(0, 0.05))
        iv = floor_to_units(cluster_bootstrap_interval(lambda idx: v[np.asarray(idx)].mean(), np.arange(g),
                                                       method="t"), g)  # as the IndicTTI study builds it
        product = iv.estimate < bound and iv.p_value(bound, "min") <= level
        assert bool(b.t_fails((v - bound)[None], 0.0, level)[0]) == product
        seen.add(product)
        den = rng.normal(0.6, 0.05, g)
        r = 0.9
        num = r * den + v - 0.5
        jn = [np.delete(num, i).mean() for i in range(g)]
        jd = [np.delete(den, i).mean() for i in range(g)]
        f = floor_to_units(fieller_ratio(jn, jd, num.mean(), den.mean()), g)
        product = f.estimate < r and f.p_value(r, "min") <= level
        assert bool(b.t_fails((num - r * den)[None], 0.0, level)[0]) == product
    assert seen == {True, False}  # both outcomes occur: the comparison can fail


# -- the importance samplers agree with plain simulation at moderate levels ------------------------------

def _agree(is_est, plain_est, k=4.0):
    se = math.hypot(is_est.se, plain_est.se)
    assert abs(is_est.value - plain_est.value) <= k * se + 1e-12, (is_est, plain_est)


def test_cluster_share_sampler_agrees_with_plain_simulation(b):
    """Compared where the gate fails often enough to count (a bound above the truth): on the bound itself the
    law-free test leaves both at 0, which would compare nothing."""
    rng = np.random.default_rng(7)
    for k, m, n, level, mu, icc, bound in ((8, 200, 16, 1e-2, 0.5, 0.1, 0.59), (1, 100, 16, 1e-3, 0.3, 0.3, 0.45)):
        plain = b.cluster_share_plain(k, n, m, mu, icc, bound, level, 60000, rng, k == 1)
        assert plain.hits >= 1000
        _agree(b.cluster_share_is(k, n, m, mu, icc, bound, level, 6000, rng, k == 1), plain)


def test_coverage_sampler_agrees_with_plain_simulation(b):
    rng = np.random.default_rng(8)
    group = b.coverage_group("shifted", 1, 180, 60, 5000, 0)
    for level in (1e-2, 1e-3):
        _agree(b.coverage_size(group, level, 4000, rng), b.coverage_size(group, level, 20000, rng, plain=True))
    hi, lo = b.coverage_group("matched", 1, 180, 60, 5000, 0), group
    _agree(b.coverage_pair_size(hi, lo, 2, 1e-2, "difference", hi.truth() - lo.truth(), 4000, rng),
           b.coverage_pair_size(hi, lo, 2, 1e-2, "difference", hi.truth() - lo.truth(), 20000, rng, plain=True))


def test_consistency_and_t_samplers_agree_with_plain_simulation(b):
    rng = np.random.default_rng(9)
    world = b.score_world("off-object", 6)
    truth = float(world.expected_percentile(6).mean())
    f, w = b.consistency_runs(world, 6, truth, 1e-1, 8000, rng, shares=b.consistency_shares(6, 6))
    f0, _ = b.consistency_runs(world, 6, truth, 1e-1, 40000, rng)
    _agree(b.weighted(f, w, ""), b.weighted(f0, None, ""))
    law = b.PromptLaw("gamma", "gamma", 0.05, 0.01)
    for level in (1e-2, 1e-3):  # the bare t rule: with its p floor (2^-4 above both levels) every run would pass
        tilted = b.t_runs(law, 4, 0.0, level, 20000, rng, floor=False)
        plain = b.t_runs(law, 4, 0.0, level, 200000, rng, tilted=False, floor=False)
        assert plain.hits > 0  # something to agree on
        _agree(tilted, plain)


def test_expected_percentile_is_the_simulated_mean(b):
    world = b.score_world("off-object", 3)
    x = world.draw(np.random.default_rng(10).random((3, 1_600_000))).reshape(3, -1, 8)
    sim = np.percentile(x, 10, axis=2).mean(axis=1)  # 200,000 groups of 8: Monte Carlo se 7e-5
    assert world.expected_percentile(8) == pytest.approx(sim, abs=3e-4)


# -- the sizes ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("preset", ["smoke", "paper"])
@pytest.mark.parametrize("n", [6, 36, 60, 1620])
def test_exact_share_sizes(b, levels, preset, n):
    level = levels[preset]
    assert b.share_size(n, level)[0] <= FLAG * level
    assert b.worst_size(n, 6, level)[0] <= FLAG * level


@pytest.mark.parametrize("preset", ["smoke", "paper"])
@pytest.mark.parametrize("contrast", ["difference", "ratio"])
def test_exact_pair_sizes(b, levels, preset, contrast):
    n = b.PRESETS[preset].region_fake
    if n > 100:
        n = 60  # the paper's 1,620 take seconds per contrast in the bench; 60 here
    level = levels[preset]
    assert b.pair_size(n, 6, level, contrast, grid=11)[0] <= FLAG * level


@pytest.mark.parametrize("preset", ["smoke", "paper"])
def test_exact_word_level_and_order_sizes(b, levels, preset):
    level = levels[preset]
    for row in b.word_rows(b.PRESETS[preset], level):
        assert row.size <= FLAG * level, row
    row = b.order_row(b.PRESETS[preset], level, b.Budget(runs=10, plain=20, full=False), np.random.default_rng(0))
    assert row.size <= level


def test_smoke_cis_shares_are_exact_and_within_their_level(b, levels):
    level = levels["smoke"]
    for k in (1, 8):
        for mu in (0.05, 0.5, 0.9):
            assert b.cluster_share_exact(k, 2, 4, mu, 0.3, mu, level) <= FLAG * level


def _lower_above(e, level):
    """A size several times the level is seen: the estimate's lower 95% bound is above FLAG x level."""
    return e.lower > FLAG * level




def test_coverage_object_region_paper(b, levels):
    rng = np.random.default_rng(11)
    group = b.coverage_group("shifted", 1, 180, 60, 5000, 0)
    assert not _lower_above(b.coverage_size(group, levels["paper"], 3000, rng), levels["paper"])


def test_coverage_region_smoke(b, levels):
    rng = np.random.default_rng(12)
    group = b.coverage_group("off-manifold 30%", 6, 10, 6, 5000, 0)
    assert not _lower_above(b.coverage_size(group, levels["smoke"], 3000, rng), levels["smoke"])


def test_coverage_without_df_broke_its_level_where_the_default_holds_it(b, levels):
    """The default (``jackknife_wilson_df``) holds the level at the small groups where the jackknife variance
    taken at face value (``jackknife_wilson``, the default before these measurements) exceeds it several times."""
    rng = np.random.default_rng(13)
    for group, level in ((b.coverage_group("shifted", 1, 180, 60, 5000, 0), levels["paper"]),
                         (b.coverage_group("off-manifold 30%", 6, 10, 6, 5000, 0), levels["smoke"])):
        e = b.coverage_size(group, level, 3000, rng)
        assert e.hits == 0 or e.value + b.Z95 * e.se <= FLAG * level
        assert _lower_above(b.coverage_size(group, level, 3000, rng, with_df=False), level)


def test_coverage_of_the_paper_region_holds_its_level(b, levels):
    rng = np.random.default_rng(14)
    group = b.coverage_group("shifted", 27, 180, 60, 1000, 0)
    e = b.coverage_size(group, levels["paper"], 1500, rng)
    assert e.value + b.Z95 * e.se <= FLAG * levels["paper"]


def test_cis_share_paper_at_low_rates(b, levels):
    """CIS_8 over 10,000 prompts x 16 images at CIS 0.05, corr. 0.3: Korn-Graubard's limit alone measured 1.25 x
    its level here (skewed prompts); with the law-free test beside it the gate holds it."""
    rng = np.random.default_rng(15)
    e = b.cluster_share_is(8, 16, 10_000, 0.05, 0.3, 0.05, levels["paper"], 30000, rng, False)
    assert e.hits > 0 and e.value + b.Z95 * e.se <= levels["paper"]


def test_cis_share_paper_in_the_middle_holds_its_level(b, levels):
    rng = np.random.default_rng(16)
    e = b.cluster_share_is(8, 16, 10_000, 0.5, 0.1, 0.5, levels["paper"], 4000, rng, False)
    assert e.value + b.Z95 * e.se <= FLAG * levels["paper"]


def test_cis_rate_floor_paper(b, levels):
    """998 components x 140 prompts at rate 0.3, corr. 0.3: 62 x the level with Korn-Graubard's limit alone
    (docs/calibration.md); the law-free test (valid for any law of the prompts' shares, checked exactly for
    0/1 shares in tests/test_intervals.py) leaves no failing run, and the gate can still fail a component far
    below the bound."""
    rng = np.random.default_rng(17)
    g = b.CIS_COMPONENTS
    e = b.cluster_share_is(1, 16, 140, 0.3, 0.3, 0.3, levels["paper"] / g, 8000, rng, True)
    assert e.hits == 0 or g * (e.value + b.Z95 * e.se) <= levels["paper"]
    far = b.cluster_share_plain(1, 16, 140, 0.05, 0.3, 0.3, levels["paper"] / g, 200, rng, True)
    assert far.value > 0.9


@pytest.mark.parametrize("preset", ["smoke", "paper"])
def test_indic_t_over_four_prompts(b, levels, preset):
    """The bare t over 4 prompts with skewed prompt effects exceeds its level many times; the product's p floor
    (2^-4 = 0.0625 above the level) makes the gate unable to fail there, and its report says so."""
    rng = np.random.default_rng(18)
    law = b.PromptLaw("gamma", "gamma", 0.05, 0.02 / math.sqrt(b.PRESETS[preset].indic_images))
    assert _lower_above(b.t_runs(law, 4, 0.0, levels[preset], 8000, rng, floor=False), levels[preset])
    assert b.t_runs(law, 4, 0.0, levels[preset], 8000, rng).hits == 0


def test_indic_over_twenty_skewed_prompts_holds_its_level(load_bench, levels):
    """IndicTTI over 20 prompts with skewed prompt effects (10% of prompts 3 sd above the rest), where the p floor
    (2^-20) no longer binds: the t test it used exceeds the level; the product's law-free test
    (``bench/bench_indic_lawfree.py``) holds it, for a score and for the ratio to English."""
    lf = load_bench("bench_indic_lawfree")
    for kind in ("score", "ratio"):
        out = lf.sizes(kind, "far10", 20, 80_000, np.random.default_rng(20))
        assert out[("paper", "betting")].upper <= FLAG * levels["paper"]
        t = out[("smoke", "t")]
        assert stats.beta.ppf(0.05, t.hits, t.runs - t.hits + 1) > FLAG * levels["smoke"]


def test_indic_t_on_normal_prompts_is_exact(b, levels):
    rng = np.random.default_rng(19)
    e = b.t_runs(b.PromptLaw("normal", "normal", 0.05, 0.01), 4, 0.0, levels["paper"], 8000, rng, floor=False)
    assert abs(e.value - levels["paper"]) <= 4 * e.se  # the t test on normal values: exactly its level


@pytest.mark.parametrize("preset", ["smoke", "paper"])
def test_consistency_holds_its_level(b, levels, preset):
    p = b.PRESETS[preset]
    world = b.score_world("off-object", p.objects)
    truth = float(world.expected_percentile(p.images).mean())
    rng = np.random.default_rng(20)
    f, w = b.consistency_runs(world, p.images, truth, levels[preset], 1000, rng,
                              shares=b.consistency_shares(p.objects, p.images))
    e = b.weighted(f, w, "")
    assert e.value + b.Z95 * e.se <= FLAG * levels[preset]


# -- the documented table is the current code's -------------------------------------------------------------

@pytest.mark.slow
def test_the_documented_gate_counts_are_the_suites(b):
    assert b.count_gates("smoke", "paper") == _doc_m()


def test_a_documented_exact_row_is_the_current_codes(b, levels):
    text = DOC.read_text()
    for preset in ("smoke", "paper"):
        rows = b.precision_rows(b.PRESETS[preset], levels[preset], with_pairs=False)
        for row in rows:
            line = b.table([row])[2]
            assert line in text, f"docs/calibration.md is stale: rerun bench/bench_gate_sizes.py; missing\n{line}"
