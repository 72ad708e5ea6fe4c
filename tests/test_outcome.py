"""One outcome: the terminal summary, the HTML report, run.json, JUnit and CI follow pytest's own outcome.

A toy suite (fake generator, no model) with gates that pass and fail, a test that crashes before
``gate()``, a skipped test with its reason and a test that can interrupt the run with SIGINT. The
reports must never say PASSED when pytest did not pass, must name what happened, and must state
how many of the suite's tests the run selected. The browser checks use headless Chromium as
``tests/test_html_report.py`` does.
"""

from __future__ import annotations

import json
import os
import re
import signal
from html.parser import HTMLParser
from pathlib import Path

import pytest

from test_html_report import needs_chromium, open_in_chromium

SUITE = '''
"""Toy gates: some pass, one fails, one crashes before gate(), one skips, one can interrupt the run."""
import os
import signal

import pytest


@pytest.mark.parametrize("region", ["africa", "europe"])
def test_toy(region, gate):
    if region == "africa":
        gate(0.75, n=4)
    else:  # with its interval: a miss without a measured uncertainty is inconclusive, not a failure
        gate(0.25, n=4, interval=(0.2, 0.3))


def test_crash(gate):
    scores = {}
    gate(scores["africa"], n=1)  # KeyError before the gate is called


def test_skip(gate):
    pytest.skip("no reference images of stove in west_asia")


def test_last(gate):
    if os.environ.get("T2I_TEST_SIGINT"):
        # Python's handler whatever this process inherited (a guard only: the one failure seen, in a full
        # run, was not an inherited SIG_IGN: the test passes without this line under `trap '' INT`)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.kill(os.getpid(), signal.SIGINT)
    gate(0.75, n=4)
'''

THRESHOLDS = """# bounds of the toy suite
gates:
  test_toy[africa]:
    min: 0.5
  test_toy[europe]:
    min: 0.5   # europe is expected to fail here
  test_crash:
    min: 0.1
  test_last:
    min: 0.5
"""

FAKEGEN = Path(__file__).with_name("fakegen.py").read_text()
IN_PROCESS = ("-p", "no:unraisableexception", "-W", "ignore::pytest.PytestAssertRewriteWarning")


def _project(pytester: pytest.Pytester, thresholds: str = THRESHOLDS) -> list[str]:
    pytester.makepyfile(fakegen=FAKEGEN, test_toy=SUITE)
    pytester.syspathinsert()
    (pytester.path / "thr.yaml").write_text(thresholds)
    return ["--t2i-model", "python:fakegen:make", "--t2i-thresholds", "thr.yaml", "--t2i-cache-dir", "cache",
            "--t2i-artifacts", "art", "--t2i-report", "report", "--t2i-no-progress"]


class Dom(HTMLParser):
    """What a reader sees of a report: elements by id (attributes, text), the gate-table rows
    (attributes, verdict cell, name cell) and the images of each test's section."""

    def __init__(self, text: str):
        super().__init__()
        self.ids: dict[str, dict] = {}
        self.text: dict[str, str] = {}
        self.rows: list[dict] = []
        self.images: dict[str, int] = {}
        self._open: list[tuple[str, str | None]] = []
        self._article: str | None = None
        self._cell = -1
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "html":
            self.ids["<html>"] = a
        if a.get("id"):
            self.ids[a["id"]] = a
            self.text.setdefault(a["id"], "")
        if tag == "tr" and "gate" in (a.get("class") or "").split():
            self.rows.append({**a, "cells": []})
        if tag == "td" and self.rows and self._in("gate-table"):
            self.rows[-1]["cells"].append("")
        if tag == "article":
            self._article = a.get("id")
        if tag == "img" and self._article:
            self.images[self._article] = self.images.get(self._article, 0) + 1
        if tag not in ("img", "br", "wbr", "input", "meta"):
            self._open.append((tag, a.get("id")))

    def _in(self, element_id: str) -> bool:
        return any(i == element_id for _, i in self._open)

    def handle_endtag(self, tag):
        while self._open:
            t, _ = self._open.pop()
            if t == tag:
                break
        if tag == "article":
            self._article = None

    def handle_data(self, data):
        for _, i in self._open:
            if i:
                self.text[i] = self.text.get(i, "") + data
        if self.rows and self._in("gate-table") and self.rows[-1]["cells"] and not any(t == "details" for t, _ in self._open):
            self.rows[-1]["cells"][-1] += data

    def row(self, status: str) -> dict:
        return next(r for r in self.rows if r.get("data-status") == status)


def _dom(pytester) -> Dom:
    return Dom((pytester.path / "report" / "index.html").read_text())


# -- a test that crashes before gate(), a skip, a failed gate ------------------------------------------

def test_a_crash_before_gate_fails_the_verdict_and_is_named_everywhere(pytester):
    result = pytester.runpytest(*_project(pytester), *IN_PROCESS)
    result.assert_outcomes(passed=2, failed=2, skipped=1)
    result.stdout.fnmatch_lines([
        "verdict: FAILED: 2 of 5 tests failed (2 gates ok, 1 gate fail; 1 test crashed before gate(); 1 test skipped)",
        "selection: all 5 tests selected",
        "  crashed before gate(): test_toy.py::test_crash: KeyError: 'africa'",
        "  skipped: test_toy.py::test_skip: no reference images of stove in west_asia",
    ])
    dom = _dom(pytester)
    assert dom.ids["verdict"]["data-verdict"] == "FAILED" and "PASSED" not in dom.text["verdict"]
    crashed = dom.row("crashed")
    assert crashed["cells"][0].strip() == "\u2717 crashed before gate()" and "KeyError: 'africa'" in crashed["cells"][1]
    assert "no reference images of stove in west_asia" in dom.row("skipped")["cells"][1]
    run = json.loads((pytester.path / "art" / "run.json").read_text())
    assert (run["verdict"], run["passed"], run["exitstatus"]) == ("FAILED", False, 1)
    assert {(t["nodeid"], t["kind"]) for t in run["tests"]} == {
        ("test_toy.py::test_crash", "crashed before gate()"), ("test_toy.py::test_skip", "skipped"),
        ("test_toy.py::test_toy[europe]", "gate failed")}


def test_a_passing_run_says_passed_with_its_skips(pytester):
    args = _project(pytester)
    result = pytester.runpytest(*args, *IN_PROCESS, "-k", "africa or skip or last")
    result.assert_outcomes(passed=2, skipped=1, deselected=2)
    result.stdout.fnmatch_lines(["verdict: PASSED: 2 gates (2 gates ok; 1 test skipped)",
                                 "selection: 3 of 5 tests selected by -k africa or skip or last"])
    dom = _dom(pytester)
    assert dom.ids["verdict"]["data-verdict"] == "PASSED"
    assert dom.text["selection"] == "3 of 5 tests selected by -k africa or skip or last"


def test_x_stop_is_named_and_the_verdict_is_not_passed(pytester):
    result = pytester.runpytest(*_project(pytester), *IN_PROCESS, "-x", "-k", "not europe")
    result.assert_outcomes(passed=1, failed=1, deselected=1)
    result.stdout.fnmatch_lines(["verdict: FAILED: 1 of 2 tests failed (1 gate ok; 1 test crashed before gate()); "
                                 "stopped early (stopping after 1 failures); 2 selected tests did not run"])
    assert "stopped early" in _dom(pytester).text["verdict"]


def _junit(path: Path):
    """(testsuite attributes, its properties, {testcase name: [(child tag, message)]}) of a JUnit XML file."""
    import xml.etree.ElementTree as ET

    suite = ET.parse(path).getroot().find("testsuite")
    props = {p.get("name"): p.get("value") for p in suite.findall("properties/property")}
    cases = {c.get("name"): [(e.tag, e.get("message", "")) for e in c if e.tag != "properties"]
             for c in suite.findall("testcase")}
    return suite.attrib, props, cases


def test_an_x_stopped_run_is_not_green_in_junit(pytester):
    pytester.runpytest(*_project(pytester), *IN_PROCESS, "-x", "-k", "not europe", "--junitxml", "junit.xml")
    attrs, props, cases = _junit(pytester.path / "junit.xml")
    assert int(attrs["failures"]) + int(attrs["errors"]) >= 1 and cases["test_crash"][0][0] == "failure"
    assert props["t2i_verdict"].startswith("FAILED:") and props["t2i_stopped"] == "stopping after 1 failures"
    assert "t2i_interrupted" not in props and "t2i_provenance" not in props


# -- SIGINT -------------------------------------------------------------------------------------------

def _interrupted(pytester, monkeypatch, *extra: str) -> pytest.RunResult:
    monkeypatch.setenv("T2I_TEST_SIGINT", "1")
    result = pytester.runpytest_subprocess(*_project(pytester), "-p", "no:cacheprovider", *extra, timeout=300)
    assert result.ret == pytest.ExitCode.INTERRUPTED, (
        f"SIGINT in this process: {signal.getsignal(signal.SIGINT)!r}; T2I_TEST_SIGINT={os.environ.get('T2I_TEST_SIGINT')!r}\n"
        + result.stdout.str()[-2000:])
    return result


def test_a_sigint_makes_every_output_say_interrupted(pytester, monkeypatch):
    result = _interrupted(pytester, monkeypatch)
    result.stdout.fnmatch_lines(["verdict: INTERRUPTED: KeyboardInterrupt (Ctrl-C or SIGINT) after 5 of 5 tests*",
                                 "  interrupted: test_toy.py::test_last"])
    run = json.loads((pytester.path / "art" / "run.json").read_text())
    assert run["verdict"] == "INTERRUPTED" and not run["passed"] and run["exitstatus"] == 2


def test_after_a_sigint_junit_and_allure_say_interrupted_and_the_cut_off_test_is_an_error(pytester, monkeypatch):
    """CI reads JUnit: an interrupted run must not read failures=0 errors=0 with a nameless testcase."""
    pytest.importorskip("allure_pytest")
    _interrupted(pytester, monkeypatch, "--junitxml", "junit.xml", "--alluredir", "allure")
    attrs, props, cases = _junit(pytester.path / "junit.xml")
    # 5 tests: 1 pass, 2 failures (europe's gate, the crash), 1 skip, and the interrupted test as an error
    assert (attrs["tests"], attrs["failures"], attrs["errors"], attrs["skipped"]) == ("5", "2", "1", "1")
    assert None not in cases and "" not in cases  # no nameless testcase
    assert cases["test_last"] == [("error", "interrupted: KeyboardInterrupt (Ctrl-C or SIGINT)")]
    assert props["t2i_verdict"].startswith("INTERRUPTED: KeyboardInterrupt (Ctrl-C or SIGINT) after 5 of 5 tests")
    assert props["t2i_interrupted"] == "KeyboardInterrupt (Ctrl-C or SIGINT) during test_toy.py::test_last"
    results = [json.loads(p.read_text()) for p in (pytester.path / "allure").glob("*-result.json")]
    (last,) = [r for r in results if r["fullName"].endswith("#test_last")]
    assert last["status"] == "broken" and last["statusDetails"]["message"] == "interrupted: KeyboardInterrupt (Ctrl-C or SIGINT)"
    # the crash is broken too (allure's own reading of a KeyError); nothing that did not pass says passed
    assert sorted(r["status"] for r in results) == ["broken", "broken", "failed", "passed", "skipped"]
    env = (pytester.path / "allure" / "environment.properties").read_text()
    assert "t2i.verdict=INTERRUPTED" in env


@needs_chromium
def test_in_chromium_an_interrupted_run_and_a_crash_are_not_passed(pytester, monkeypatch, tmp_path):
    _interrupted(pytester, monkeypatch)
    page, console = open_in_chromium(pytester.path / "report" / "index.html", tmp_path / "profile")
    dom = Dom((pytester.path / "report" / "index.html").read_text())
    assert page.root.get("data-ready") == "1" and console == [] and json.loads(page.root["data-errors"]) == []
    live = Dom(_dump(pytester, tmp_path))
    for d in (dom, live):
        assert d.ids["verdict"]["data-verdict"] == "INTERRUPTED"
        assert d.text["verdict"].startswith("INTERRUPTED: KeyboardInterrupt")
        statuses = [r["data-status"] for r in d.rows]
        assert {"crashed", "interrupted", "skipped", "fail", "pass"} <= set(statuses)
        assert "KeyError" in d.row("crashed")["cells"][1] and "test_last" in d.row("interrupted")["cells"][1]


def _dump(pytester, tmp_path, fragment: str = "") -> str:
    """The DOM after Chromium ran the page's scripts (optionally opened at ``#fragment``)."""
    import subprocess

    from test_html_report import _chromium

    url = (pytester.path / "report" / "index.html").resolve().as_uri() + fragment
    cmd = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync",
           f"--user-data-dir={tmp_path / 'profile2'}", "--virtual-time-budget=5000", "--dump-dom", url]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@needs_chromium
def test_in_chromium_the_filter_matches_ids_and_verdicts_and_its_state_is_in_the_url(pytester, tmp_path):
    """``#gates?q=africa`` keeps Africa's row only (the details of other rows mention africa too);
    ``hide=pass`` unticks the ok box; every word must match."""
    pytester.runpytest(*_project(pytester), *IN_PROCESS)
    shown = {}
    for fragment in ("#gates?q=africa", "#gates?hide=pass,skipped", "#gates?q=toy%20fail", "#gates?q=crashed"):
        dom = Dom(_dump(pytester, tmp_path, fragment))
        shown[fragment] = sorted(r["data-search"].split()[0] for r in dom.rows if "hidden" not in r)
    assert shown == {
        "#gates?q=africa": ["test_toy[africa]"],
        "#gates?hide=pass,skipped": ["test_crash", "test_toy[europe]"],
        "#gates?q=toy%20fail": ["test_toy[europe]"],
        "#gates?q=crashed": ["test_crash"],
    }


# -- JUnit, GitHub Actions ------------------------------------------------------------------------------

def test_junit_properties_are_json_with_flat_fields_and_the_thresholds_line(pytester):
    junitparser = pytest.importorskip("junitparser")
    pytester.runpytest(*_project(pytester), *IN_PROCESS, "--junitxml", "junit.xml")
    lines = (pytester.path / "thr.yaml").read_text().splitlines()
    seen = {}
    for suite in junitparser.JUnitXml.fromfile(str(pytester.path / "junit.xml")):
        for case in suite:
            found = case.child(junitparser.Properties)
            props = {p.name: p.value for p in found} if found is not None else {}
            if "t2i_gate" not in props:
                continue
            record = json.loads(props["t2i_gate"])  # strict JSON, not a Python repr
            assert record["gate"] == case.name
            assert (json.loads(props["value"]), json.loads(props["bound"]), json.loads(props["n"])) == (
                record["value"], record["bound"], record["n"])
            path, line = props["thresholds"].rsplit(":", 1)
            assert path == "thr.yaml" and lines[int(line) - 1].strip() == f"{record['gate']}:"
            seen[case.name] = props["verdict"]
    assert seen == {"test_toy[africa]": "pass", "test_toy[europe]": "fail", "test_last": "pass"}


def test_under_github_actions_failures_are_annotated_and_summarised(pytester, monkeypatch):
    summary = pytester.path / "step-summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = pytester.runpytest(*_project(pytester), *IN_PROCESS)
    line = next(i + 1 for i, t in enumerate((pytester.path / "thr.yaml").read_text().splitlines()) if "test_toy[europe]" in t)
    result.stdout.fnmatch_lines([
        f"::error file=thr.yaml,line={line},title=t2i gate fail%3A test_toy[[]europe[]]::test_toy[[]europe[]]: *",
        "::error file=test_toy.py,line=*,title=crashed before gate()%3A test_toy.py%3A%3Atest_crash::KeyError: 'africa'",
        "::error title=t2i-fairness::FAILED: 2 of 5 tests failed*",
    ])
    text = summary.read_text()
    assert text.startswith("### \u274c t2i-fairness: FAILED: 2 of 5 tests failed")
    assert "| `test_toy.py::test_crash` | crashed before gate(): KeyError: 'africa' |" in text
    assert re.search(r"\| \u274c fail \| `test_toy\[europe\]` \| 0\.2500 \| \[0\.2000, 0\.3000\] \| min 0\.5000 \| 4 \|", text)


def test_without_github_actions_no_annotation(pytester, monkeypatch):
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    result = pytester.runpytest(*_project(pytester), *IN_PROCESS)
    assert "::error" not in result.stdout.str()


# -- the unused-gate check --------------------------------------------------------------------------

STALE = THRESHOLDS + """  test_toy[asia]:
    min: 0.5
  test_other:
    min: 0.5
"""


def test_unused_gates_are_listed_on_a_whole_suite_run(pytester):
    result = pytester.runpytest(*_project(pytester, STALE), *IN_PROCESS)
    result.stdout.fnmatch_lines(["2 gate(s) in thr.yaml were not used by any test:", "  test_other", "  test_toy[[]asia[]]"])


@pytest.mark.parametrize("selector", [
    ["-k", "toy"], ["-m", "not slow"], ["--deselect", "test_toy.py::test_last"], ["test_toy.py::test_toy"],
])
def test_no_unused_gates_on_a_partial_selection(pytester, selector):
    result = pytester.runpytest(*_project(pytester, STALE), *IN_PROCESS, *selector)
    assert "not used by any test" not in result.stdout.str()


@pytest.mark.parametrize("flag", ["--lf", "--ff"])
def test_no_unused_gates_on_lf_or_ff_runs(pytester, flag):
    args = _project(pytester, STALE)
    pytester.runpytest(*args, *IN_PROCESS)
    result = pytester.runpytest(*args, *IN_PROCESS, flag)
    assert "not used by any test" not in result.stdout.str()


def test_a_file_argument_lists_only_its_own_functions_gates(pytester):
    """``pytest test_toy.py`` can say test_toy[asia] is stale, not that other modules' gates are."""
    result = pytester.runpytest(*_project(pytester, STALE), *IN_PROCESS, "test_toy.py")
    result.stdout.fnmatch_lines(["1 gate(s) in thr.yaml were not used by any test:", "  test_toy[[]asia[]]"])


def test_a_run_that_failed_with_every_test_passed_gets_a_run_verdict_error_in_junit(tmp_path):
    """A gate only the step-down across the run rejects: every test passed, the run FAILED. The JUnit
    XML must not be green: one ``t2i-fairness`` / ``run verdict`` testcase carries the error."""
    from _pytest.junitxml import LogXML

    from t2i_fairness.gating.session import GateSession
    from t2i_fairness.report.junit import mark_run

    session = GateSession(Path("t.yaml"))
    session.add(dict(gate="g", nodeid="t.py::test_g", value=0.45, n=10, direction="min", status="inconclusive",
                     bound=0.5, write=None, message="", provenance={}))
    session.outcome.add("t.py::test_g", "call", "passed")
    session.outcome.escalated = ["g"]
    session.outcome.finish(1)
    xml = LogXML(str(tmp_path / "junit.xml"), None)
    xml.pytest_sessionstart()
    mark_run(xml, session)
    xml.pytest_sessionfinish()
    attrs, props, cases = _junit(tmp_path / "junit.xml")
    assert attrs["errors"] == "1" and props["t2i_verdict"].startswith("FAILED: 1 of 1 gates failed (1 by the step-down")
    assert cases["run verdict"] == [("error", props["t2i_verdict"])]
