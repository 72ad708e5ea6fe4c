"""The project's own HTML report (``--t2i-report DIR``): one self-contained ``DIR/index.html``.

Everything is inline (PNG artifacts as ``data:`` URIs, CSS, a little JS), so it opens from disk
and can be mailed as is. It shows the banners (smoke model, synthetic reference, what changed),
the run's settings, the gate table with intervals against bounds, a baseline delta table, the
tests' summary sections, each family's artifacts and the cache statistics (docs/reports.md).
:func:`render_report` is pure apart from reading artifacts; :func:`write_report` writes atomically.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import json
import math
import re
from pathlib import Path
from typing import Any, Iterable

from t2i_fairness.report.labels import gate_labels
from t2i_fairness.report.changes import changes_html, digest_line
from t2i_fairness.report.history import since_section, trend_cell
from t2i_fairness.report.power import power_cell, verdict_suffix
from t2i_fairness.report.sequential import record_of, sequential_lines, sequential_on, where_parts
from t2i_fairness.report.terminal import regenerated_note
from t2i_fairness.gating.session import GateRecord, GateSession

REPORT_FILE = "index.html"
FAILED = ("fail", "missing", "refused")
VERDICTS = {"pass": "ok", "fail": "FAIL", "inconclusive": "INCONCLUSIVE", "missing": "MISSING", "written": "written",
            "refused": "REFUSED"}
_ORDER = {"fail": 0, "refused": 1, "missing": 2, "inconclusive": 3, "written": 4, "pass": 5}
MAX_JSON_CHARS = 40_000
SMOKE_BANNER = ("Built-in smoke model with random weights: these numbers mean nothing about fairness. "
                "They show that the gates run end to end; gate a real model with --t2i-model.")
SYNTHETIC_BANNER = ("Reference images are synthetic (no --t2i-reference given): region precision and coverage "
                    "compare generated images with drawn shapes, not with photographs from the regions.")


def header_for(options, session: GateSession | None = None) -> tuple[dict[str, str], list[str]]:
    """The settings block and the warning banners for a run with these :class:`T2IOptions` (the
    synthetic-reference banner when some gate measured against the synthetic set without
    ``--t2i-reference``).

    Example:
        >>> from t2i_fairness.spine.options import T2IOptions
        >>> header, banners = header_for(T2IOptions())
        >>> header["model"], len(banners)
        ('tiny', 2)
    """
    from t2i_fairness.references.library import SYNTHETIC_NAME

    o = options
    header = {
        "model": o.model,
        "scorers": o.scorers,
        "objects": ", ".join(o.objects),
        "images per prompt": str(o.images_per_prompt),
        "seed": str(o.seed),
        "thresholds": str(o.thresholds),
        "gate mode": o.gate_mode,
        "intervals": f"{o.confidence:.0%} bootstrap, {o.bootstrap} resamples" if o.bootstrap else "off",
        "references": ", ".join(f"{n}={p}" for n, p in o.references) or f"{SYNTHETIC_NAME} (built in)",
        "generated": _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
    }
    banners = []
    if o.model == "tiny":
        banners.append(SMOKE_BANNER)
    if not o.references and (session is None or any(
            SYNTHETIC_NAME in gate_labels(r.nodeid).other for r in session.records)):
        banners.append(SYNTHETIC_BANNER)
    return header, banners


def render_report(session: GateSession, artifacts_dir: Path, title: str, header: dict[str, str],
                  banners: Iterable[str] = ()) -> str:
    """The report as one HTML string.

    Args:
        session: the run's gates, summary sections, artifacts and cache stats.
        artifacts_dir: the ``--t2i-artifacts`` folder the artifact paths are relative to.
        header: settings shown under the title (name -> value).
        banners: warnings shown in bold above everything else.

    Example:
        >>> from pathlib import Path
        >>> from t2i_fairness.gating.session import GateSession
        >>> s = GateSession(Path("t.yaml"))
        >>> s.add(dict(gate="test_x[a]", nodeid="t.py::test_x[a]", value=0.25, n=12, direction="min",
        ...            status="fail", bound=0.5, write=None, message="below", provenance={}, interval=[0.1, 0.4]))
        >>> "[0.1000, 0.4000]" in render_report(s, Path("art"), "demo", {"model": "tiny"})
        True
    """
    records = sorted((r for r in session.records if r.status != "baseline"), key=lambda r: (_ORDER.get(r.status, 9), r.gate))
    artifacts = _artifacts_by_test(session, Path(artifacts_dir))
    anchors = {nodeid: _anchor("test", nodeid) for nodeid in artifacts}
    body = [
        f"<header><h1>{_e(title)}</h1>",
        _outcome_block(session, records),
        *(f'<p class="banner" role="note"><strong>Note:</strong> {_e(b)}</p>' for b in banners),
        changes_html(session),
        _kv_table(header, "settings"),
        _nav(session, artifacts),
        "</header>",
        _gate_table(records, anchors, session, artifacts),
        since_section(session.history),
        _sequential_section(session),
        _baseline_table(records),
        _sections(session.sections),
        _families(session, artifacts),
        _run_notes(session),
        f'<footer>t2i-fairness report; every image and plot is inline in this file.</footer>',
    ]
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en" data-report="t2i-fairness">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title>",
        f"<script>{_ERRORS_JS}</script>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
        *[b for b in body if b],
        f"<script>{_PAGE_JS}</script>",
        "</body>",
        "</html>",
        "",
    ])


def write_report(directory: Path, session: GateSession, artifacts_dir: Path, title: str,
                 header: dict[str, str], banners: Iterable[str] = ()) -> Path:
    """Render and write ``directory/index.html`` atomically; returns its path."""
    from t2i_fairness.base.cache import atomic_write_bytes

    import os

    path = Path(directory) / REPORT_FILE
    atomic_write_bytes(path, render_report(session, artifacts_dir, title, header, banners).encode("utf-8"))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o666 & ~umask)  # readable like any file the user writes (the temporary file was 0600)
    return path


def write_run_report(options, session: GateSession) -> str:
    """The plugin's call at session end: writes this run's report to ``options.report`` and returns what
    the terminal summary prints (the file, or why it could not be written).
    """
    header, banners = header_for(options, session)
    try:
        path = write_report(options.report, session, options.artifacts, f"t2i-fairness: {options.model}", header, banners)
    except OSError as exc:
        from t2i_fairness.report.ci import output_not_written

        output_not_written(session, "HTML report", exc)
        return f"not written ({exc})"
    return str(path.resolve())


# -- parts --------------------------------------------------------------------------------------------

def _outcome_block(session: GateSession, records: list[GateRecord]) -> str:
    """The verdict as pytest decided it (gating/outcome.py), the selection, and what went wrong besides
    failed gates: crashes before ``gate()``, errors, skips with their reasons, an interruption, a stop."""
    o = session.outcome
    v = o.verdict(records)
    css = "good" if v.passed else ("none" if v.word == "NO GATES" else "bad")
    out = [f'<p class="verdict {css}" id="verdict" data-verdict="{_e(v.word)}">{_e(v.headline)}</p>',
           f'<p class="selection" id="selection">{_e(o.selection.line())}</p>']
    if o.interrupted:
        out.append(f'<p class="banner interrupted" role="alert"><strong>Interrupted:</strong> {_e(o.interrupted)}. '
                   "Gates after the interruption did not run; this report is partial.</p>")
    if o.stopped:
        out.append(f'<p class="banner interrupted" role="alert"><strong>Stopped early:</strong> {_e(o.stopped)}. '
                   "Gates after the stop did not run.</p>")
    return "".join(out)


def _nav(session: GateSession, artifacts: dict) -> str:
    links = [("gates", "Gates")] + ([("since", "Since the last run")] if session.history is not None else [])
    if sequential_on(session):
        links.append(("sequential", "Sequential"))
    if any(_baseline(r) for r in session.records):
        links.append(("baseline", "Baseline deltas"))
    if session.sections:
        links.append(("summaries", "Summary tables"))
    for family, _ in _family_groups(session, artifacts):
        links.append((_anchor("family", family), gate_labels("test_" + family).family_title))
    links.append(("run", "Run notes"))
    return "<nav>" + " · ".join(f'<a href="#{_e(a)}">{_e(t)}</a>' for a, t in links) + "</nav>"


def _gate_table(records: list[GateRecord], anchors: dict[str, str], session: GateSession,
                artifacts: dict[str, list[Path]] | None = None) -> str:
    odd = session.outcome.without_gate(records)
    if not records and not odd:
        return '<section id="gates"><h2>Gates</h2><p>No gate ran in this session.</p></section>'
    rows = _outcome_rows(session, records, odd, anchors)
    seq_on = sequential_on(session)  # --t2i-sequential: one more column (nothing changes without it)
    for r in records:
        lab = gate_labels(r.nodeid, vocabulary=session.vocabulary)
        test = session.outcome.tests.get(r.nodeid)
        bad = r.status in FAILED or (test is not None and test.bad)
        name = _breakable(r.gate)
        if r.nodeid in anchors:
            name = f'<a href="#{anchors[r.nodeid]}">{name}</a>'
        extra = {"details": r.details, "provenance": r.provenance}
        if r.provenance_changes:
            extra["provenance_changes"] = r.provenance_changes
        verdict = VERDICTS.get(r.status, r.status) + verdict_suffix(r)  # ", underpowered": gating.power
        search = _search_text(r.gate, lab, r.family, verdict, r.status)
        if seq_on:
            search += " " + (str(record_of(r).reason) if record_of(r) else "").lower()
        message = r.message if (bad or r.status not in ("pass",) or verdict_suffix(r)) else ""
        if test is not None and test.bad and r.status not in FAILED:
            message = f"{session.outcome.kind(test, records)}: {test.message}"
        rows.append(
            f'<tr class="gate {"failed" if bad else _e(r.status)}" data-status="{_e(r.status)}" '
            f'data-search="{_e(search.strip())}">'
            f'<td class="verdict-cell">{"&#10007; " if bad else ""}{_e(verdict)}</td>'
            f'<td class="gate-name">{name}'
            + (f'<div class="message">{_e(message)}</div>' if message else "")
            + (_evidence(r.nodeid, (artifacts or {}).get(r.nodeid, [])) if bad else "")
            + f'<details><summary>details</summary><pre>{_e(_json(extra))}</pre></details></td>'
            f'<td class="num measured">{_num(r.value)}</td>'
            f'<td class="num interval">{_interval(r.interval)}</td>'
            f'<td class="num bound">{"-" if r.bound is None else _e(r.direction) + " " + _num(r.bound)}</td>'
            f'<td class="num n">{r.n}</td>'
            f'<td class="num power">{_e(power_cell(r))}</td>'
            + (_sequential_cell(record_of(r)) if seq_on else "")
            + f'<td class="plot">{_bar(r)}</td>' + trend_cell(session.history, r) + "</tr>"
        )
    statuses = list(dict.fromkeys(_status_of(row) for row in rows))
    boxes = "".join(f'<label class="status"><input type="checkbox" class="status-box" value="{_e(st)}" checked> '
                    f'{_e(VERDICTS.get(st, st))}</label> ' for st in statuses)
    return (
        '<section id="gates"><h2>Gates</h2>'
        f'<p class="hint">Estimate with its confidence interval against the bound from {_e(str(session.thresholds_path))}. '
        "In the plot the dot is the estimate, the grey band the interval, the red tick the bound and the "
        "red shading the side that fails; its axis runs from 0 to 1 for shares, otherwise over the numbers shown "
        "(hover for it). Failed gates come first.</p>"
        '<p class="filters"><label>Filter: <input id="filter" type="search" placeholder="gate id, family or verdict" '
        f'autocomplete="off"></label> <span id="status-boxes">{boxes}</span> <span id="shown"></span></p>'
        '<table id="gate-table"><thead><tr><th>verdict</th><th>gate</th><th>measured</th><th>interval</th>'
        '<th>bound</th><th>n</th><th title="the chance its test fails a model missing the bound by the kind\'s '
        'meaningful miss, at the run\'s per-gate level">power</th>' + ("<th>sequential</th>" if seq_on else "") + "<th>estimate vs bound</th>"
        + ('<th title="this gate in earlier runs of the history: dots the values, bars their intervals, the '
           'last (blue) this run">trend</th>' if session.history is not None else "") + "</tr></thead><tbody>"
        + "".join(rows) + "</tbody></table></section>"
    )


def _outcome_rows(session: GateSession, records: list[GateRecord], odd, anchors: dict[str, str]) -> list[str]:
    """Gate-table rows for tests that produced no gate record: crashed before ``gate()``, errors,
    skips (with the reason), a test the interruption cut off. They come first: pytest counted them."""
    rows = []
    seq_on = sequential_on(session)
    order = {"failed": 0, "error": 0, "running": 1, "xpassed": 2, "skipped": 3, "xfailed": 4}
    for t in sorted(odd, key=lambda t: (order.get(t.outcome, 5), t.nodeid)):
        kind = session.outcome.kind(t, records)
        name = t.nodeid.rsplit("::", 1)[-1]
        lab = gate_labels(t.nodeid, vocabulary=session.vocabulary)
        shown = _breakable(name)
        if t.nodeid in anchors:
            shown = f'<a href="#{anchors[t.nodeid]}">{shown}</a>'
        status = {"failed": "crashed", "running": "interrupted"}.get(t.outcome, t.outcome)
        rows.append(
            f'<tr class="gate {"failed" if t.bad or t.outcome == "running" else "other"}" data-status="{_e(status)}" '
            f'data-search="{_e(_search_text(name, lab, None, kind, status))}">'
            f'<td class="verdict-cell">{"&#10007; " if t.bad or t.outcome == "running" else ""}{_e(kind)}</td>'
            f'<td class="gate-name">{shown}<div class="message">{_e(t.message or kind)}</div>'
            f'<div class="nodeid">{_e(t.nodeid)}</div></td>'
            '<td class="num measured">-</td><td class="num interval">-</td><td class="num bound">-</td>'
            '<td class="num n">-</td>' + ('<td class="sequential">-</td>' if seq_on else "")
            + '<td class="plot"></td>' + ("<td></td>" if session.history is not None else "") + "</tr>"
        )
    return rows


def _sequential_cell(seq) -> str:
    """The gate table's ``sequential`` cell: the reason, then round r of R, images n of N per prompt, the sequence."""
    if not seq:
        return '<td class="sequential">-</td>'
    reason = "" if seq.reason is None else str(seq.reason)
    where = ", ".join(where_parts(seq))
    note = f'<div class="hint">{_e(seq.note)}</div>' if seq.note else ""
    return (f'<td class="sequential" data-reason="{_e(reason)}">{_e(reason)}'
            + (f'<div class="hint">{_e(where)}</div>' if where else "") + note + "</td>")


def _sequential_section(session: GateSession) -> str:
    """The run's sequential block (method, reasons, images per kind and for the run), as the terminal prints it."""
    lines = sequential_lines(session)
    if not lines:
        return ""
    return ('<section id="sequential"><h2>Sequential</h2>'
            f'<pre class="section">{_e(chr(10).join(lines[1:]))}</pre></section>')


def _status_of(row: str) -> str:
    m = re.search(r'data-status="([^"]*)"', row)
    return html.unescape(m.group(1)) if m else ""


def _search_text(name: str, lab, family: str | None, verdict: str, status: str) -> str:
    """What the filter box matches: the id, the paper family and indicator, the verdict (not the details)."""
    parts = [name, lab.family, lab.family_title, family or "", verdict, status]
    return " ".join(p for p in parts if p).lower()


def _baseline(r: GateRecord) -> dict | None:
    b = r.details.get("baseline") if isinstance(r.details, dict) and r.status != "baseline" else None
    return b if isinstance(b, dict) else None


def _baseline_table(records: list[GateRecord]) -> str:
    """Gates compared with a baseline model (``details["baseline"]``: ``model``, ``value``, ``delta``,
    ``interval`` of the delta, ``allowed`` change, ``failed``, ``message``); empty without any."""
    rows, models = [], []
    for r in records:
        b = _baseline(r)
        if b is None:
            continue
        models.append(str(b.get("model", "")))
        delta = b.get("delta")
        if delta is None and _finite(b.get("value")):
            delta = r.value - b["value"]
        regressed = bool(b.get("failed"))
        verdict = "REGRESSED" if regressed else ("ok" if delta is not None else "")
        note = "" if delta is not None else f'<div class="message">{_e(b.get("message", ""))}</div>'
        allowed = b.get("allowed")
        rows.append(
            f'<tr class="{"failed" if regressed else "pass"}"><td class="gate-name">{_e(r.gate)}{note}</td>'
            f'<td class="num">{_num(b.get("value"))}</td><td class="num">{_num(r.value)}</td>'
            f'<td class="num">{_signed(delta)}</td><td class="num">{_interval(b.get("interval"), signed=True)}</td>'
            f'<td class="num">{"-" if allowed is None else ("drop " if r.direction == "min" else "rise ") + _num(allowed)}</td>'
            f'<td class="verdict-cell">{verdict}</td></tr>'
        )
    if not rows:
        return ""
    names = ", ".join(sorted({m for m in models if m})) or "the baseline"
    return (
        '<section id="baseline"><h2>Baseline deltas</h2>'
        f'<p class="hint">This model against {_e(names)} on the same prompts and seeds: delta = this model - baseline, '
        "with a paired bootstrap interval; a gate regresses when it moves the failing way by more than allowed.</p>"
        '<table id="baseline-table"><thead><tr><th>gate</th><th>baseline</th><th>this model</th><th>delta</th>'
        "<th>delta interval</th><th>allowed</th><th>verdict</th></tr></thead><tbody>"
        + "".join(sorted(rows, key=lambda row: 'class="failed"' not in row)) + "</tbody></table></section>"
    )


def _sections(sections: dict[str, list[str]]) -> str:
    if not sections:
        return ""
    blocks = [f'<h3>{_e(t)}</h3><pre class="section">{_e(chr(10).join(lines))}</pre>' for t, lines in sections.items()]
    return '<section id="summaries"><h2>Summary tables</h2>' + "".join(blocks) + "</section>"


def _family_groups(session: GateSession, artifacts: dict[str, list[Path]]) -> list[tuple[str, list[str]]]:
    """Families that have artifacts, each with its tests' node ids, in the order tests reported."""
    groups: dict[str, list[str]] = {}
    for nodeid in artifacts:
        groups.setdefault(gate_labels(nodeid).family, []).append(nodeid)
    return list(groups.items())


def _families(session: GateSession, artifacts: dict[str, list[Path]]) -> str:
    status = {}
    for r in session.records:
        status.setdefault(r.nodeid, []).append(r.status)
    out = []
    for family, nodeids in _family_groups(session, artifacts):
        title = gate_labels("test_" + family).family_title
        tests = []
        for nodeid in sorted(nodeids, key=lambda n: not any(s in FAILED for s in status.get(n, []))):
            sts = status.get(nodeid, [])
            mark = " failed" if any(s in FAILED for s in sts) else ""
            verdict = ", ".join(VERDICTS.get(s, s) for s in sts) or "no gate"
            items = [_artifact(p) for p in artifacts[nodeid]]
            tests.append(
                f'<article class="test{mark}" id="{_anchor("test", nodeid)}"><h4>{_e(nodeid.rsplit("::", 1)[-1])} '
                f'<span class="tag">{_e(verdict)}</span></h4>{"".join(items)}</article>'
            )
        out.append(f'<section class="family" id="{_anchor("family", family)}"><h3>{_e(title)}</h3>{"".join(tests)}</section>')
    if not out:
        return ""
    return '<section id="families"><h2>Plots and data by indicator</h2>' + "".join(out) + "</section>"


def _evidence(nodeid: str, paths: list[Path]) -> str:
    """A failed gate's evidence beside its verdict: its ``evidence_*.png`` grids (the images that show the
    miss), else the test's other images (its plots), else a line saying it has none."""
    pngs = [p for p in paths if p.suffix.lower() == ".png" and p.is_file()]
    shown = [p for p in pngs if p.name.startswith("evidence")] or pngs
    if not shown:
        data = [p.name for p in paths if p.name.startswith("evidence")]
        why = f"data only: {', '.join(data)}" if data else "this test attached none"
        return f'<div class="evidence none" data-nodeid="{_e(nodeid)}">evidence: no image ({_e(why)})</div>'
    return (f'<div class="evidence" data-nodeid="{_e(nodeid)}"><span class="hint">evidence:</span>'
            + "".join(_artifact(p) for p in shown) + "</div>")


def _artifact(path: Path) -> str:
    name = path.name
    if not path.is_file():
        return f'<p class="missing">{_e(name)}: file not found ({_e(str(path))})</p>'
    if path.suffix.lower() == ".png":
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        return (f'<figure><img src="data:image/png;base64,{data}" alt="{_e(name)}">'
                f"<figcaption>{_e(name)}</figcaption></figure>")
    text = path.read_text(encoding="utf-8", errors="replace")
    cut = ""
    if len(text) > MAX_JSON_CHARS:
        text, cut = text[:MAX_JSON_CHARS], f" (first {MAX_JSON_CHARS} characters; the whole file is {path})"
    return f'<details class="data"><summary>{_e(name)}{_e(cut)}</summary><pre>{_e(text)}</pre></details>'


def _run_notes(session: GateSession) -> str:
    c = session.cache
    notes = []
    if c.generated or c.from_cache:
        notes.append(f"images: {c.generated} generated, {c.from_cache} from cache" + regenerated_note(c))
    for kind in sorted(set(c.computed) | set(c.reused)):
        notes.append(f"{kind}: {c.computed.get(kind, 0)} computed, {c.reused.get(kind, 0)} from cache")
    if c.corrupt:
        notes.append(f"{len(c.corrupt)} unreadable cache entries found and made again")
    by_gate = {r.gate: r for r in session.records}
    for g in session.written:
        r = by_gate.get(g)
        if r is not None and r.write is not None:
            old = "new" if r.bound is None else f"{r.direction} {r.bound:g}"
            notes.append(f"bound updated: {g}: {old} -> {r.direction} {r.write:g}")
    if session.proposed:
        notes.append(f"{len(session.proposed)} gate(s) had no bound; proposed bounds were written next to {session.thresholds_path}")
    notes += [line for line in [digest_line(session)] if line]  # settings and identities that changed: at the top
    if session.unused:
        notes.append(f"{len(session.unused)} gate(s) in {session.thresholds_path} were not used by any test: "
                     + ", ".join(session.unused[:20]) + (" ..." if len(session.unused) > 20 else ""))
    items = "".join(f"<li>{_e(n)}</li>" for n in notes) or "<li>nothing to note</li>"
    return f'<section id="run"><h2>Run notes</h2><ul>{items}</ul></section>'


def _kv_table(header: dict[str, str], css: str) -> str:
    if not header:
        return ""
    rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(str(v))}</td></tr>" for k, v in header.items())
    return f'<table class="{css}">{rows}</table>'


def _bar(r: GateRecord, width: int = 160, height: int = 18) -> str:
    """A small SVG: the estimate (dot), its interval (grey band) and the bound (red tick, failing side shaded)."""
    points = [x for x in (r.value, r.bound, *(r.interval or ())) if _finite(x)]
    if not points:
        return ""
    lo, hi = min(points), max(points)
    if not (0.0 <= lo and hi <= 1.0):  # shares and rates on [0, 1]; anything else on its own range
        margin = 0.25 * (hi - lo) or 0.1 * abs(hi) or 1.0
        lo, hi = lo - margin, hi + margin
    else:
        lo, hi = 0.0, 1.0
    pad = 4

    def x(v: float) -> float:
        return round(pad + (v - lo) / (hi - lo) * (width - 2 * pad), 1)

    parts = [f'<line x1="{pad}" y1="{height / 2}" x2="{width - pad}" y2="{height / 2}" stroke="#bbb"/>']
    if _finite(r.bound):
        b = x(r.bound)
        x0, x1 = (pad, b) if r.direction == "min" else (b, width - pad)
        parts.append(f'<rect x="{x0}" y="2" width="{max(x1 - x0, 0)}" height="{height - 4}" fill="#fbe3e3"/>')
    if r.interval and all(_finite(v) for v in r.interval):
        a, b2 = x(r.interval[0]), x(r.interval[1])
        parts.append(f'<rect x="{a}" y="{height / 2 - 3}" width="{max(b2 - a, 1)}" height="6" fill="#999"/>')
    if _finite(r.bound):
        parts.append(f'<line x1="{x(r.bound)}" y1="1" x2="{x(r.bound)}" y2="{height - 1}" stroke="#c00" stroke-width="2"/>')
    if _finite(r.value):
        color = "#c00" if r.status in FAILED else "#1a6"
        parts.append(f'<circle cx="{x(r.value)}" cy="{height / 2}" r="4" fill="{color}"/>')
    label = f"axis from {lo:.3g} to {hi:.3g}"
    return (f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
            f'aria-label="{_e(label)}"><title>{_e(label)}</title>{"".join(parts)}</svg>')


# -- helpers ------------------------------------------------------------------------------------------

def _artifacts_by_test(session: GateSession, root: Path) -> dict[str, list[Path]]:
    """Artifact files per test node id, in the order written; a file written twice is listed once."""
    out: dict[str, dict[str, Path]] = {}
    for a in session.artifacts:
        rel = Path(a["path"])
        out.setdefault(a["nodeid"], {})[str(rel)] = rel if rel.is_absolute() else root / rel
    return {k: list(v.values()) for k, v in out.items()}


def _breakable(text: str) -> str:
    """Escaped, with line-break opportunities after ``[`` and ``-`` so long ids wrap between tokens."""
    return re.sub(r"([\[-])", r"\1<wbr>", _e(text))


def _anchor(kind: str, text: str) -> str:
    return f"{kind}-" + re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-")


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def _num(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and math.isnan(x):
        return "nan"
    if isinstance(x, (int, float)):
        return f"{x:.4f}"
    return _e(x)


def _signed(x: Any) -> str:
    return f"{x:+.4f}" if _finite(x) else _num(x)


def _interval(iv: Any, signed: bool = False) -> str:
    if not iv or len(iv) != 2:
        return "-"
    fmt = _signed if signed else _num
    return f"[{fmt(iv[0])}, {fmt(iv[1])}]"


def _json(obj: Any) -> str:
    text = json.dumps(obj, indent=1, sort_keys=True, default=str)
    return text if len(text) <= MAX_JSON_CHARS else text[:MAX_JSON_CHARS] + "\n... (cut)"


# Records what a person would notice going wrong (script errors, images that fail to load, console
# errors) on the <html> element, so a headless browser's DOM dump shows them.
_ERRORS_JS = """
(function () {
  var root = document.documentElement, errors = [];
  function note(msg) { errors.push(String(msg)); root.setAttribute("data-errors", JSON.stringify(errors)); }
  root.setAttribute("data-errors", "[]");
  window.addEventListener("error", function (e) {
    var t = e.target;
    note(t && t !== window && t.tagName ? "failed to load " + t.tagName + " " + (t.alt || t.src || "") : (e.message || "error"));
  }, true);
  window.addEventListener("unhandledrejection", function (e) { note("unhandled rejection: " + e.reason); });
  var original = console.error;
  console.error = function () { note(Array.prototype.join.call(arguments, " ")); return original.apply(console, arguments); };
})();
""".strip()

_PAGE_JS = """
(function () {
  // The filter matches each row's id, family, indicator and verdict (data-search), never the text of its
  // collapsed details; every word typed must match. The status boxes hide whole verdicts. The state lives
  // in the URL (#gates?q=africa&hide=ok) so a filtered view can be linked.
  var box = document.getElementById("filter"), shown = document.getElementById("shown");
  var rows = Array.prototype.slice.call(document.querySelectorAll("#gate-table tbody tr"));
  var boxes = Array.prototype.slice.call(document.querySelectorAll("input.status-box"));
  function hidden() { return boxes.filter(function (b) { return !b.checked; }).map(function (b) { return b.value; }); }
  function apply(save) {
    var words = box ? box.value.trim().toLowerCase().split(/\\s+/).filter(Boolean) : [], n = 0, off = hidden();
    rows.forEach(function (tr) {
      var text = tr.getAttribute("data-search") || "";
      var hit = off.indexOf(tr.getAttribute("data-status")) < 0 && words.every(function (w) { return text.indexOf(w) >= 0; });
      tr.hidden = !hit; if (hit) { n += 1; }
    });
    if (shown) { shown.textContent = n + " of " + rows.length + " rows shown"; }
    if (save) {
      var parts = [];
      if (box && box.value.trim()) { parts.push("q=" + encodeURIComponent(box.value.trim())); }
      if (off.length) { parts.push("hide=" + off.map(encodeURIComponent).join(",")); }
      var target = parts.length ? "#gates?" + parts.join("&") : "#gates";
      if (window.history && history.replaceState) { try { history.replaceState(null, "", target); return; } catch (e) {} }
      window.location.hash = target;
    }
  }
  function restore() {
    var h = window.location.hash, i = h.indexOf("?");
    if (i < 0) { return false; }
    h.slice(i + 1).split("&").forEach(function (kv) {
      var k = kv.split("=")[0], v = decodeURIComponent(kv.slice(k.length + 1));
      if (k === "q" && box) { box.value = v; }
      if (k === "hide") { var off = v.split(","); boxes.forEach(function (b) { b.checked = off.indexOf(b.value) < 0; }); }
    });
    return true;
  }
  var restored = restore();
  if (box) { box.addEventListener("input", function () { apply(true); }); }
  boxes.forEach(function (b) { b.addEventListener("change", function () { apply(true); }); });
  apply(false);
  if (restored) { var g = document.getElementById("gates"); if (g && g.scrollIntoView) { g.scrollIntoView(); } }
  window.addEventListener("load", function () {
    var imgs = Array.prototype.slice.call(document.images), ok = imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; });
    var root = document.documentElement;
    root.setAttribute("data-images", String(imgs.length));
    root.setAttribute("data-images-loaded", String(ok.length));
    root.setAttribute("data-ready", "1");
  });
})();
""".strip()

_CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.5em auto; max-width: 1200px; padding: 0 1em; color: #222; }
h1 { margin: 0 0 .3em; font-size: 1.6em; } h2 { border-bottom: 1px solid #ddd; margin-top: 1.8em; } h3 { margin-top: 1.4em; }
.verdict { font-size: 1.2em; font-weight: 600; padding: .4em .7em; border-radius: 4px; display: inline-block; }
.verdict.bad { background: #fde8e8; color: #a00; } .verdict.good { background: #e5f6ec; color: #086; } .verdict.none { background: #eee; }
.banner { background: #fff4d6; border-left: 5px solid #e0a800; padding: .5em .8em; margin: .5em 0; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { border-bottom: 1px solid #e4e4e4; padding: .25em .6em; text-align: left; vertical-align: top; }
table.settings th { color: #555; font-weight: 500; padding-right: 1.2em; } table.settings td, table.settings th { border: 0; padding: .05em .6em .05em 0; }
#gate-table thead th, #baseline-table thead th { background: #f4f4f4; position: sticky; top: 0; }
td.num { font-variant-numeric: tabular-nums; white-space: nowrap; text-align: right; }
tr.failed { background: #fff1f1; } tr.failed td.verdict-cell { color: #b00; font-weight: 700; }
tr.pass td.verdict-cell { color: #086; } tr.inconclusive { background: #fff8e6; } tr.inconclusive td.verdict-cell { color: #a60; font-weight: 700; } tr.written td.verdict-cell { color: #05a; }
td.gate-name { max-width: 32em; overflow-wrap: anywhere; } .message { color: #900; font-size: .9em; margin: .2em 0; word-break: normal; }
details summary { cursor: pointer; color: #555; font-size: .85em; } pre { background: #f7f7f7; padding: .5em; overflow-x: auto; font-size: .85em; max-height: 30em; }
pre.section { max-height: none; }
tr.worse td { color: #a00; }
nav { margin: .8em 0; } nav a { color: #05a; }
article.test { border: 1px solid #e4e4e4; border-radius: 4px; padding: .2em .8em .6em; margin: .6em 0; }
article.test.failed { border-color: #e99; }
.tag { font-size: .75em; font-weight: 500; background: #eee; border-radius: 3px; padding: .05em .4em; }
figure { display: inline-block; margin: .4em .8em .4em 0; vertical-align: top; } figure img { max-width: 100%; border: 1px solid #eee; }
.evidence figure img { max-width: 32em; } .evidence.none { color: #777; font-size: .9em; }
figcaption { font-size: .8em; color: #666; } footer { margin: 2em 0 1em; color: #888; font-size: .85em; }
.hint { color: #555; font-size: .9em; } input#filter { width: 22em; }
.selection { color: #444; margin: .3em 0; } .banner.interrupted { background: #fde8e8; border-left-color: #c00; }
label.status { font-size: .9em; margin-right: .4em; white-space: nowrap; } .nodeid { color: #777; font-size: .8em; }
tr.other td.verdict-cell { color: #666; }
""".strip()
