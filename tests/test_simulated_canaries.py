"""bench/simulated_canaries.py: simulated stand-ins for the canaries the tiny scorers cannot see.

The simulation must run the suite's own code (checked against brute-force recomputations of its
values), decide like the gates (bounds from the update flow), stay quiet under the null, and catch
the planted regressions at the realistic sizes, at fixed seeds.
"""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest


@pytest.fixture(scope="module")
def sim(load_bench):
    return load_bench("simulated_canaries")


def _brute_precision_coverage(real, fake, k):
    d_rr = np.linalg.norm(real[:, None] - real[None], axis=-1)
    radii = np.sort(d_rr, axis=1)[:, k]  # column 0 is the row itself
    inside = np.linalg.norm(fake[:, None] - real[None], axis=-1) < radii[None]
    return inside.any(axis=1).mean(), inside.any(axis=0).mean()


def test_dig_in_values_are_the_suites_precision_and_coverage(sim):
    from t2i_fairness.spine.options import T2IOptions

    options = T2IOptions()
    world = sim.dig_world(sim.DIG_SIZES["smoke"], seed=3)
    rng = np.random.default_rng(5)
    fakes = {r: sim.dig_generated(world, r, rng, 0.6 if r == "africa" else 0.0) for r in sim.REGIONS}
    measured = {m.gate: m for m in sim.dig_measurements(world, fakes, options)}
    for region in ("africa", "europe"):
        precision, coverage = _brute_precision_coverage(world.real[region], fakes[region], options.nearest_k)
        p = measured[f"test_region_precision[synthetic-object_in_region-{region}]"]
        c = measured[f"test_region_coverage[synthetic-object_in_region-{region}]"]
        assert p.value == pytest.approx(precision, abs=1e-12) and c.value == pytest.approx(coverage, abs=1e-12)
        assert (p.n, c.n) == (18, 30)  # n as the gate test passes it: generated for precision, real for coverage
        assert p.uncertainty.method == "wilson" and c.uncertainty.method == "jackknife_wilson_df"


def test_indic_values_and_law_free_units_are_the_suites(sim):
    from t2i_fairness.spine.options import T2IOptions

    world = sim.indic_world(sim.INDIC_SIZES["smoke"], seed=1)
    feats = sim.indic_features(world, np.random.default_rng(2))
    measured = {m.gate: m for m in sim.indic_measurements(sim.simulated_indic(world, feats), T2IOptions())}
    unit = lambda x: x / np.linalg.norm(x, axis=-1, keepdims=True)  # noqa: E731
    clip, image = unit(feats["clip"]["tam_Taml"]), feats["image"]
    per_prompt = np.einsum("pd,pnd->p", world.english, clip) / clip.shape[1]
    assert measured["test_lgc[tam_taml]"].value == pytest.approx(per_prompt.mean(), abs=1e-12)
    eng, tam = unit(image["eng_Latn"]), unit(image["tam_Taml"])
    scal = np.mean([np.mean(eng[k] @ tam[k].T) for k in range(eng.shape[0])])
    assert measured["test_scal_with_english[tam_taml]"].value == pytest.approx(scal, abs=1e-12)
    # the law-free test reads each prompt's value, by hand; its standard error is the delete-one-prompt jackknife's
    g = per_prompt.size
    jack = np.array([np.delete(per_prompt, i).mean() for i in range(g)])
    se = math.sqrt((g - 1) / g * np.sum((jack - jack.mean()) ** 2))
    iv = measured["test_lgc[tam_taml]"].uncertainty
    assert np.allclose(iv.values, per_prompt, atol=1e-12) and iv.value_range == (-1.0, 1.0) and iv.df is None
    assert iv.se == pytest.approx(se, rel=1e-9) and iv.p_floor == 0.5**g
    ratio = measured["test_clgc_vs_english[tam_taml]"]  # the contrast's units: each prompt's two CLGCs
    assert (ratio.uncertainty.num, ratio.uncertainty.den) == pytest.approx(
        (measured["test_clgc[tam_taml]"].value, measured["test_clgc[eng_latn]"].value), abs=1e-12)
    assert len(ratio.uncertainty.num_values) == g and ratio.uncertainty.method.startswith("ratio by betting")
    assert {m.gate for m in measured.values()} >= {"test_clgc[eng_latn]", "test_clgc_vs_english[hin_deva]", "test_dwl[hin_deva]"}


def test_bounds_are_the_update_flows(sim):
    from t2i_fairness.gating.gate import measure
    from t2i_fairness.gating.verdicts import bound_for
    from t2i_fairness.metrics.intervals import Interval
    from t2i_fairness.spine.options import T2IOptions

    m = measure("g", 0.7, n=40, interval=Interval(0.7, 0.6, 0.8, "t", 0.95, 40, se=0.05, df=39))
    bound = sim._write_bounds([m], T2IOptions()).gates["g"]
    assert (bound.value, bound.level) == (bound_for(m, "min", 0.99)[0], 0.99)


def test_dig_in_null_fails_no_gate_at_the_smoke_size_even_where_the_reference_measured_18_of_18(sim):
    # The reference run gives two regions a precision of 18/18 (Wilson se 0 at the estimate). The update
    # flow used to write min 0.9999 there, and the null then failed 197 of 200 runs on those two gates;
    # with the share floor of the bound (verdicts.share_se_floor) the null and the other slices stay quiet.
    [r] = sim.simulated_degrade_region(20, sim.DIG_SIZES["smoke"], (0.6,), seed=0)
    assert len(r.se0_bounds) == 2
    assert r.null == [0] * 20 and r.other == [0] * 20
    assert sum(c > 0 for c in r.slice) >= 18  # strength 0.6 is gross: caught even at the smoke size


def test_dig_in_degrade_is_caught_at_the_realistic_size_without_false_alarms(sim):
    [r] = sim.simulated_degrade_region(1, sim.DIG_SIZES["realistic"], (0.6,), seed=1)
    assert r.null == [0] and r.other == [0] and r.slice == [2]  # both of Africa's gates, no other region's
    assert r.gates == {"slice": 2, "other": 10, "aggregate": 0}


def test_answer_language_quiet_under_the_null_and_caught_at_the_papers_common_subset(sim):
    smoke = sim.simulated_answer_language(10, sim.INDIC_SIZES["smoke"], seed=0)
    common = sim.simulated_answer_language(10, sim.INDIC_SIZES["common"], seed=0)
    assert smoke.null == [0] * 10 and common.null == [0] * 10
    assert common.other == [0] * 10 and sum(c > 0 for c in common.slice) >= 9
    assert common.gates == {"slice": 10, "other": 4, "aggregate": 2}


def test_rows_name_the_size_and_the_kind(sim):
    r = sim.SimResult("40 prompts x 4 images", null=[0, 1], slice=[2, 0], other=[0, 0], gates={"slice": 10, "aggregate": 2},
                      aggregate=[1, 0])
    rows = r.rows("answer_language:hin_Deva (simulated)")
    assert rows == {
        "answer_language:hin_Deva (simulated) null (any gate failed), 40 prompts x 4 images": (1, 2),
        "answer_language:hin_Deva (simulated) planted: slice gates failed, 40 prompts x 4 images": (1, 2),
        "answer_language:hin_Deva (simulated) planted: false alarms on other slices, 40 prompts x 4 images": (0, 2),
        "answer_language:hin_Deva (simulated) planted: aggregate gates failed, 40 prompts x 4 images": (1, 2),
    }


def test_docstring_examples_run(sim):
    assert doctest.testmod(sim, optionflags=doctest.ELLIPSIS).failed == 0
