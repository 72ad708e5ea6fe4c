"""``--t2i-sequential`` in every report: terminal summary, run.json, JUnit, the GitHub summary, HTML, Allure.

Each gate's record carries ``details["sequential"]`` as the round loop makes it
(:class:`~t2i_fairness.gating.rounds.Rounds`, deciding each look with
:func:`~t2i_fairness.gating.sequential.decide_look`): the fixtures below run the real loop over toy share
and coverage studies, so these are unit-level checks of the report layer on the records the gates carry.
Without a sequential record no output says anything of it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from sequential_reports_golden import allure_calls, off_session, outputs
from t2i_fairness.gating.indicator import Indicator
from t2i_fairness.gating.rounds import GateCallSpec, Rounds
from t2i_fairness.gating.sequential import Reason
from t2i_fairness.gating.session import GateRecord, GateSession, record_json
from t2i_fairness.gating.thresholds import Bound
from t2i_fairness.metrics.intervals import precision_interval
from t2i_fairness.report.ci import junit_properties, run_json, step_summary
from t2i_fairness.report.html import render_report
from t2i_fairness.report.junit import run_properties
from t2i_fairness.report.sequential import EARLY_LIMIT, gate_line, sequential_lines, sequential_summary
from t2i_fairness.report.terminal import GateReport

ALPHA, M = 0.05, 475
BOUND = Bound("min", 0.5)
LOOKS = [64, 128, 256, 512, 1024]
#: gate -> (true share, kind): a gross miss, a clear pass, one just below its bound, coverage low and high
MIX = {"test_a[fail]": (0.20, "share"), "test_a[futile]": (0.80, "share"), "test_a[full]": (0.48, "share"),
       "test_cov[low]": (0.30, "coverage"), "test_cov[high]": (0.90, "coverage")}


class _Toy:
    """A study of ``n`` images per prompt whose gates measure a share of them."""

    def __init__(self, n: int):
        self.n = n

    def rate(self, gate: str) -> Indicator:
        p, kind = MIX[gate]
        k = int(round(p * self.n))
        return Indicator(k / self.n, self.n, kind, precision_interval(np.r_[np.ones(k, bool), np.zeros(self.n - k, bool)]),
                         grows=kind == "coverage")


def _mix(gates=MIX) -> list[GateRecord]:
    """One record per gate of ``MIX``, its sequential record made by the round loop; the status an early stop
    gives, or at N the estimate against the bound (these records' own verdicts are not under test here)."""
    loop = Rounds(_Toy(LOOKS[-1]), lambda s, n: _Toy(n), LOOKS, "images per prompt",
                  [GateCallSpec(g, "rate", (("gate", g),)) for g in gates], {g: BOUND for g in gates}, ALPHA / M,
                  raw=lambda s, m, kw: getattr(s, m)(**kw))
    out = []
    for g in gates:
        ind = loop.indicator("rate", {"gate": g})
        seq = ind.sequential
        status = "fail" if seq.reason is Reason.FAIL or (not seq.early and ind.value < BOUND.value) else "pass"
        out.append(GateRecord(g, f"fairness_tests/test_x.py::{g}", ind.value, ind.n, "min", status, BOUND.value, None,
                              f"{g}: measured {ind.value:.4f}", {"seed": 0}, family="cis", p_value=seq.p_sequential,
                              details={"sequential": seq.to_dict()}))
    return out


def _session(records: list[GateRecord], planned: int | None = 100_000) -> GateSession:
    s = GateSession(Path("thresholds/t.yaml"), sequential={"alpha": ALPHA, **({"planned_images": planned} if planned else {})})
    s.records += records
    s.cache.generated, s.cache.from_cache = 3_000, 200
    s.adjust("holm", ALPHA)
    return s


def test_the_records_are_the_round_loops():
    """The fixtures are what the round loop makes: a gross miss fails early at the alpha its look spends, a clear
    pass (share or coverage) passes by futility, a coverage below its bound cannot fail early and runs to N."""
    recs = {r.gate: r.details["sequential"] for r in _mix()}
    assert {g: s["reason"] for g, s in recs.items()} == {
        "test_a[fail]": "fail: alpha spent at this look", "test_a[futile]": "pass: futility",
        "test_a[full]": "ran to N", "test_cov[low]": "ran to N", "test_cov[high]": "pass: futility"}
    fail = recs["test_a[fail]"]
    assert fail["early"] and fail["at"] < 1024 and fail["p"] <= fail["level"] == pytest.approx(ALPHA / M * fail["alpha_share"])
    assert recs["test_a[futile]"]["futility_limit"] > BOUND.value - recs["test_a[futile]"]["futility_miss"]
    assert all(s["planned"] == 1024 and s["rounds"] == 5 and s["unit"] == "images per prompt" for s in recs.values())
    assert recs["test_a[full]"]["at"] == recs["test_cov[low]"]["at"] == 1024


def test_terminal_summary_has_the_sequential_block():
    records = _mix()
    seq = {r.gate: r.details["sequential"] for r in records}
    lines = GateReport(_session(records)).lines()
    assert "-- sequential (--t2i-sequential) --" in lines, lines
    block = lines[lines.index("-- sequential (--t2i-sequential) --"):]
    assert block[1].startswith("method: each gate's level alpha/m (Holm's first step) spent over its planned looks")
    assert block[2] == "reasons: 1 fail: alpha spent at this look, 2 pass: futility, 0 pass: curtailed, 2 ran to N"
    # per kind: the mean share of the fixed-N size at stopping, from the records
    share = np.mean([seq[g]["share_of_planned"] for g in ("test_a[fail]", "test_a[futile]", "test_a[full]")])
    cov = np.mean([seq[g]["share_of_planned"] for g in ("test_cov[low]", "test_cov[high]")])
    assert f"  share: 3 gates (2 early), {share:.0%}" in block
    assert f"  coverage: 2 gates (1 early), {cov:.0%}" in block
    early = block[block.index("early stops (3):") + 1:][:3]
    assert early == [f"  {g}: {gate_line(seq[g])}" for g in ("test_a[fail]", "test_a[futile]", "test_cov[high]")]
    assert early[0].startswith(f"  test_a[fail]: fail: alpha spent at this look at look {seq['test_a[fail]']['round']} of 5, "
                               f"{seq['test_a[fail]']['at']} of 1024 images per prompt (p ")
    assert ("images used this run: 3,200 (3,000 generated, 200 from the cache of earlier runs) of the fixed-N plan's "
            "100,000 (3%)") in block
    assert not any(line.startswith("  test_a[full]") or line.startswith("  test_cov[low]") for line in block)


def test_terminal_says_when_the_fixed_n_plan_is_unknown():
    assert sequential_lines(_session(_mix(), planned=None))[-1] == (
        "images used this run: 3,200 (3,000 generated, 200 from the cache of earlier runs)")


def test_the_block_stays_compact_for_475_gates():
    many = {f"test_a[f{i:03d}]": (0.2, "share") for i in range(30)}
    many |= {f"test_a[m{i:03d}]": (0.8, "share") for i in range(200)}
    many |= {f"test_r[{i:03d}]": (0.48, "share") for i in range(M - 230)}
    MIX.update(many)
    try:
        s = _session(_mix(many))
    finally:
        for g in many:
            del MIX[g]
    block = sequential_lines(s)
    assert len(block) <= EARLY_LIMIT + 10, len(block)
    shown = [line for line in block if line.startswith("  test_a[")]
    assert len(shown) == EARLY_LIMIT and all("fail: alpha spent" in line for line in shown)  # fails first
    assert f"  ... and {230 - EARLY_LIMIT} more (run.json)" in block
    assert len(run_json(s)["sequential"]["early_stops"]) == 230  # run.json has every one


def test_run_json_has_the_sequential_object():
    records = _mix()
    s = _session(records)
    data = json.loads(json.dumps(run_json(s), allow_nan=False))  # strict JSON
    seq = data["sequential"]
    assert seq["alpha"] == ALPHA and seq["multiplicity"] == "holm" and seq["gates"] == 5
    assert seq["method"].startswith("each gate's level alpha/m")
    assert seq["reasons"] == {"fail: alpha spent at this look": 1, "pass: futility": 2, "pass: curtailed": 0,
                              "ran to N": 2}
    assert seq["kinds"]["share"]["gates"] == 3 and seq["kinds"]["share"]["early"] == 2
    assert (seq["images_used"], seq["generated"], seq["from_cache"], seq["planned_images"]) == (3200, 3000, 200, 100_000)
    assert seq["share_of_planned"] == 0.032
    assert [e["gate"] for e in seq["early_stops"]] == ["test_a[fail]", "test_a[futile]", "test_cov[high]"]
    by_gate = {g["gate"]: g for g in data["gates"]}  # the per-gate records carry theirs
    assert by_gate["test_a[futile]"]["details"]["sequential"] == records[1].details["sequential"]


def test_records_from_xdist_workers_give_the_same_block():
    """A worker sends each record as strict JSON text (report property); the controller's session reads it
    back (``GateSession.add``): the block is the same."""
    records = _mix()
    direct = _session(records)
    via = GateSession(Path("thresholds/t.yaml"), sequential=dict(direct.sequential))
    for r in records:
        via.add(record_json(r.to_dict()))
    via.cache.generated, via.cache.from_cache = 3_000, 200
    via.adjust("holm", ALPHA)
    assert sequential_lines(via) == sequential_lines(direct)
    assert sequential_summary(via)["kinds"] == sequential_summary(direct)["kinds"]


def test_github_step_summary_has_the_run_block():
    text = step_summary(_session(_mix()))
    assert "<details><summary>sequential (--t2i-sequential)</summary>" in text
    assert "reasons: 1 fail: alpha spent at this look, 2 pass: futility, 0 pass: curtailed, 2 ran to N" in text
    assert "of the fixed-N plan's 100,000 (3%)" in text
    assert "early stops (" not in text and "more (run.json)" not in text  # the gate table and run.json have the gates


def test_junit_properties_per_gate_and_for_the_run():
    fail, _, full, *_ = _mix()
    at = fail.details["sequential"]["at"]
    props = dict(junit_properties(fail.to_dict(), "thresholds/t.yaml:3"))
    assert props["t2i_sequential_reason"] == "fail: alpha spent at this look"
    assert props["t2i_sequential_round"] == f"{fail.details['sequential']['round']}/5"
    assert props["t2i_sequential_images"] == f"{at}/1024 images per prompt"
    assert props["t2i_sequential_kind"] == "share" and props["verdict"] == "fail"
    props = dict(junit_properties(full.to_dict(), None))
    assert (props["t2i_sequential_reason"], props["t2i_sequential_round"]) == ("ran to N", "5/5")
    run = dict(run_properties(_session(_mix())))
    seq = json.loads(run["t2i_sequential"])
    assert seq["reasons"]["pass: futility"] == 2 and seq["planned_images"] == 100_000 and "early_stops" not in seq


def test_html_has_a_sequential_column_and_block():
    records = _mix()
    page = render_report(_session(records), Path("none"), "demo", {"model": "tiny"})
    head = page[page.index('<table id="gate-table">'):page.index("</thead>")]
    assert "<th>sequential</th><th>estimate vs bound</th>" in head
    cells = re.findall(r'<td class="sequential"[^>]*>(.*?)</td>', page)
    assert len(cells) == 5
    fail = records[0].details["sequential"]
    assert (f'fail: alpha spent at this look<div class="hint">look {fail["round"]} of 5, {fail["at"]} of 1024 images '
            'per prompt</div>') in cells
    assert '<section id="sequential"><h2>Sequential</h2>' in page and 'href="#sequential"' in page
    section = page[page.index('<section id="sequential">'):]
    assert "reasons: 1 fail: alpha spent at this look" in section and "fixed-N plan&#x27;s 100,000" in section
    rows = re.findall(r'<tr class="gate[^"]*"[^>]*data-search="([^"]*)"', page)
    assert any("pass: futility" in row for row in rows)  # the filter box finds gates by reason


def test_allure_gets_the_sequential_parameters_and_tag():
    fail = _mix()[0]
    calls = allure_calls(fail.to_dict())
    params = {c[1][0]: (c[1][1], c[2]) for c in calls if c[0] == "parameter"}
    assert params["'sequential reason'"] == ("fail: alpha spent at this look", {"excluded": "True"})
    assert params["'sequential round'"][0] == f"{fail.details['sequential']['round']}/5"
    assert params["'sequential kind'"][0] == "share"
    assert ["tag", ["'sequential:fail: alpha spent at this look'"], {}] in calls


def test_without_sequential_no_output_says_anything_of_it():
    """A run without --t2i-sequential: no output mentions it; one sequential record changes every output."""
    plain = json.loads(json.dumps(outputs(off_session())))
    assert not any("sequential" in json.dumps(text).lower() for text in plain.values())
    s = off_session()
    s.records[0].details["sequential"] = _mix()[2].details["sequential"]
    changed = json.loads(json.dumps(outputs(s)))
    assert {name for name in plain if changed[name] != plain[name]} == set(plain)


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
    """Through the plugin: these test functions are in no family (no study, no indicator, no round loop): they run
    to N with no sequential record; the controller's summary still has the block and says so, run.json its object,
    the same whether the records came from xdist workers or not."""
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
        assert data["sequential"]["gates_without_record"] == 3 and data["sequential"]["alpha"] == 0.05
        assert sum(data["sequential"]["reasons"].values()) == 0
        assert (data["sequential"]["generated"], data["sequential"]["from_cache"]) == (0, 12)  # the first run's cache
        cases = ET.parse(art / "junit.xml").getroot().iter("testcase")
        props = [{p.get("name"): p.get("value") for p in case.iter("property")} for case in cases]
        assert len(props) == 3 and not any(k.startswith("t2i_sequential") for p in props for k in p)
    assert blocks["2"] == blocks["0"]
    assert ("reasons: 0 fail: alpha spent at this look, 0 pass: futility, 0 pass: curtailed, 0 ran to N, 3 without a sequential record "
            "(no bound, or not a study's indicator)") in blocks["0"]
    assert blocks["0"][-1].startswith("images used this run: 12 (0 generated, 12 from the cache of earlier runs)")
