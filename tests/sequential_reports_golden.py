"""Every report of one fixed run without ``--t2i-sequential``, as text: the golden file's source.

``tests/golden/sequential_reports_off.json`` holds these outputs as the report layer made them before
the sequential block existed (commit 278000b, made with
``git archive 278000b plugin | tar -x -C /tmp/old && PYTHONPATH=/tmp/old/plugin python tests/sequential_reports_golden.py``);
``tests/test_sequential_reports.py`` checks that today's code makes the same bytes. A feature of every run
that changes the reports remakes it with ``python tests/sequential_reports_golden.py`` (issue #28's power
column did), reviewing that the diff holds no sequential word. This module imports
only what that commit had, so it runs under both.
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent / "golden" / "sequential_reports_off.json"


def off_session():
    """A run without ``--t2i-sequential``: a failing, a passing, an inconclusive and an undefined gate,
    a summary section, cache counts, the run's adjustment."""
    from t2i_fairness.gating.session import GateRecord, GateSession

    s = GateSession(Path("thresholds/t.yaml"))
    s.records += [
        GateRecord("test_cis[k1]", "fairness_tests/test_cis.py::test_cis[k1]", 0.31, 1600, "min", "fail", 0.5, None,
                   "test_cis[k1]: 0.3100 below 0.5000", {"seed": 0}, interval=[0.28, 0.34], family="cis",
                   p_value=1e-9, threshold=0.05 / 4, uncertainty={"method": "wilson", "se": 0.01},
                   details={"prompts": 100}),
        GateRecord("test_region_precision[africa]", "fairness_tests/test_dig_in_region.py::test_region_precision[africa]",
                   0.71, 216, "min", "pass", 0.5, None, "ok", {"seed": 0}, interval=[0.65, 0.77], family="dig_in",
                   p_value=0.9999, threshold=0.05 / 4, uncertainty={"method": "wilson", "se": 0.03}),
        GateRecord("test_region_coverage[africa]", "fairness_tests/test_dig_in_region.py::test_region_coverage[africa]",
                   0.48, 216, "min", "inconclusive", 0.5, None, "test_region_coverage[africa]: inconclusive",
                   {"seed": 0}, interval=[0.40, 0.56], family="dig_in", p_value=0.3, threshold=0.05 / 4),
        GateRecord("test_region_disparity_precision[africa]",
                   "fairness_tests/test_dig_in_region.py::test_region_disparity_precision[africa]", float("nan"), 0,
                   "min", "fail", 0.8, None, "undefined; the gate has a bound", {"seed": 0}, family="dig_in",
                   details={"undefined": "no image"}),
    ]
    s.sections["region table"] = ["africa 0.71", "europe 0.74"]
    s.cache.generated, s.cache.from_cache = 320, 80
    s.outcome.selection.gate_tests = 4
    s.adjust("holm", 0.05)
    return s


class _FakeAllure(types.ModuleType):
    """Records what ``allure_measurement`` calls (the test and the golden file compare the calls)."""

    def __init__(self):
        super().__init__("allure")
        self.calls: list = []
        calls = self.calls

        class _Dynamic:
            def __getattr__(self, name):
                return lambda *args, **kwargs: calls.append([name, [repr(a) for a in args],
                                                             {k: repr(v) for k, v in sorted(kwargs.items())}])

        self.dynamic = _Dynamic()
        self.attachment_type = types.SimpleNamespace(JSON="json")

    def attach(self, body, name=None, attachment_type=None):
        self.calls.append(["attach", [body], {"name": name, "attachment_type": attachment_type}])


def allure_calls(record: dict) -> list:
    """What ``allure_measurement(record)`` asks of allure, with a recording stand-in for the module."""
    from t2i_fairness.report.labels import allure_measurement

    fake, old = _FakeAllure(), sys.modules.get("allure")
    sys.modules["allure"] = fake
    try:
        allure_measurement(record)
    finally:
        if old is None:
            sys.modules.pop("allure", None)
        else:
            sys.modules["allure"] = old
    return fake.calls


def outputs(session) -> dict:
    """Every report of ``session`` as JSON-able text: terminal, run.json, step summary, JUnit (per gate and
    testsuite), HTML page, Allure calls."""
    from t2i_fairness.report.ci import junit_properties, run_json, step_summary
    from t2i_fairness.report.html import render_report
    from t2i_fairness.report.junit import run_properties
    from t2i_fairness.report.terminal import GateReport

    records = [r for r in session.records if r.status != "baseline"]
    return {
        "terminal": "\n".join(GateReport(session).lines()),
        "run_json": json.dumps(run_json(session), indent=1, allow_nan=False, default=str),
        "step_summary": step_summary(session),
        "junit": [[list(p) for p in junit_properties(r.to_dict(), "thresholds/t.yaml:3")] for r in records],
        "junit_run": [list(p) for p in run_properties(session)],
        "html": render_report(session, Path("artifacts-none"), "demo", {"model": "tiny"}),
        "allure": [allure_calls(r.to_dict()) for r in records],
    }


if __name__ == "__main__":
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    GOLDEN.write_text(json.dumps(outputs(off_session()), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(GOLDEN)
