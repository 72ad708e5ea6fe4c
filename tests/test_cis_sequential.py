"""CIS under ``--t2i-sequential`` (issue #29): looks are prefixes of the seeded prompt list, each prompt with all
its images, so a look's gate is the fixed-N gate of the first ``m`` prompts; the round loop stops a clearly
passing or failing CIS_K early and leaves a borderline one to ``N``, where it is the fixed-N gate."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _bench(tmp_path):
    from t2i_fairness.spine.options import T2IOptions
    from t2i_fairness.spine.workbench import Workbench

    return Workbench(T2IOptions(model="python:fakegen:make", cache_dir=tmp_path / "cache", device="cpu",
                                progress=False))


def _same(a, b):
    """Two indicators agree on everything a gate reads (the provenance aside: it names the planned M)."""
    assert (a.kind, a.n, a.skip, a.undefined) == (b.kind, b.n, b.skip, b.undefined)
    assert a.value == b.value or (math.isnan(a.value) and math.isnan(b.value))
    if a.evidence is not None:
        assert a.evidence.as_tuple() == b.evidence.as_tuple()
        assert a.evidence.p_value(0.5, "min") == b.evidence.p_value(0.5, "min")
        assert a.evidence.limit(0.001, "low") == b.evidence.limit(0.001, "low")
    assert a.details == b.details


def test_a_look_at_m_prompts_is_the_fixed_n_study_of_the_first_m_prompts(tmp_path):
    from t2i_fairness.families.cis import FAMILY
    from t2i_fairness.families.cis.options import CisOptions
    from t2i_fairness.families.cis.study import CisStudy

    bench = _bench(tmp_path)
    try:
        options = CisOptions(ks=(1, 2, 4), prompts=32, images=2, rate_min_images=2)
        study = CisStudy(bench, options)
        assert FAMILY.rounds(study) == ([2, 3, 5, 8, 12, 17, 25, 32], "prompts")  # M / 16, then growing by sqrt(2)
        for m in (3, 8, 17):
            look = FAMILY.look(study, m)
            alone = CisStudy(bench, CisOptions(ks=(1, 2, 4), prompts=m, images=2, rate_min_images=2))
            for k in options.ks:
                # the seeded draw's first m prompts, each with all its images (the same bytes)
                assert look.prompts(k)[0] == study.prompts(k)[0][:m] == alone.prompts(k)[0]
                assert look.scores(k).scores.shape == (m, 2)
                assert [[im.key for im in row] for row in look.images(look.prompts(k)[0], "")] == \
                    [[im.key for im in row] for row in study.images(study.prompts(k)[0], "")][:m]
                _same(look.raw_indicator("cis", {"cis_k": k}), alone.raw_indicator("cis", {"cis_k": k}))
            _same(look.raw_indicator("cis_drop_per_component", {}), alone.raw_indicator("cis_drop_per_component", {}))
            _same(look.raw_indicator("cis_component_rate_floor", {}),
                  alone.raw_indicator("cis_component_rate_floor", {}))
            assert look.provenance() == study.provenance()  # a look keeps the fixed-N run's settings
        assert FAMILY.look(study, 32).look is None  # the last look is the fixed-N study
        with pytest.raises(ValueError, match="must be 1..32"):
            study.at_prompts(33)
    finally:
        bench.close()


def test_a_looks_scorer_ceiling_reads_the_first_looks_prompts_and_n_reads_all(tmp_path):
    # the ceiling (a report no gate reads) makes single-component images for it alone: at a look it is the ceiling of
    # the first look's prompts (a fixed-N study of M = 2 here), whatever look the drop stopped at; at N all M
    from t2i_fairness.families.cis import FAMILY
    from t2i_fairness.families.cis.options import CisOptions
    from t2i_fairness.families.cis.study import CisStudy, cis_looks

    bench = _bench(tmp_path)
    try:
        options = CisOptions(ks=(1, 2, 4), prompts=32, images=2, rate_min_images=2)
        study = CisStudy(bench, options)
        first = cis_looks(32)[0]
        alone = CisStudy(bench, CisOptions(ks=(1, 2, 4), prompts=first, images=2, rate_min_images=2))
        assert first == 2 and study.ceiling_size == 32 and alone.ceiling_size == first
        for m in (2, 8, 17):
            look = FAMILY.look(study, m)
            assert look.ceiling_size == first
            for k in options.ks:
                c, a = look.ceiling(k), alone.ceiling(k)
                assert c.prompts == a.prompts == study.prompts(k)[0][:first]
                assert (c.scores == a.scores).all()
                # its images: the single-component images of the first look's components, nothing more
                assert look.requests("ceiling", k) == alone.requests("ceiling", k)
                singles = {(comp,) for p in study.prompts(k)[0][:first] for comp in p}
                assert look.requests("ceiling", k) == look.image_requests(list(dict.fromkeys(
                    (comp,) for p in study.prompts(k)[0][:first] for comp in p)))
                assert len({r.prompt for r in look.requests("ceiling", k)}) == len(singles)
                assert len(look.scores(k).prompts) == m  # the gate's look is the look's own
        at_n = FAMILY.look(study, 32)
        assert at_n.ceiling_size == 32 and at_n.ceiling(4).prompts == study.prompts(4)[0]
    finally:
        bench.close()


def test_a_sequential_drops_report_says_its_ceiling_is_the_first_looks(pytester):
    # the drop per component (0.15 at N) against max 0.25 passes by futility after its first look; its report's ceiling
    # reads the first look's prompts and says so, and the run makes only those prompts' single-component images
    _suite(pytester, {})
    (pytester.path / "t.yaml").write_text("gates:\n  test_cis_drop_per_component:\n    max: 0.25\n")
    args = ["fairness_tests", "--t2i-model", "procedural", "--t2i-no-progress", "-p", "no:cacheprovider",
            "-p", "no:randomly", "--t2i-cis-k", "1,2,4", "--t2i-cis-prompts", "64", "--t2i-cis-images", "2",
            "-k", "test_cis_drop_per_component", "--t2i-thresholds", str(pytester.path / "t.yaml"),
            "--t2i-cache-dir", str(pytester.path / "cache"), "--t2i-artifacts", str(pytester.path / "seq"),
            "--t2i-sequential"]
    result = pytester.runpytest_inprocess(*args)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    run = json.loads((pytester.path / "seq" / "run.json").read_text())
    gate = next(g for g in run["gates"] if g["gate"] == "test_cis_drop_per_component")
    seq = gate["details"]["sequential"]
    assert seq["early"] and seq["reason"] in ("pass: futility", "pass: curtailed") and 4 < seq["at"] < 64
    assert (f"ceiling: the first 4 prompt(s) per K, the CIS_K {seq['at']} (a report no gate reads: a look's scorer "
            "self-check reads the first look's prompts)") in result.stdout.str()
    summary = json.loads(next((pytester.path / "seq").rglob("cis_vs_k.json")).read_text())
    assert summary["ceiling_prompts"] == 4
    # images made: each K's first seq["at"] prompts (2 images a draw) and the first 4 prompts' components alone
    from t2i_fairness.metrics.cis import render_prompt, sample_fitting_prompts

    texts: dict[str, int] = {}
    for k in (1, 2, 4):
        drawn, _ = sample_fitting_prompts(k, seq["at"], seed=[0, k], fits=lambda comps: True)
        for i, p in enumerate(drawn):
            texts[render_prompt(p)] = texts.get(render_prompt(p), 0) + 2
        for p in drawn[:4]:
            for comp in p:
                texts.setdefault(render_prompt((comp,)), 2)
    assert _generated(result) == sum(texts.values())


def test_the_rate_floor_leaves_out_cleared_components_and_counts_every_component_of_its_look(tmp_path):
    """``cleared`` (the round loop's components clear of a miss): not measured, the Bonferroni factor every
    counted component of the look; without it, the fixed-N gate."""
    from t2i_fairness.families.cis.options import CisOptions
    from t2i_fairness.families.cis.study import CisStudy

    bench = _bench(tmp_path)
    try:
        study = CisStudy(bench, CisOptions(ks=(2, 4), prompts=24, images=2, rate_min_images=2))
        full = study.raw_indicator("cis_component_rate_floor", {})
        counted = full.details["components_counted"]
        assert counted >= 3 and full.evidence.selection == counted
        worst = full.details["component"]
        part = study.raw_indicator("cis_component_rate_floor", {"cleared": (worst,)})
        assert part.details["component"] != worst and part.evidence.selection == counted
        assert worst not in part.evidence.labels and len(part.evidence.labels) == counted - 1
        assert part.value >= full.value and part.evidence.p_value(0.9, "min") >= full.evidence.p_value(0.9, "min")
    finally:
        bench.close()


def test_the_rate_floor_reads_only_the_prompts_naming_a_component_still_open(tmp_path):
    """Told what earlier looks cleared, the floor generates and scores only the prompts naming a counted component
    still open (a prompt naming only cleared ones gets no image for it); each open component's rate and interval
    are those of the whole computation (every prompt naming it is read), the Bonferroni factor every counted
    component; the gate's report reads what the floor judged."""
    from fakegen import CALLS

    from t2i_fairness.families.cis.options import CisOptions
    from t2i_fairness.families.cis.study import CisStudy

    options = CisOptions(ks=(2, 4), prompts=24, images=2, rate_min_images=2)
    whole_bench, part_bench = _bench(tmp_path / "whole"), _bench(tmp_path / "part")
    try:
        whole = CisStudy(whole_bench, options).component_rates()
        counted = list(whole.intervals)
        open_, cleared = set(counted[:2]), tuple(counted[2:])
        assert len(cleared) >= 3
        study = CisStudy(part_bench, options)
        prompts = [p for k in options.ks for p in study.prompts(k)[0]]
        naming = sum(1 for p in prompts if open_ & set(p))
        before = CALLS["images"]
        part = study.component_rates(cleared)
        assert CALLS["images"] - before == naming * options.images < len(prompts) * options.images  # a fresh cache
        assert set(part.intervals) == open_ and (part.counted, part.cleared) == (len(counted), len(cleared))
        for c in open_:
            a, b = part.intervals[c], whole.intervals[c]
            assert a.as_tuple() == b.as_tuple() and a.n_units == b.n_units
            assert a.p_value(0.9, "min") == b.p_value(0.9, "min") and part.rates[c] == whole.rates[c]
        floor = study.raw_indicator("cis_component_rate_floor", {"cleared": cleared})
        assert CALLS["images"] - before == naming * options.images  # the gate's indicator read no other prompt
        assert floor.evidence.selection == len(counted) and set(floor.evidence.labels) == open_
        assert floor.details["components_cleared_earlier"] == len(cleared)
        assert study.component_rates() is part  # what the gate test's report reads: the rates the floor judged
        # nothing cleared: the fixed-N floor over every prompt
        fresh = CisStudy(part_bench, options)
        assert set(fresh.component_rates().intervals) == set(counted) and fresh.component_rates().cleared == 0
    finally:
        whole_bench.close()
        part_bench.close()


def test_rounds_tell_a_cleared_method_the_groups_it_cleared_and_measure_new_ones():
    """A worst-of gate whose groups grow with the look (``cleared=``): a group clear of a miss at a look is not
    measured later; a group first seen at a later look is; the factor is each look's own count."""
    import numpy as np

    from t2i_fairness.gating.indicator import Indicator
    from t2i_fairness.gating.rounds import GateCallSpec, Rounds
    from t2i_fairness.gating.sequential import Reason
    from t2i_fairness.gating.thresholds import Bound
    from t2i_fairness.metrics.evidence import worst_of
    from t2i_fairness.metrics.intervals import precision_interval

    seen = []

    class S:
        def __init__(self, n):
            self.n = n

        def floor(self, cleared=None):
            seen.append((self.n, tuple(sorted(cleared or ()))))
            rates = {"a": 0.99, "b": 0.83, "c": 0.83} if self.n >= 400 else {"a": 0.99, "b": 0.83}  # c: a new group
            groups = {g: precision_interval(np.r_[np.ones(int(r * self.n), bool), np.zeros(self.n - int(r * self.n), bool)])
                      for g, r in rates.items() if g not in set(cleared or ())}
            ev = worst_of(groups, total=len(rates) if cleared else None)
            return Indicator(ev.estimate, self.n, "worst", ev)

    loop = Rounds(S(1600), lambda s, n: S(n), [200, 400, 800, 1600], "prompts", [GateCallSpec("g", "floor", ())],
                  {"g": Bound("min", 0.85)}, 1e-3, raw=lambda s, m, kw: getattr(s, m)(**kw),
                  group_methods={"floor": ("self", "cleared")})
    out = loop.indicator("floor", {"cleared": None})
    assert seen[0] == (200, ()) and all("a" in c for n, c in seen[1:])  # "a" cleared at the first look
    assert out.sequential.reason is Reason.FINAL and out.sequential.cleared_groups == ["a"]
    assert out.evidence.labels == ("b", "c") and out.evidence.selection == 3  # c measured, a counted


def _suite(pytester, thresholds: dict[str, float]):
    (pytester.path / "fairness_tests").mkdir(exist_ok=True)
    (pytester.path / "fairness_tests" / "test_cis.py").write_text((REPO / "fairness_tests" / "test_cis.py").read_text())
    lines = ["gates:" + ("" if thresholds else " {}")] + [f"  {g}:\n    min: {v!r}" for g, v in thresholds.items()]
    (pytester.path / "t.yaml").write_text("\n".join(lines) + "\n")


def _run(pytester, *extra, art: str):
    args = ["fairness_tests", "--t2i-model", "procedural", "--t2i-no-progress", "-p", "no:cacheprovider",
            "-p", "no:randomly", "--t2i-cis-k", "1,2,4", "--t2i-cis-prompts", "64", "--t2i-cis-images", "4",
            "-k", "test_cis and not order and not drop and not rate", "--t2i-thresholds", str(pytester.path / "t.yaml"),
            "--t2i-cache-dir", str(pytester.path / "cache"), "--t2i-artifacts", str(pytester.path / art), *extra]
    result = pytester.runpytest_inprocess(*args)
    records = {r["gate"]: r for r in json.loads((pytester.path / art / "run.json").read_text())["gates"]}
    return result, records


def _generated(result) -> int:
    return int(next(line for line in result.stdout.lines if line.startswith("images: ")).split()[1])


def test_a_sequential_cis_run_stops_clear_gates_early_and_is_the_fixed_n_gate_at_n(pytester):
    # K=4's bound: its fixed-N estimate, so that it neither fails nor clears early and runs to N
    _suite(pytester, {"test_cis[k1]": 0.05, "test_cis[k2]": 0.99, "test_cis[k4]": 0.0})
    _, probe = _run(pytester, art="probe", )
    at_n = probe["test_cis[k4]"]["value"]
    _suite(pytester, {"test_cis[k1]": 0.05, "test_cis[k2]": 0.99, "test_cis[k4]": at_n})
    # the sequential run first on a cold cache (what it generates is what it needed), then fixed N
    import shutil

    shutil.rmtree(pytester.path / "cache")
    seq, seq_records = _run(pytester, "--t2i-sequential", art="seq")
    fixed, fixed_records = _run(pytester, art="fixed")
    assert {g: r["status"] for g, r in fixed_records.items()} == {
        "test_cis[k1]": "pass", "test_cis[k2]": "fail", "test_cis[k4]": "pass"}
    # the border gate stops where its look's estimate (0.515) is just off its bound (0.521) without evidence: it says
    # "inconclusive" (a warning), as a fixed-N run whose estimate missed would; neither fails the run
    assert {g: r["status"] for g, r in seq_records.items()} == {
        "test_cis[k1]": "pass", "test_cis[k2]": "fail", "test_cis[k4]": "inconclusive"}
    assert seq.ret == fixed.ret == pytest.ExitCode.TESTS_FAILED
    passing, failing, border = (seq_records[f"test_cis[k{k}]"]["details"]["sequential"] for k in (1, 2, 4))
    assert passing["reason"] in ("pass: futility", "pass: curtailed") and passing["early"] and passing["unit"] == "prompts"
    assert failing["reason"] == "fail: alpha spent at this look" and failing["early"]
    assert passing["at"] < 64 and failing["at"] < 64 and passing["planned"] == failing["planned"] == 64
    assert seq_records["test_cis[k1]"]["details"]["prompts"] == passing["at"]  # the look's prompts, all images
    # the border gate (bound at its own fixed-N estimate) cannot catch a meaningful miss at N (power 0.0002 at 0.10):
    # it passes by curtailment once the prompts left cannot move its estimate far enough, judged at the largest miss
    # its look's limit leaves possible (0.13 here, beyond the meaningful 0.10)
    assert border["reason"] == "pass: curtailed" and border["at"] < 64
    assert border["conditional_power"] < border["curtail_gamma"] and border["curtail_miss"] > 0.10
    assert "passed early by curtailment" in seq_records["test_cis[k4]"]["message"]
    assert "sequential" not in fixed_records["test_cis[k4]"]["details"]
    # the fixed-N run after it still had the prompts the early gates never asked for to make
    assert _generated(fixed) == (64 - passing["at"]) * 4 + (64 - failing["at"]) * 4 + (64 - border["at"]) * 4


# -- the order test: futility only (never an early fail), over a prefix of its prompts ---------------------------------


def test_a_look_s_order_test_is_the_fixed_n_order_test_of_a_prefix_of_its_prompts(tmp_path):
    from t2i_fairness.families.cis import FAMILY
    from t2i_fairness.families.cis.options import CisOptions
    from t2i_fairness.families.cis.study import CisStudy

    bench = _bench(tmp_path)
    try:
        study = CisStudy(bench, CisOptions(ks=(1, 2), prompts=32, images=2, order_prompts=12))
        assert study.order_size == 12
        for m in (2, 8, 16):
            look = FAMILY.look(study, m)
            p = math.ceil(12 * m / 32)  # the CIS look's share of the order prompts: 1, 3, 6
            alone = CisStudy(bench, CisOptions(ks=(1, 2), prompts=32, images=2, order_prompts=p))
            assert look.order_size == p and look.requests("order") == alone.requests("order")
            assert look.order().original.prompts == alone.order().original.prompts == study.order().original.prompts[:p]
            a, b = look.raw_indicator("cis_order_invariance", {"level": 0.05}), alone.raw_indicator(
                "cis_order_invariance", {"level": 0.05})
            assert (a.kind, a.value, a.n) == (b.kind, b.value, b.n) and a.kind == "test"
            if a.evidence is not None:  # the effect sizes the futility rule reads: the prefix's rows of N's
                assert (a.evidence.values == b.evidence.values).all()
    finally:
        bench.close()


def _order_loop(effect: float, prompts: int = 2000, seed: int = 0):
    """The round loop over a simulated order study (K = 4, 16 images, inclusion Beta(2, 2) by prompt and component):
    the gate's indicator as the study makes it (its test a stand-in p: the loop never fails a test early)."""
    import numpy as np

    from t2i_fairness.gating.indicator import Indicator
    from t2i_fairness.gating.rounds import GateCallSpec, Rounds
    from t2i_fairness.gating.thresholds import Bound
    from t2i_fairness.metrics.cis import order_effect, simulate_order_study
    from t2i_fairness.metrics.decisions import HypothesisTest

    rng = np.random.default_rng(seed)
    arrays = simulate_order_study(rng.beta(2, 2, size=(prompts, 4)), 16, rng, effect)

    class S:
        def __init__(self, p):
            self.p = p

        def order(self, level):
            a, b, o = (x[: self.p] for x in arrays)
            return Indicator(1e-12, 2 * self.p * 16, "test", order_effect(a, b, o),
                             test=HypothesisTest(1e-12, "order changes nothing", "stand-in", 0.0, None))

    looks = [prompts // 16, prompts // 8, prompts // 4, prompts // 2, prompts]
    return Rounds(S(prompts), lambda s, p: S(p), looks, "prompts", [GateCallSpec("o", "order", (("level", 1e-4),))],
                  {"o": Bound("max", 0.0)}, 1e-4, raw=lambda s, m, kw: getattr(s, m)(**kw)
                  ).indicator("order", {"level": 1e-4}).sequential


def test_the_order_test_passes_early_by_futility_without_an_effect_and_never_fails_early():
    from t2i_fairness.gating.sequential import Reason

    null = _order_loop(0.0)
    assert null.reason is Reason.FUTILITY and null.at < 2000 and null.futility_miss == 0.05
    assert null.futility_limit < 0.05 and null.kind == "test"
    # the effect its report states power against (first-named 0.2 above the last): no futility; its p-value at every
    # look is tiny (a stand-in 1e-12), yet a test never fails early: the test at N decides at its whole level
    strong = _order_loop(0.2)
    assert strong.reason is Reason.FINAL and strong.at == 2000 and strong.alpha_share == 1.0


def test_an_early_futility_pass_of_a_test_says_what_it_promises():
    from t2i_fairness.gating.gate import early_record
    from t2i_fairness.gating.session import GateRecord

    r = GateRecord("test_cis_order_invariance", "t::o", 0.7, 2016, "min", "pass", None, None,
                   "test_cis_order_invariance: H0 shuffling ... p = 0.7", {})
    seq = {"kind": "test", "reason": "pass: futility", "round": 4, "rounds": 5, "unit": "prompts", "at": 5000,
           "planned": 10000, "p": 0.7, "level": 1e-9, "gate_level": 3.5e-5, "alpha_share": 1e-5, "p_sequential": None,
           "futility_limit": 0.031, "futility_miss": 0.05, "futility_beta": 0.00125}
    e = early_record(r, seq, None)
    assert e.status == "pass" and not e.blocking
    assert "passed early by futility at look 4 of 5 (5000 of 10000 prompts)" in e.message
    assert "0.0310 < 0.05" in e.message and "at most 0.0013 of the time" in e.message
    assert "never fails before N" in e.message


def test_the_order_test_joins_the_round_loop_in_a_sequential_run_and_is_the_fixed_n_test_at_n(pytester):
    # no bound in the thresholds file (a test has none): the loop holds it against "no effect" at the run's level; at 32
    # prompts x 2 images no look can clear an effect of 0.05, so it runs to N, where it is the fixed-N test
    _suite(pytester, {})
    common = ["fairness_tests", "--t2i-model", "procedural", "--t2i-no-progress", "-p", "no:cacheprovider",
              "-p", "no:randomly", "--t2i-cis-k", "1,2", "--t2i-cis-prompts", "32", "--t2i-cis-images", "2",
              "--t2i-cis-order-prompts", "32", "-k", "order_invariance", "--t2i-thresholds", str(pytester.path / "t.yaml"),
              "--t2i-cache-dir", str(pytester.path / "cache")]
    records = {}
    for art, extra in (("seq", ["--t2i-sequential"]), ("fixed", [])):
        result = pytester.runpytest_inprocess(*common, "--t2i-artifacts", str(pytester.path / art), *extra)
        assert result.ret == pytest.ExitCode.OK, result.stdout.str()
        records[art] = {r["gate"]: r for r in json.loads((pytester.path / art / "run.json").read_text())["gates"]}
    s, f = records["seq"]["test_cis_order_invariance"], records["fixed"]["test_cis_order_invariance"]
    seq = s["details"]["sequential"]
    assert seq["kind"] == "test" and seq["reason"] == "ran to N" and seq["at"] == seq["planned"] == 32
    assert seq["alpha_share"] == 1.0 and seq["level"] == seq["gate_level"]  # never failed early: its whole level at N
    assert (s["status"], s["value"], s["n"], s["p_value"]) == (f["status"], f["value"], f["n"], f["p_value"])
    assert "sequential" not in f["details"]


def test_a_report_reads_the_images_its_family_s_gates_made(pytester, tmp_path):
    # Decomposed-DIG's object precision gates pass early (bounds at 0, a share's edge: no outcome at N can fail them,
    # curtailed); the diagnostics report (no indicator) then reads the last look they reached (Rounds.reached) and
    # generates nothing more
    (pytester.path / "fairness_tests").mkdir()
    for name in ("test_decomposed_dig.py", "conftest.py"):
        if (REPO / "fairness_tests" / name).exists():
            (pytester.path / "fairness_tests" / name).write_text((REPO / "fairness_tests" / name).read_text())
    common = ["fairness_tests", "--t2i-model", "procedural", "--t2i-no-progress", "-p", "no:cacheprovider", "-p",
              "no:randomly", "--t2i-objects", "bag", "--t2i-images-per-prompt", "8", "--t2i-batch-size", "2",
              "--t2i-sequential", "--t2i-thresholds", str(pytester.path / "t.yaml")]
    regions = ("americas", "east_asia", "southeast_asia")  # the synthetic reference's regions with a manifold at k = 3
    (pytester.path / "t.yaml").write_text("gates:\n" + "".join(
        f"  test_obj_precision[synthetic-object_in_region-{r}]:\n    min: 0.0\n" for r in regions))
    made = {}
    for name, select in (("gates", "test_obj_precision and object_in_region"),
                         ("both", "(test_obj_precision or decomposed_diagnostics) and object_in_region")):
        result = pytester.runpytest_inprocess(*common, "-k", select, "--t2i-cache-dir", str(tmp_path / name),
                                              "--t2i-artifacts", str(tmp_path / f"art-{name}"))
        assert result.ret == pytest.ExitCode.OK, result.stdout.str()
        made[name] = _generated(result)
        gates = json.loads((tmp_path / f"art-{name}" / "run.json").read_text())["gates"]
        assert len(gates) == 3 and all(g["details"]["sequential"]["reason"] == "pass: curtailed" for g in gates)
        assert all(g["details"]["sequential"]["at"] < 8 for g in gates)
    assert made["both"] == made["gates"]  # the report added no image
