"""``--t2i-sequential`` in every report (issue 24, item 5): terminal summary, run.json, JUnit, HTML, Allure.

Each gate's record carries ``details["sequential"]`` made by the code the gates use
(:func:`~t2i_fairness.gating.sequential.decide_look` and
:func:`~t2i_fairness.gating.sequential.look_record`, or the gate's ``_ran_to_n`` for kinds never looked
at before ``N``); the round driver is not needed to build them, so these are unit-level checks of
the report layer. Without a sequential record every output is byte for byte what the report layer
made before the block existed (``tests/golden/sequential_reports_off.json``, from commit 278000b).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sequential_reports_golden import GOLDEN, allure_calls, off_session, outputs
from t2i_fairness.gating.gate import _ran_to_n
from t2i_fairness.gating.sequential import Sweeps, decide_look, e_threshold, look_record, stopped_verdict
from t2i_fairness.gating.session import GateRecord, GateSession, record_json
from t2i_fairness.gating.thresholds import Bound
from t2i_fairness.report.ci import junit_properties, run_json, step_summary
from t2i_fairness.report.html import render_report
from t2i_fairness.report.junit import run_properties
from t2i_fairness.report.sequential import EARLY_LIMIT, sequential_lines, sequential_summary
from t2i_fairness.report.terminal import GateReport

ALPHA, M = 0.05, 475
BOUND = Bound("min", 0.5)


def _gate(gate: str, value: float, kind: str = "share", sweeps: Sweeps | None = Sweeps(200, 4, 64), rounds: int = 5,
          at_round: int = 1) -> GateRecord:
    """A gate record as ``Gate._sequential`` makes it: the sequential record in details; early stops with
    the stopped verdict's status and p = 1 / wealth, the rest judged at N (here: a plain p-value)."""
    if sweeps is None:
        seq = _ran_to_n(kind)
    else:
        lk = decide_look(kind, value, sweeps, BOUND, alpha=ALPHA, family_size=M, rounds=rounds)
        seq = look_record(lk, kind, at_round=at_round, rounds=rounds, sweeps=sweeps, threshold=e_threshold(ALPHA, M))
    if seq.get("early"):
        status, message, p = stopped_verdict(gate, value, seq, BOUND)
    else:
        status, message, p = ("pass" if value >= BOUND.value else "fail"), f"{gate}: at N", 0.2
    return GateRecord(gate, f"fairness_tests/test_x.py::{gate}", value, 800, "min", status, BOUND.value, None, message,
                      {"seed": 0}, interval=[value - 0.05, value + 0.05], family="cis", p_value=p,
                      details={"sequential": seq})


def _session(records: list[GateRecord], planned: int | None = 100_000) -> GateSession:
    s = GateSession(Path("thresholds/t.yaml"), sequential={"alpha": ALPHA, **({"planned_images": planned} if planned else {})})
    s.records += records
    s.cache.generated, s.cache.from_cache = 3_000, 200
    s.adjust("holm", ALPHA / 2)  # what finish does under --t2i-sequential
    return s


def _mix() -> list[GateRecord]:
    """One gate per reason and kind: an early fail, a bound met, a futility pass, a share gate that ran
    to N after its looks, a coverage pass (nested), and a ratio gate never looked at before N."""
    return [
        _gate("test_a[fail]", 0.30),
        _gate("test_a[met]", 0.80),
        _gate("test_a[futile]", 0.50, sweeps=Sweeps(100, 8, 16), rounds=3, at_round=2),
        _gate("test_a[full]", 0.52, sweeps=Sweeps(200, 64, 64), at_round=5),
        _gate("test_cov[africa]", 0.70, kind="coverage", sweeps=Sweeps(9, 4, 16), rounds=3),
        _gate("test_ratio[africa]", 0.90, kind="ratio", sweeps=None),
    ]


def test_the_records_are_the_gates_own():
    """The fixtures are what the gate code makes: each reason once, p = 1 / wealth on early stops."""
    reasons = {r.gate: r.details["sequential"]["reason"] for r in _mix()}
    assert reasons == {"test_a[fail]": "fail: bound excluded", "test_a[met]": "pass: bound met with certainty",
                       "test_a[futile]": "pass: futility", "test_a[full]": "ran to N",
                       "test_cov[africa]": "pass: bound met with certainty", "test_ratio[africa]": "ran to N"}
    fail = _mix()[0]
    assert fail.status == "fail" and fail.p_value == pytest.approx(1 / fail.details["sequential"]["wealth"])


def test_terminal_summary_has_the_sequential_block():
    lines = GateReport(_session(_mix())).lines()
    assert "-- sequential (--t2i-sequential) --" in lines, lines
    block = lines[lines.index("-- sequential (--t2i-sequential) --"):]
    method = block[1]
    assert method.startswith("method: early fails: per-gate normal-mixture e-process against m/(alpha/2) = 19000 "
                             "(Bonferroni at alpha/2 = 0.025 over the run's m = 475 gates, anytime-valid by Ville)")
    assert "the fixed-N test at alpha/2 = 0.025 with Holm over all 6 gates, early stops counted with p = 1" in method
    assert block[2] == ("reasons: 1 fail: bound excluded, 2 pass: bound met with certainty, 1 pass: futility, "
                        "2 ran to N")
    # per kind: images per prompt at stopping x prompts, summed over the kind's gates
    # share: 4x200 + 4x200 + 8x100 + 64x200 = 15,200 of 64x200x3 + 16x100 = 40,000
    assert "  share: 4 gates (3 early): 15,200 of 40,000 images (38%)" in block
    assert "  coverage: 1 gate (1 early): 36 of 144 images (25%)" in block
    assert "  ratio: 1 gate (0 early): ran to N (sizes not recorded)" in block
    early = block[block.index("early stops (4):") + 1:][:4]
    assert early == [
        "  test_a[fail]: fail: bound excluded at round 1 of 5, 4 of 64 images per prompt, sequence [0.2425, 0.3575]",
        "  test_a[met]: pass: bound met with certainty at round 1 of 5, 4 of 64 images per prompt, sequence "
        "[0.7425, 0.8575]",
        "  test_cov[africa]: pass: bound met with certainty at round 1 of 3, 4 of 16 images per prompt",
        "  test_a[futile]: pass: futility at round 2 of 3, 8 of 16 images per prompt, sequence [0.4458, 0.5542]",
    ]
    assert ("images used this run: 3,200 (3,000 generated, 200 from the cache of earlier runs) of the fixed-N plan's "
            "100,000 (3%; generated 3%)") in block
    assert not any(line.startswith("  test_a[full]") or line.startswith("  test_ratio") for line in block)


def test_terminal_says_when_the_fixed_n_plan_is_unknown_and_gives_generation_time():
    s = _session(_mix(), planned=None)
    assert sequential_lines(s)[-1] == ("images used this run: 3,200 (3,000 generated, 200 from the cache of earlier "
                                       "runs); the fixed-N plan's total is not recorded for this run "
                                       "(`t2i-fairness plan` prints it)")
    s = _session(_mix(), planned=100_000)
    s.sequential["generation_seconds"] = 60.0
    assert sequential_lines(s)[-1] == ("generation time this run: 60.0 s; the fixed-N plan at this run's rate: "
                                       "2,000.0 s (extrapolated, every image generated)")


def test_the_block_stays_compact_for_475_gates():
    records = [_gate(f"test_a[f{i:03d}]", 0.30) for i in range(30)]
    records += [_gate(f"test_a[m{i:03d}]", 0.80) for i in range(200)]
    records += [_gate(f"test_r[{i:03d}]", 0.9, kind="ratio", sweeps=None) for i in range(M - 230)]
    s = _session(records)
    block = sequential_lines(s)
    assert len(block) <= EARLY_LIMIT + 10, len(block)
    shown = [line for line in block if line.startswith("  test_a[")]
    assert len(shown) == EARLY_LIMIT and all("fail: bound excluded" in line for line in shown)  # fails first
    assert f"  ... and {230 - EARLY_LIMIT} more (run.json)" in block
    assert "Holm over all 475 gates" in block[1]
    assert len(run_json(s)["sequential"]["early_stops"]) == 230  # run.json has every one


def test_run_json_has_the_sequential_object():
    s = _session(_mix())
    data = json.loads(json.dumps(run_json(s), allow_nan=False))  # strict JSON
    seq = data["sequential"]
    assert seq["alpha"] == ALPHA and seq["alpha_early_fails"] == seq["alpha_fixed_n"] == ALPHA / 2
    assert seq["e_threshold"] == 19000 and seq["gates_early_fail_family"] == M and seq["multiplicity"] == "holm"
    assert seq["method"].startswith("early fails: per-gate normal-mixture e-process")
    assert seq["reasons"] == {"fail: bound excluded": 1, "pass: bound met with certainty": 2, "pass: futility": 1,
                              "ran to N": 2}
    assert seq["kinds"]["share"] == {"gates": 4, "early": 3, "sized": 4, "images": 15_200, "planned_images": 40_000,
                                     "share_of_planned": 0.38}
    assert seq["kinds"]["ratio"]["sized"] == 0 and seq["kinds"]["ratio"]["share_of_planned"] is None
    assert (seq["images_used"], seq["generated"], seq["from_cache"], seq["planned_images"]) == (3200, 3000, 200, 100_000)
    assert (seq["share_of_planned"], seq["generated_share_of_planned"]) == (0.032, 0.03)
    assert [e["gate"] for e in seq["early_stops"]] == ["test_a[fail]", "test_a[met]", "test_cov[africa]", "test_a[futile]"]
    by_gate = {g["gate"]: g for g in data["gates"]}  # the per-gate records carry theirs
    assert by_gate["test_a[futile]"]["details"]["sequential"]["images_per_prompt"] == 8


def test_records_from_xdist_workers_give_the_same_block():
    """A worker sends each record as strict JSON text (report property); the controller's session reads it
    back (``GateSession.add``): the block is the same, an infinite wealth included."""
    records = _mix()
    records[0].details["sequential"]["wealth"] = float("inf")
    direct = _session(records)
    via = GateSession(Path("thresholds/t.yaml"), sequential=dict(direct.sequential))
    for r in records:
        via.add(record_json(r.to_dict()))
    via.cache.generated, via.cache.from_cache = 3_000, 200
    via.adjust("holm", ALPHA / 2)
    assert sequential_lines(via) == sequential_lines(direct)
    assert sequential_summary(via)["kinds"] == sequential_summary(direct)["kinds"]


def test_github_step_summary_has_the_run_block():
    text = step_summary(_session(_mix()))
    assert "<details><summary>sequential (--t2i-sequential)</summary>" in text
    assert "reasons: 1 fail: bound excluded, 2 pass: bound met with certainty" in text
    assert "of the fixed-N plan's 100,000 (3%; generated 3%)" in text
    assert "early stops (" not in text and "more (run.json)" not in text  # the gate table and run.json have the gates


def test_junit_properties_per_gate_and_for_the_run():
    fail, *_, ratio = _mix()
    props = dict(junit_properties(fail.to_dict(), "thresholds/t.yaml:3"))
    assert props["t2i_sequential_reason"] == "fail: bound excluded"
    assert props["t2i_sequential_round"] == "1/5"
    assert props["t2i_sequential_images"] == "4/64 per prompt"
    assert props["t2i_sequential_kind"] == "share"
    assert props["verdict"] == "fail"
    props = dict(junit_properties(ratio.to_dict(), None))
    assert (props["t2i_sequential_reason"], props["t2i_sequential_kind"]) == ("ran to N", "ratio")
    assert "t2i_sequential_round" not in props and "t2i_sequential_images" not in props  # never looked at
    run = dict(run_properties(_session(_mix())))
    seq = json.loads(run["t2i_sequential"])
    assert seq["reasons"]["pass: futility"] == 1 and seq["planned_images"] == 100_000 and "early_stops" not in seq


def test_html_has_a_sequential_column_and_block():
    page = render_report(_session(_mix()), Path("none"), "demo", {"model": "tiny"})
    head = page[page.index('<table id="gate-table">'):page.index("</thead>")]
    assert "power</th><th>sequential</th><th>estimate vs bound</th>" in head
    cells = re.findall(r'<td class="sequential"[^>]*>(.*?)</td>', page)
    assert len(cells) == 6
    assert ('fail: bound excluded<div class="hint">round 1 of 5, 4 of 64 images per prompt, sequence '
            '[0.2425, 0.3575]</div>') in cells
    assert any(c.startswith("ran to N") and "no valid early stop for a ratio gate" in c for c in cells)
    assert '<section id="sequential"><h2>Sequential</h2>' in page and 'href="#sequential"' in page
    section = page[page.index('<section id="sequential">'):]
    assert "reasons: 1 fail: bound excluded" in section and "fixed-N plan&#x27;s 100,000" in section
    rows = re.findall(r'<tr class="gate[^"]*"[^>]*data-search="([^"]*)"', page)
    assert any("pass: futility" in row for row in rows)  # the filter box finds gates by reason


def test_allure_gets_the_sequential_parameters_and_tag():
    fail = _mix()[0]
    calls = allure_calls(fail.to_dict())
    params = {c[1][0]: (c[1][1], c[2]) for c in calls if c[0] == "parameter"}
    assert params["'sequential reason'"] == ("fail: bound excluded", {"excluded": "True"})
    assert params["'sequential round'"][0] == "1/5"
    assert params["'sequential images'"][0] == "4/64 per prompt"
    assert params["'sequential kind'"][0] == "share"
    assert ["tag", ["'sequential:fail: bound excluded'"], {}] in calls


def test_without_sequential_every_output_is_unchanged():
    """The report layer's bytes for a run without --t2i-sequential: the golden file (made before the sequential
    block existed, commit 278000b; remade when a feature of every run changes the reports, last for the power
    column of issue #28)."""
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    now = json.loads(json.dumps(outputs(off_session())))
    for name in golden:
        assert now[name] == golden[name], name
    # the comparison sees a sequential record slipping in
    s = off_session()
    s.records[0].details["sequential"] = _ran_to_n("share")
    changed = json.loads(json.dumps(outputs(s)))
    assert {name for name in golden if changed[name] != golden[name]} == {"terminal", "run_json", "step_summary", "junit",
                                                                          "junit_run", "html", "allure"}


def test_the_docs_show_the_block_this_code_prints():
    """docs/sequential-reports.md quotes the block of ``_mix()``: it must be what the code prints."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "sequential-reports.md").read_text(encoding="utf-8")
    quoted = re.search(r"```text\n(.*?)\n```", doc, flags=re.S).group(1).splitlines()
    assert quoted == sequential_lines(_session(_mix()))


# -- end to end: the plugin's sessions, with and without xdist ------------------------------------------

SEQ_GATES = """
import numpy as np
import pytest


@pytest.mark.parametrize("region", ["africa", "europe", "east_asia"])
def test_region(region, t2i, gate):
    refs = [r for row in t2i.images([f"a bag in {region}"], 4) for r in row]
    gate(float(np.mean([np.asarray(r.load()).mean() for r in refs])) / 255, n=len(refs))
"""


def test_a_sequential_run_reports_the_block_the_same_with_and_without_xdist(pytester, monkeypatch):
    """Through the plugin: every gate's record carries its sequential record (these test functions are in
    no family, so they declare no kind and run to N), the controller's summary has the block, run.json
    its object and the JUnit XML each gate's properties, whether the records came from xdist workers or not."""
    import os
    import xml.etree.ElementTree as ET

    from demo_gates import RUN_FLAGS

    pytester.makepyfile(test_seq=SEQ_GATES, fakegen=(Path(__file__).resolve().parent / "fakegen.py").read_text())
    for var in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(pytester.path), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    args = ["-p", "xdist", "--t2i-model", "python:fakegen:make", "--t2i-device", "cpu", "--t2i-no-progress",
            "--t2i-thresholds", str(pytester.path / "t.yaml"), "--t2i-cache-dir", str(pytester.path / "cache"), *RUN_FLAGS]
    first = pytester.runpytest_subprocess(*args, "--t2i-update-thresholds", "-n", "0", timeout=300)
    first.assert_outcomes(passed=3)
    assert "-- sequential" not in first.stdout.str()
    blocks = {}
    for n in ("0", "2"):
        art = pytester.path / f"art{n}"
        result = pytester.runpytest_subprocess(*args, "--t2i-sequential", "-n", n, "--t2i-artifacts", str(art),
                                               "--junitxml", str(art / "junit.xml"), timeout=300)
        result.assert_outcomes(passed=3)
        lines = result.stdout.str().splitlines()
        start = lines.index("-- sequential (--t2i-sequential) --")
        end = next(i for i in range(start, len(lines)) if lines[i].startswith("images used this run"))
        blocks[n] = lines[start:end + 1]
        data = json.loads((art / "run.json").read_text())
        assert data["sequential"]["reasons"]["ran to N"] == 3 and data["sequential"]["alpha"] == 0.05
        assert (data["sequential"]["generated"], data["sequential"]["from_cache"]) == (0, 12)  # the first run's cache
        cases = ET.parse(art / "junit.xml").getroot().iter("testcase")
        props = [{p.get("name"): p.get("value") for p in case.iter("property")} for case in cases]
        assert sorted(p["t2i_sequential_reason"] for p in props) == ["ran to N"] * 3
        assert {p["t2i_sequential_kind"] for p in props} == {"undeclared"}
    assert blocks["2"] == blocks["0"]
    assert "reasons: 0 fail: bound excluded, 0 pass: bound met with certainty, 0 pass: futility, 3 ran to N" in blocks["0"]
    assert "  undeclared: 3 gates (0 early): ran to N (sizes not recorded)" in blocks["0"]
    assert blocks["0"][-1].startswith("images used this run: 12 (0 generated, 12 from the cache of earlier runs)")
