"""Gate decisions that mean what they say (issue #13), end to end through pytester:
bounds an equivalent model passes, three verdicts, error control across the run, a collapsed slice
failing only its own gates, canaries, power and sample-size plans."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import norm

from t2i_fairness.metrics.decisions import GateLevel
from t2i_fairness.gating.thresholds import ThresholdFile

REPO = Path(__file__).resolve().parents[1]

DECISION_GATES = """
import pytest

# (estimate, se) per gate against a min bound of 0.5: p = Phi((estimate - 0.5) / se)
CASES = {CASES!r}


@pytest.mark.parametrize("name", sorted(CASES))
def test_decision(name, gate):
    estimate, se = CASES[name]
    gate(estimate, n=100, interval=(estimate - 1.959963984540054 * se, estimate + 1.959963984540054 * se))
"""


def _cases(p_values: dict[str, float], se: float = 0.01) -> dict[str, tuple[float, float]]:
    return {name: (0.5 + float(norm.ppf(p)) * se, se) for name, p in p_values.items()}


def _decision_project(pytester, p_values):
    pytester.makepyfile(test_decision_demo=DECISION_GATES.replace("{CASES!r}", repr(_cases(p_values))))
    lines = ["gates:"] + [f"  test_decision[{name}]:\n    min: 0.5" for name in sorted(p_values)]
    (pytester.path / "t.yaml").write_text("\n".join(lines) + "\n")
    return ["--t2i-thresholds", str(pytester.path / "t.yaml"), "--t2i-model", "python:nomodel:none",
            "--t2i-cache-dir", str(pytester.path / "cache"), "--t2i-artifacts", str(pytester.path / "art"),
            "-p", "no:cacheprovider", "-W", "ignore::pytest.PytestAssertRewriteWarning"]


@pytest.fixture
def nomodel(pytester):
    pytester.makepyfile(nomodel="class M:\n    fingerprint = 'none:v1'\n    def generate(self, p, s):\n        raise AssertionError\n\n"
                                "def none():\n    return M()\n")
    pytester.syspathinsert()
    return pytester


def test_each_gate_is_held_to_alpha_over_the_run_s_gates_and_inconclusive_warns(nomodel):
    # 10 gates: run-time level 0.05 / 10 = 0.005. 'a' p=0.001 fails; 'b' p=0.02 misses without evidence
    p_values = {"a": 0.001, "b": 0.02, **{f"ok{i}": 0.9 for i in range(8)}}
    result = nomodel.runpytest(*_decision_project(nomodel, p_values))
    result.assert_outcomes(passed=9, failed=1, warnings=1)
    result.stdout.fnmatch_lines([
        "*test_decision?a?: measured 0.4691*, bound min 0.5; p = 0.001 (one-sided, vs 0.005: alpha 0.05 over 10 gate(s), holm first step) FAILED",
        "*T2IInconclusiveWarning: test_decision?b?: *INCONCLUSIVE*",
        "test_decision?b? *0.02 (0.18)*INCONCLUSIVE",
        "10 gates, 1 failed, 1 inconclusive*",
        "decisions: one-sided p-values against the bounds, Holm (family-wise error) across 10 gates at alpha 0.05*",
    ])
    records = {r["gate"]: r for r in json.loads((nomodel.path / "art" / "run.json").read_text())["gates"]}
    assert math.isclose(records["test_decision[a]"]["p_adjusted"], 0.01, rel_tol=1e-6)  # Holm: 10 * 0.001
    assert records["test_decision[b]"]["mde"] > 0 and records["test_decision[b]"]["uncertainty"]["se"] > 0


def test_inconclusive_fail_makes_the_inconclusive_gate_fail(nomodel):
    result = nomodel.runpytest(*_decision_project(nomodel, {"b": 0.2}), "--t2i-inconclusive", "fail")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*INCONCLUSIVE (--t2i-inconclusive fail)*"])


def test_holm_s_later_steps_fail_the_run_for_gates_inconclusive_on_their_own(nomodel):
    # m = 10: 'a' (p 0.001 < 0.005) fails at run time; 'b' (p 0.0052 >= 0.005) is inconclusive on its own,
    # but Holm's second step holds it to 0.05 / 9 = 0.00556: the step-down rejects it, and the run fails.
    p_values = {"a": 0.001, "b": 0.0052, **{f"ok{i}": 0.9 for i in range(8)}}
    result = nomodel.runpytest(*_decision_project(nomodel, p_values))
    result.assert_outcomes(passed=9, failed=1, warnings=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "test_decision?b? *INCONCLUSIVE (run FAILED: step-down)",
        "FAILED by the holm step-down across the run: 1 gate(s) inconclusive on their own are significant together:",
        "  test_decision[[]b[]]",
    ])
    # without an adjustment each gate is held to alpha itself; Benjamini-Hochberg rejects both too
    nomodel.runpytest(*_decision_project(nomodel, p_values), "--t2i-multiplicity", "none").assert_outcomes(
        passed=8, failed=2)
    bh = nomodel.runpytest(*_decision_project(nomodel, p_values), "--t2i-multiplicity", "bh")
    assert bh.ret == pytest.ExitCode.TESTS_FAILED
    bh.stdout.fnmatch_lines(["FAILED by the bh step-down across the run: 1 gate(s)*"])


def test_point_mode_decides_on_the_estimate_alone(nomodel):
    result = nomodel.runpytest(*_decision_project(nomodel, {"b": 0.2, "c": 0.9}), "--t2i-gate", "point")
    result.assert_outcomes(passed=1, failed=1)


# ----------------------------------------------------------------------------------- the real suite

PROCEDURAL = ["--t2i-model", "procedural", "--t2i-objects", "bag,stove", "--t2i-no-progress", "-p", "no:cacheprovider",
              "-k", "test_region_coverage and object_in_region or test_region_precision and object_in_region"]


def _suite(pytester, *extra):
    args = ["fairness_tests/test_dig_in_region.py", *PROCEDURAL, "--t2i-thresholds", str(pytester.path / "t.yaml"),
            "--t2i-cache-dir", str(pytester.path / "cache"), "--t2i-artifacts", str(pytester.path / "art"), *extra]
    return pytester.runpytest_inprocess(*args)


@pytest.fixture
def region_suite(pytester):
    (pytester.path / "fairness_tests").mkdir()
    (pytester.path / "fairness_tests" / "test_dig_in_region.py").write_text(
        (REPO / "fairness_tests" / "test_dig_in_region.py").read_text())
    return pytester


@pytest.mark.slow  # 45 s: three runs of the region suite; the bounds' margin and level are checked at one seed in CI
def test_bounds_written_at_one_seed_pass_at_other_seeds_of_the_same_model(region_suite):
    written = _suite(region_suite, "--t2i-update-thresholds")
    written.assert_outcomes(passed=12)
    t = ThresholdFile.load(region_suite.path / "t.yaml")
    assert len(t.gates) == 12 and all(b.margin > 0 and b.level == 0.99 for b in t.gates.values())
    for seed in ("1", "2"):
        again = _suite(region_suite, "--t2i-seed", seed)
        assert again.ret == pytest.ExitCode.OK, again.stdout.str()[-3000:]
        again.stdout.fnmatch_lines(["12 gates, 0 failed*"])
        values = [r["value"] for r in json.loads((region_suite.path / "art" / "run.json").read_text())["gates"]]
        assert len(set(values)) > 2  # the procedural world moves with the seed: these are real re-runs


def test_a_collapsed_region_fails_its_own_coverage_gates_with_a_value_and_only_them(region_suite):
    _suite(region_suite, "--t2i-update-thresholds").assert_outcomes(passed=12)
    run = _suite(region_suite, "--t2i-canary", "collapse_region:africa")
    out = run.stdout.str()
    assert "ValueError" not in out and "0 row(s) after dedupe" not in out
    run.stdout.fnmatch_lines([
        # no generated image left: coverage 0 with the score interval of images covering nothing (never
        # [0, 0] and p = 0). Its jackknife variance is 0 on 1 degree of freedom (issue #28's df correction),
        # so the update flow's bound lies below 0 at this size and the gate cannot see the collapse: it says so
        "test_region_coverage?synthetic-object_in_region-africa? * 0.0000 [[]0.0000, 0.8898[]] *ok, underpowered",
        "canary collapse_region:africa (region africa): caught by 1 of 2 gate(s) of its slice; 0 false alarm(s) among 10*",
    ])
    records = {r["gate"]: r for r in json.loads((region_suite.path / "art" / "run.json").read_text())["gates"]}
    africa = [g for g in records if g.endswith("-africa]")]
    others = [g for g in records if g not in africa]
    assert records["test_region_precision[synthetic-object_in_region-africa]"]["status"] == "fail"  # undefined: fails once it has a bound
    coverage = records["test_region_coverage[synthetic-object_in_region-africa]"]
    assert coverage["status"] == "pass" and coverage["value"] == 0.0 and coverage["power"]["underpowered"]
    assert {records[g]["status"] for g in others} <= {"pass", "inconclusive"}


def test_plan_samples_prints_images_per_prompt_for_a_change(region_suite):
    _suite(region_suite, "--t2i-update-thresholds").assert_outcomes(passed=12)
    run = _suite(region_suite, "--t2i-plan-samples", "0.05")
    run.stdout.fnmatch_lines([
        "images per prompt to detect a change of 0.05 with 80% power (alpha 0.05 over 12 gate(s), holm first step); the run used 6:",
        # 0 of 20 balls would not reject a floor of 0.084 at alpha / 12 (0.916^20 = 0.17): nothing to detect
        "  test_region_coverage?synthetic-object_in_region-africa?: * (now se *, no miss of its bound is caught with "
        "80% power at this size)",
        "  test_region_precision?synthetic-object_in_region-americas?: * (now se *, detectable now *)",
    ])


def test_the_committed_tiny_thresholds_hold_only_finite_bounds_with_their_margin():
    t = ThresholdFile.load(REPO / "thresholds" / "tiny.yaml")
    assert t.gates and all(math.isfinite(b.value) for b in t.gates.values())
    assert all(b.margin is not None and b.level is not None for b in t.gates.values() if not b.policy)


# -- bounds an equivalent model passes, over the randomness of both runs (pure functions, simulated) --

def _judge_against_bound_of(writer, judged, family_size=1):
    from t2i_fairness.gating.gate import judge
    from t2i_fairness.gating.thresholds import Bound
    from t2i_fairness.gating.verdicts import bound_for
    from t2i_fairness.spine.options import T2IOptions

    bound, _, problem = bound_for(writer, "min", 0.99)
    assert problem is None
    options = T2IOptions()
    record, _ = judge(judged, ThresholdFile(Path("t.yaml"), {judged.gate: Bound("min", bound)}), {}, options,
                      level=GateLevel.of(options, family_size))
    return bound, record.status


def _precision(inside: int, n: int):
    import numpy as np

    from t2i_fairness.gating.gate import measure
    from t2i_fairness.metrics.intervals import precision_interval

    iv = precision_interval(np.arange(n)[:, None] < inside)  # `inside` of n images inside the manifold
    return measure("g", iv.estimate, n=n, interval=iv)


def test_a_share_bound_is_written_inside_0_1_and_one_at_the_edge_is_said_to_be_unable_to_fail():
    """A coverage of 0 over one ball-free prompt (df 1: t's 0.99 quantile is 31.8) put ``min: -3.14`` in
    thresholds/tiny.yaml; a share's bound stays in [0, 1], and at the edge the gate says it cannot fail."""
    from t2i_fairness.gating.verdicts import bound_cannot_fail, bound_for

    zero = _precision(0, 6)
    bound, margin, problem = bound_for(zero, "min", 0.99)
    assert (bound, margin, problem) == (0.0, 0.0, None)
    assert bound_cannot_fail("min", bound, zero.uncertainty.record())
    one = _precision(6, 6)
    high, _, _ = bound_for(one, "max", 0.99)
    assert high == 1.0 and bound_cannot_fail("max", high, one.uncertainty.record())
    mid, _, _ = bound_for(_precision(40, 60), "min", 0.99)
    assert 0.0 < mid < 40 / 60  # inside: unchanged by the clip


def test_a_bound_written_from_a_precision_of_one_is_not_failed_by_the_same_model_s_next_run():
    # 18 of 18 images inside: sqrt(p (1 - p) / n) is 0 there, and a bound at the float margin (0.9999)
    # would fail the same model's next 17 of 18 (about 60% of its re-runs at a true precision of 0.95)
    import numpy as np
    from scipy.stats import binom

    bound, status = _judge_against_bound_of(_precision(18, 18), _precision(15, 18))
    assert 0.7 < bound < 15 / 18 and status == "pass"
    rng = np.random.default_rng(0)
    fails = met = 0
    for inside in rng.binomial(18, 0.95, size=400):
        b, status = _judge_against_bound_of(_precision(18, 18), _precision(int(inside), 18))
        fails += status == "fail"
        met += inside / 18 >= b
    assert fails == 0 and met / 400 >= 0.97, (fails, met)
    assert binom.cdf(14, 18, 0.95) < 0.02  # the only re-runs below the bound are this rare


def test_bounds_from_a_few_prompts_use_t_and_an_equivalent_re_draw_meets_them_at_the_bound_level():
    # IndicTTI-like: a mean over 4 prompts drawn from a population (prompt effects sd 0.03, image noise
    # sd 0.02, 6 images each), its delete-one-prompt jackknife t interval (3 df), the bound written by the
    # update flow, a fresh draw of prompts and images judged: the bound is met about 99% of the time (a
    # normal quantile meets it far less often: the standard error is estimated from 3 degrees of freedom)
    import numpy as np

    from t2i_fairness.gating.gate import measure
    from t2i_fairness.metrics.intervals import cluster_bootstrap_interval

    rng = np.random.default_rng(1)
    clusters = np.repeat(np.arange(4), 6)

    def draw():
        values = (0.9 + rng.normal(0, 0.03, 4)[:, None] + rng.normal(0, 0.02, (4, 6))).ravel()
        iv = cluster_bootstrap_interval(lambda idx: float(values[idx].mean()), clusters, method="t")
        assert iv.df == 3
        return measure("g", iv.estimate, n=24, interval=iv)

    runs = [draw() for _ in range(801)]
    met = fails = 0
    for writer, judged in zip(runs[:-1], runs[1:]):
        bound, status = _judge_against_bound_of(writer, judged)
        met += judged.value >= bound
        fails += status == "fail"
    assert met / 800 >= 0.975 and fails <= 4, (met, fails)


SHARE_GATES = """
import numpy as np
import pytest
from t2i_fairness.metrics.intervals import precision_interval

INSIDE = {"edge": 0, "inside": 10}


@pytest.mark.parametrize("name", sorted(INSIDE))
def test_share(name, gate):
    iv = precision_interval(np.arange(20)[:, None] < INSIDE[name])  # INSIDE[name] of 20 images inside
    gate(iv.estimate, n=20, interval=iv)
"""


def test_the_summary_names_gates_whose_bound_a_share_can_never_miss(nomodel):
    # a precision measured at exactly 0 gets a min bound at 0 (a share's bound stays in [0, 1]): the gate cannot
    # fail, and the run says so
    nomodel.makepyfile(test_share_demo=SHARE_GATES)
    (nomodel.path / "t.yaml").write_text("gates: {}\n")
    args = ["--t2i-thresholds", str(nomodel.path / "t.yaml"), "--t2i-model", "python:nomodel:none",
            "--t2i-cache-dir", str(nomodel.path / "cache"), "-p", "no:cacheprovider"]
    nomodel.runpytest(*args, "--t2i-update-thresholds").assert_outcomes(passed=2)
    bounds = ThresholdFile.load(nomodel.path / "t.yaml").gates
    assert bounds["test_share[edge]"].value == 0 < bounds["test_share[inside]"].value
    result = nomodel.runpytest(*args)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["1 gate(s) cannot fail at their bound (a share in ?0, 1? with a min bound at or below 0*",
                                 "  test_share[edge]"])
    assert "  test_share[inside]" not in result.stdout.str()


def test_underpowered_passes_are_said_in_words_in_every_output_and_match_the_power_computation(region_suite, in_process):
    """Issue #28: a pass whose test could hardly fail a model missing its bound by the kind's meaningful miss
    (0.10 on a share) says so next to its verdict in every output, and the summary counts such gates. The
    power in the words is checked against an independent computation: scipy's binomial distribution at the
    exact test's critical count (precision is a binomial share of its images)."""
    import xml.etree.ElementTree as ET

    from scipy import stats

    _suite(region_suite, "--t2i-update-thresholds").assert_outcomes(passed=12)
    run = _suite(region_suite, "--junitxml", str(region_suite.path / "j.xml"),
                 "--t2i-report", str(region_suite.path / "rep"))
    assert run.ret == pytest.ExitCode.OK, run.stdout.str()[-3000:]
    out = run.stdout.str()
    data = json.loads((region_suite.path / "art" / "run.json").read_text())
    weak = [r for r in data["gates"] if r["status"] in ("pass", "inconclusive") and (r["power"] or {}).get("underpowered")]
    assert weak, "the smoke sizes (12 images a region) cannot see a 0.10 miss at alpha / 12"
    checked = 0
    for r in data["gates"]:
        if not r["gate"].startswith("test_region_precision") or r["bound"] is None or r["bound"] <= 0:
            continue
        n, b, level = int(r["uncertainty"]["n_effective"]), r["bound"], r["threshold"]
        ks = np.arange(n + 1)
        crit = ks[stats.binom.cdf(ks, n, b) <= level]
        expect = float(stats.binom.cdf(crit.max(), n, max(b - 0.1, 0.0))) if crit.size else 0.0
        assert r["power"]["power"] == pytest.approx(expect, abs=1e-9), r["gate"]
        assert r["power"]["effect"] == 0.1 and r["power"]["level"] == pytest.approx(level)
        if expect < 0.5:
            pct = f"{100 * expect:.1f}%" if expect < 0.1 else f"{100 * expect:.0f}%"
            if expect < 0.001:
                pct = "<0.1%"
            assert f"would catch a 0.1 miss {pct} of the time" in out, r["gate"]
        checked += 1
    assert checked >= 3
    # counted in the summary, the verdict headline, run.json, JUnit, and marked in the HTML report
    assert f"{len(weak)} gate(s) underpowered:" in out
    assert f"underpowered)" in out.split("verdict:", 1)[1].splitlines()[0]
    assert data["power"]["underpowered"] == len(weak) and len(data["power"]["gates"]) == len(weak)
    suite = ET.parse(region_suite.path / "j.xml").getroot().find("testsuite")
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props["t2i_underpowered"] == str(len(weak))
    cases = [c for c in suite.iter("testcase") if any(p.get("name") == "underpowered" for p in c.iter("property"))]
    assert len(cases) == len(weak)
    html = (region_suite.path / "rep" / "index.html").read_text()
    assert html.count(", underpowered") >= len(weak)
    # and `t2i-fairness plan` lists them, from that run, with the images for 80%
    args = [a for a in PROCEDURAL if a not in ("-p", "no:cacheprovider")]
    plan = in_process.cli(["plan", *args, "--t2i-thresholds", str(region_suite.path / "t.yaml"),
                           "--t2i-artifacts", str(region_suite.path / "art")], cwd=region_suite.path)
    assert plan.returncode == 0, plan.stderr[-2000:]
    assert f"{len(weak)} of the 12 selected gate(s) underpowered" in plan.stdout, plan.stdout[-2000:]
    listed = [line for line in plan.stdout.splitlines() if line.startswith("  test_region_") and "80%" in line]
    assert len(listed) == len(weak)
