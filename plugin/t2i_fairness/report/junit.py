"""The JUnit XML (``--junitxml``) tells the run's truth, as the terminal, HTML report and ``run.json`` do.

pytest writes a test cut off by an interruption as a nameless ``<testcase/>`` counted nowhere, so
an interrupted run reads green. :func:`mark_run` (given pytest's ``LogXML`` before it writes) names
each interrupted test as an error, adds testsuite properties (``t2i_verdict``, ``t2i_provenance``,
``t2i_sequential``, ...), and adds a ``t2i-fairness :: run verdict`` error when the run did not pass
but the XML holds no failure (docs/outputs.md). No pytest import.
"""

from __future__ import annotations

import json
from typing import Any

from t2i_fairness.gating.session import strict
from t2i_fairness.report.changes import provenance_summary
from t2i_fairness.report.power import underpowered
from t2i_fairness.report.sequential import sequential_summary

__all__ = ["junit_names", "mark_run", "run_properties"]


def junit_names(nodeid: str) -> tuple[str, str]:
    """(classname, name) of a test, as pytest's JUnit writer spells them.

    Example:
        >>> junit_names("tests/test_toy.py::TestA::test_b[x-1]")
        ('tests.test_toy.TestA', 'test_b[x-1]')
    """
    parts = nodeid.split("::")
    parts[0] = parts[0].replace("/", ".")
    if parts[0].endswith(".py"):
        parts[0] = parts[0][:-3]
    return ".".join(parts[:-1]), parts[-1]


def run_properties(session, thresholds: str | None = None) -> list[tuple[str, str]]:
    """The run's testsuite-level facts: verdict, interruption, stop, provenance, thresholds file."""
    o = session.outcome
    records = [r for r in session.records if r.status != "baseline"]
    v = o.verdict(records)
    props = [("t2i_verdict", v.headline)]
    if o.interrupted:
        cut = [t.nodeid for t in o.tests.values() if t.outcome == "running"]
        props.append(("t2i_interrupted", o.interrupted + (f" during {', '.join(cut)}" if cut else "")))
    if o.stopped:
        props.append(("t2i_stopped", o.stopped))
    summary = provenance_summary(session)
    if summary is not None:
        props.append(("t2i_provenance", json.dumps(summary.to_dict())))
    sequential = sequential_summary(session)  # --t2i-sequential only: the run.json object less its early-stop list
    if sequential is not None:
        props.append(("t2i_sequential", json.dumps(strict({k: v for k, v in sequential.items() if k != "early_stops"}),
                                                   allow_nan=False)))
    weak = underpowered(records)
    if weak:  # passes their test could hardly have failed (gating.power): the count, the gates in run.json
        props.append(("t2i_underpowered", str(len(weak))))
    props.append(("t2i_thresholds", str(thresholds if thresholds is not None else session.thresholds_path)))
    return props


def mark_run(xml: Any, session, thresholds: str | None = None) -> None:
    """Make pytest's ``LogXML`` (``config.stash[_pytest.junitxml.xml_key]``) say what the run's outcome
    says, before it writes the file.
    """
    o = session.outcome
    for name, value in run_properties(session, thresholds):
        xml.add_global_property(name, value)
    for t in [t for t in o.tests.values() if t.outcome == "running"]:  # cut off by the interruption
        reporter = _reporter(xml, t.nodeid)
        classname, name = junit_names(t.nodeid)
        if getattr(xml, "prefix", None):
            classname = f"{xml.prefix}.{classname}"
        reporter.attrs.update(classname=classname, name=name)
        reason = o.interrupted or "the run was interrupted"
        reporter._add_simple("error", f"interrupted: {reason}",
                             f"{t.nodeid} was running when the run was interrupted ({reason}); it has no result, "
                             "and the tests after it did not run")
    records = [r for r in session.records if r.status != "baseline"]
    v = o.verdict(records)
    stats = getattr(xml, "stats", {})
    if not v.passed and v.word != "NO GATES" and not (stats.get("error", 0) or stats.get("failure", 0)):
        reporter = xml.node_reporter("t2i-fairness::run verdict")
        reporter.attrs.update(classname="t2i-fairness", name="run verdict")
        reporter._add_simple("error", v.headline, "\n".join([v.headline, *v.notes]))


def _reporter(xml: Any, nodeid: str):
    """The reporter pytest opened for ``nodeid`` (its setup report's duration opens one, nameless), or a new one."""
    for key, reporter in list(getattr(xml, "node_reporters", {}).items()):
        if str(key[0]) == nodeid:
            return reporter
    return xml.node_reporter(nodeid)
