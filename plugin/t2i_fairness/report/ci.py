"""Results a CI system reads: JUnit properties as JSON, GitHub Actions annotations and step summary, run JSON.

Each gate test's JUnit properties hold its record as strict JSON (``t2i_gate``) and flat fields
(``value``, ``bound``, ``verdict``, ``thresholds`` as ``file:line``, ...). Under GitHub Actions a
failing gate becomes an ``::error`` annotation on its bound's line and the step summary gets a gate
table. ``run.json`` holds the verdict, selection, gate records, how the run decided and what
differs from the bounds' settings. Plain code; docs/reports.md describes the fields.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Mapping

from t2i_fairness.gating.outcome import OK_STATUSES
from t2i_fairness.gating.power import power_words
from t2i_fairness.report.changes import provenance_summary
from t2i_fairness.report.power import power_cell, power_summary, underpowered, verdict_suffix
from t2i_fairness.report.sequential import junit_sequential, sequential_lines, sequential_summary
from t2i_fairness.gating.session import record_from_json, record_json, strict  # noqa: F401  (re-exported)

__all__ = ["github_annotations", "junit_properties", "record_from_json", "record_json", "relative",
           "run_json", "step_summary", "strict"]

def relative(path: str | os.PathLike, root: str | os.PathLike | None) -> str:
    """``path`` relative to ``root`` when it lies under it (POSIX separators), else as given."""
    p = Path(path)
    if root is not None:
        try:
            return p.resolve().relative_to(Path(root).resolve()).as_posix()
        except (ValueError, OSError):
            pass
    return p.as_posix()


def junit_properties(record: Mapping[str, Any], thresholds: str | None = None) -> list[tuple[str, str]]:
    """The JUnit properties of one gate: the record as JSON, then the flat fields CI dashboards chart
    (``thresholds``: ``file:line`` of the gate's bound, or the file alone).

    Example:
        >>> props = dict(junit_properties({"gate": "g", "value": 0.25, "bound": 0.5, "n": 12, "status": "fail",
        ...                                "direction": "min", "interval": [0.1, 0.4]}, "t.yaml:3"))
        >>> props["value"], props["verdict"], props["thresholds"]
        ('0.25', 'fail', 't.yaml:3')
    """
    flat = strict(record)
    props = [("t2i_gate", record_json(record))]
    for key in ("value", "bound", "n", "direction"):
        props.append((key, json.dumps(flat.get(key)) if not isinstance(flat.get(key), str) else flat[key]))
    props.append(("verdict", str(record.get("status")) + verdict_suffix(record)))
    props.append(("interval", json.dumps(flat.get("interval"))))
    if record.get("power"):  # against the kind's meaningful miss at the run's per-gate level (gating.power)
        props.append(("power", power_cell(record)))
        words = power_words(record["power"], str(record.get("status")))
        if words:
            props.append(("underpowered", words))
    if thresholds:
        props.append(("thresholds", thresholds))
    props += junit_sequential(record)  # --t2i-sequential: reason, round r/R, images n/N per prompt, kind
    return props


def thresholds_ref(thresholds, gate: str, rootdir: str | os.PathLike | None = None) -> str:
    """``file:line`` of a gate's key in a :class:`~t2i_fairness.gating.thresholds.ThresholdFile`
    (the file alone when the gate has no entry yet), the file relative to ``rootdir``.
    """
    path = relative(thresholds.path, rootdir)
    line = thresholds.lines.get(gate)
    return f"{path}:{line}" if line else path


# -- GitHub Actions ---------------------------------------------------------------------------------

def _escape_data(text: str) -> str:
    return str(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(level: str, message: str, file: str | None = None, line: int | None = None, title: str | None = None) -> str:
    """One GitHub Actions workflow command (``::error file=...,line=...,title=...::message``).

    Example:
        >>> annotation("error", "measured 0.2, bound min 0.5", "thresholds/tiny.yaml", 12, "gate g[a]")
        '::error file=thresholds/tiny.yaml,line=12,title=gate g[a]::measured 0.2, bound min 0.5'
    """
    props = [(k, v) for k, v in (("file", file), ("line", line), ("title", title)) if v not in (None, "")]
    head = ",".join(f"{k}={_escape_property(str(v))}" for k, v in props)
    return f"::{level}{' ' + head if head else ''}::{_escape_data(message)}"


def github_annotations(session, rootdir: str | os.PathLike | None, lines: Mapping[str, int] | None = None) -> list[str]:
    """Annotations for a run: each failing gate on its bound's line (``lines``: gate id -> line),
    each crashed or erroring test on the test; paths relative to ``rootdir``.
    """
    lines = lines or {}
    thresholds = relative(session.thresholds_path, rootdir)
    out = []
    records = [r for r in session.records if r.status != "baseline"]
    for r in records:
        if r.status == "inconclusive":  # not a failure unless blocking (--t2i-inconclusive fail) or escalated
            level = "error" if (r.blocking or r.gate in session.escalated) else "warning"
            out.append(annotation(level, r.message or f"{r.gate}: inconclusive", thresholds, lines.get(r.gate),
                                  f"t2i gate inconclusive: {r.gate}"))
            continue
        if r.status in OK_STATUSES:
            continue
        out.append(annotation("error", r.message or f"{r.gate}: {r.status}", thresholds, lines.get(r.gate),
                              f"t2i gate {r.status}: {r.gate}"))
    for t in session.outcome.tests.values():
        if t.bad and not any(r.nodeid == t.nodeid for r in records):
            kind = session.outcome.kind(t, records)
            out.append(annotation("error", t.message or kind, t.path, t.line, f"{kind}: {t.nodeid}"))
    v = session.outcome.verdict(records)
    if not v.passed:
        out.append(annotation("error" if v.word != "NO GATES" else "warning", v.headline, title="t2i-fairness"))
    return out


def step_summary(session, limit: int = 150) -> str:
    """The Markdown GitHub shows on the run's page: verdict, selection, tests without a gate, gate table."""
    records = sorted((r for r in session.records if r.status != "baseline"),
                     key=lambda r: (r.status in OK_STATUSES, r.gate))
    v = session.outcome.verdict(records)
    icon = "✅" if v.passed else "❌"
    out = [f"### {icon} t2i-fairness: {v.headline}", "", session.outcome.selection.line() + f"; bounds from `{session.thresholds_path}`", ""]
    summary = provenance_summary(session)
    if summary is not None:  # once per run, as at the top of the terminal summary
        fields = "; ".join(f"`{f}`: {_md(a)} → {_md(b)}" for f, a, b, _ in summary.changes)
        out += [f"⚠️ {summary.gates} of {summary.total} gates were set under other settings ({fields}): "
                f"{_md(summary.meaning)}", ""]
    sequential = sequential_lines(session, limit=0)  # --t2i-sequential only: method, reasons, images (no gate lines)
    if sequential:
        out += ["<details><summary>sequential (--t2i-sequential)</summary>", "", "```",
                *[line for line in sequential[1:] if not line.startswith("early stops") and "more (run.json)" not in line],
                "```", "</details>", ""]
    odd = session.outcome.without_gate(records)
    if odd:
        out += ["| test | what happened |", "|---|---|"]
        out += [f"| `{t.nodeid}` | {_md(session.outcome.kind(t, records))}{': ' + _md(t.message) if t.message else ''} |" for t in odd[:limit]]
        out.append("")
    if records:
        weak = underpowered(records)
        if weak:
            out += [f"⚠️ {len(weak)} gate(s) underpowered: their test would catch the miss they exist for less than "
                    "half the time at the run's level (see the power column; run.json lists them)", ""]
        out += ["| verdict | gate | measured | interval | bound | n | power |", "|---|---|---:|---:|---:|---:|---:|"]
        for r in records[:limit]:
            iv = f"[{_num(r.interval[0])}, {_num(r.interval[1])}]" if r.interval else "-"
            bound = "-" if r.bound is None else f"{r.direction} {_num(r.bound)}"
            mark = "" if r.status in OK_STATUSES else "❌ "
            out.append(f"| {mark}{r.status}{verdict_suffix(r)} | `{r.gate}` | {_num(r.value)} | {iv} | {bound} | {r.n} "
                       f"| {power_cell(r)} |")
        if len(records) > limit:
            out.append(f"\n... and {len(records) - limit} more gates (the JUnit XML and the HTML report have all)")
    return "\n".join(out) + "\n"


def run_json(session) -> dict:
    """The run as JSON: verdict and selection (from pytest's outcome), gate records, tests without a gate."""
    records = [r for r in session.records if r.status != "baseline"]
    data = session.outcome.to_dict(records)
    data["thresholds"] = str(session.thresholds_path)
    data["gates"] = [strict(r.to_dict()) for r in records]
    summary = provenance_summary(session)  # once per run: what differs from the bounds' settings (None: nothing)
    data["provenance"] = strict(summary.to_dict()) if summary is not None else None
    data["decisions"] = strict({  # how the run decided: the adjustment across gates, a canary's tally
        "multiplicity": session.multiplicity, "alpha": session.alpha, "escalated": list(session.escalated),
        "canary": dict(session.canary_counts)})
    data["scorer_check"] = strict(session.scorer_check.payload()) if session.scorer_check is not None else None
    if session.history is not None:  # the run's id in the run history and what changed since the last run
        data["history"] = strict(session.history.to_dict())
    data["power"] = strict(power_summary(records))  # underpowered gates (gating.power): counted and listed
    sequential = sequential_summary(session)  # --t2i-sequential only: no key otherwise
    if sequential is not None:
        data["sequential"] = strict(sequential)
    return data


def _num(x: Any) -> str:
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return "nan" if isinstance(x, float) and math.isnan(x) else f"{x:.4f}"
    return "-" if x is None else str(x)


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def write_github_summary(text: str, environ: Mapping[str, str] | None = None) -> Path | None:
    """Append ``text`` to ``$GITHUB_STEP_SUMMARY`` when it is set; returns the file or None."""
    env = os.environ if environ is None else environ
    target = env.get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    with open(target, "a", encoding="utf-8") as fh:
        fh.write(text)
    return Path(target)


def write_run_outputs(session, options, rootdir, thresholds, allure_dir: str | None = None,
                      environ: Mapping[str, str] | None = None) -> list[Path]:
    """At session end (controller): ``run.json`` in ``--t2i-artifacts``, the GitHub step summary, and
    Allure's ``environment.properties`` with the run's verdict. Nothing for a run without gates and
    without ``--t2i-report`` (the project's own tests, a team's unrelated tests). Returns the files written."""
    from t2i_fairness.base.files import atomic_write_bytes

    env = os.environ if environ is None else environ
    gate_run = session.records or (session.outcome.selection.gate_tests and session.outcome.tests)
    if not gate_run and options.report is None:
        return []
    written = []
    try:
        path = Path(options.artifacts) / "run.json"
        atomic_write_bytes(path, (json.dumps(run_json(session), indent=1, allow_nan=False, default=str) + "\n").encode())
        written.append(path)
    except OSError as exc:  # the HTML report and the terminal still say everything; a full disk fails the run
        output_not_written(session, "run.json", exc)
    if env.get("GITHUB_ACTIONS") == "true" and session.records:
        target = write_github_summary(step_summary(session), env)
        if target is not None:
            written.append(target)
    if allure_dir and session.records:
        records = [r for r in session.records if r.status != "baseline"]
        v = session.outcome.verdict(records)
        props = {"t2i.verdict": v.headline, "t2i.selection": session.outcome.selection.line(),
                 "t2i.model": options.model, "t2i.thresholds": relative(session.thresholds_path, rootdir)}
        summary = provenance_summary(session)
        if summary is not None:  # said once per run, as in the terminal, HTML, JUnit and run.json
            props["t2i.provenance"] = (f"{summary.gates} of {summary.total} gates set under other settings ("
                                       + "; ".join(f"{f}: {a} -> {b}" for f, a, b, _ in summary.changes)
                                       + f"): {summary.meaning}")
        text = "".join(f"{k}={_escape_properties_value(v)}\n" for k, v in props.items())
        try:
            path = Path(allure_dir) / "environment.properties"
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(path, text.encode("utf-8"))
            written.append(path)
        except OSError as exc:
            output_not_written(session, "Allure environment.properties", exc)
    return written


def output_not_written(session, what: str, exc: OSError) -> None:
    """A run output a full disk could not take: one summary line, and the run fails (``write_error``)."""
    from t2i_fairness.base.files import disk_full_in

    full = disk_full_in(exc)
    if full is None:
        return
    line = f"{what} not written: {full}"
    session.notes.append(line)
    session.write_error = session.write_error or line


def _escape_properties_value(text: str) -> str:
    """A Java .properties value: backslashes, newlines and non-Latin-1 characters escaped."""
    out = str(text).replace("\\", "\\\\").replace("\n", "\\n")
    return "".join(c if ord(c) < 256 else f"\\u{ord(c):04x}" for c in out)
