"""The terminal summary of a run's gates, as lines (printed by the plugin's hook, asserted by tests)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from t2i_fairness.gating.session import GateSession
from t2i_fairness.gating.thresholds import proposed_path
from t2i_fairness.gating.verdicts import bound_cannot_fail
from t2i_fairness.base.memory import fmt
from t2i_fairness.report.changes import change_lines, digest_line
from t2i_fairness.report.judged import judged_lines
from t2i_fairness.report.power import power_cell, power_lines, verdict_suffix
from t2i_fairness.report.sequential import sequential_lines


VERDICTS = {"pass": "ok", "fail": "FAIL", "inconclusive": "INCONCLUSIVE", "missing": "MISSING", "written": "written",
            "refused": "REFUSED"}


def _p(r) -> str:
    if r.p_value is None:
        return "-"
    return f"{r.p_value:.2g}" + (f" ({r.p_adjusted:.2g})" if r.p_adjusted is not None else "")


def regenerated_note(cache) -> str:
    """Why ``generated`` can exceed the images that were missing: canonical batches are made whole."""
    r = getattr(cache, "regenerated", 0)
    if not r:
        return ""
    return (f" ({r} of the generated were still cached: their canonical batch was made again whole, "
            "as a paid API bills it; the cached copies were kept)")


def _num(x: float | None) -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and math.isnan(x):
        return "nan"
    return f"{x:.4f}"


VERDICTS = {"pass": "ok", "fail": "FAIL", "missing": "MISSING", "written": "written", "refused": "REFUSED"}


@dataclass
class GateReport:
    """The terminal summary as lines (printed by the hook, asserted by tests)."""

    session: GateSession

    def table(self) -> list[str]:
        rows = [("gate", "measured", "bound", "n", "p (adj.)", "power", "verdict")]
        for r in sorted((r for r in self.session.records if r.status != "baseline"), key=lambda r: r.gate):
            interval = f" [{_num(r.interval[0])}, {_num(r.interval[1])}]" if r.interval else ""
            bound = "-" if r.bound is None else f"{r.direction} {_num(r.bound)}"
            verdict = VERDICTS.get(r.status, r.status.upper()) + verdict_suffix(r)
            if r.gate in self.session.escalated:
                verdict += " (run FAILED: step-down)"
            rows.append((r.gate, _num(r.value) + interval, bound, str(r.n), _p(r), power_cell(r), verdict))
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        out = []
        for j, row in enumerate(rows):
            out.append("  ".join(cell.ljust(widths[i]) if i != 1 else cell.rjust(widths[i]) for i, cell in enumerate(row)).rstrip())
            if j == 0:
                out.append("  ".join("-" * w for w in widths))
        return out

    def outcome_lines(self, limit: int = 20) -> list[str]:
        """The run's verdict as pytest decided it (never PASSED when a test crashed, errored, or the run
        was interrupted or stopped), the selection, and each test that produced no gate and did not pass."""
        s, o = self.session, self.session.outcome
        if not s.records and not (o.selection.gate_tests and (o.tests or o.interrupted)):
            return []  # not a gate run (the project's own tests, a team's unrelated tests, --collect-only)
        records = [r for r in s.records if r.status != "baseline"]
        v = o.verdict(records)
        out = [f"verdict: {v.headline}", f"selection: {o.selection.line()}"]
        odd = o.without_gate(records)
        for t in odd[:limit]:
            out.append(f"  {o.kind(t, records)}: {t.nodeid}" + (f": {t.message}" if t.message else ""))
        if len(odd) > limit:
            out.append(f"  ... and {len(odd) - limit} more")
        return out + [""]

    def lines(self) -> list[str]:
        s = self.session
        out: list[str] = self.outcome_lines()
        changes = change_lines(s) + scorer_check_lines(s)  # once, near the top: settings, identities, scorers that changed
        out += changes + ([""] if changes and s.records else [])
        if s.records:
            out += self.table()
            gated = [r for r in s.records if r.status != "baseline"]
            failed = sum(r.status in ("fail", "missing", "refused") or r.blocking for r in gated)
            inconclusive = sum(r.status == "inconclusive" and not r.blocking for r in gated)
            out.append(f"{len(gated)} gates, {failed} failed" + (f", {inconclusive} inconclusive" if inconclusive else "")
                       + f" ({s.thresholds_path})")
            out += power_lines(gated)  # passes a test could hardly have failed, in words
            out += self.decision_lines()
            out += judged_lines(gated)  # judged gates: the scorer error that flips each verdict, labels for an audit
            out += [s.history.summary_line()] if s.history is not None else []  # the run history (history.view)
            seq = sequential_lines(s)  # --t2i-sequential only: nothing otherwise
            out += [""] + seq if seq else []
        deltas = [r for r in s.records if r.status != "baseline" and isinstance(r.details.get("baseline"), dict)
                  and "delta" in r.details["baseline"]]
        if deltas:
            b0 = deltas[0].details["baseline"]["model"]
            out += ["", f"-- candidate vs baseline {b0}: difference [paired {len(deltas)} gates] --"]
            for r in sorted(deltas, key=lambda r: r.gate):
                d = r.details["baseline"]
                iv = f" [{d['interval'][0]:+.4f}, {d['interval'][1]:+.4f}]" if d.get("interval") else ""
                out.append(f"{r.gate}: {d['delta']:+.4f}{iv} (candidate {r.value:.4f}, baseline {d['value']:.4f})"
                           + ("  REGRESSED" if d.get("failed") else ""))
        for title, lines in s.sections.items():
            out.append("")
            out.append(f"-- {title} --")
            out += lines
        c = s.cache
        if s.sections:
            out.append("")
        if c.generated or c.from_cache:
            out.append(f"images: {c.generated} generated, {c.from_cache} from cache" + regenerated_note(c))
        if c.blank:
            out.append(f"{len(c.blank)} generated image(s) are entirely black (safety checker? NaN output?); "
                       "they are scored as they are:")
            out += [f"  {b}" for b in c.blank[:10]] + ([f"  ... and {len(c.blank) - 10} more"] if len(c.blank) > 10 else [])
        for kind in sorted(set(c.computed) | set(c.reused)):
            out.append(f"{kind}: {c.computed.get(kind, 0)} computed, {c.reused.get(kind, 0)} from cache")
        out += [line for line in [digest_line(s)] if line]
        out += memory_lines(s)
        out += corrupt_lines(c.corrupt)
        if s.written:
            out.append(f"updated {len(s.written)} gate(s) in {s.thresholds_path}:")
            for r in s.records:
                if r.status == "written" and r.gate in s.written:
                    old = "new" if r.bound is None else f"{r.direction} {r.bound:g}"
                    out.append(f"  {r.gate}: {old} -> {r.direction} {r.write:g}")
        if s.proposed:
            out.append(f"{len(s.proposed)} gate(s) missing; proposed bounds written to {proposed_path(s.thresholds_path)}")
        out += s.notes
        refused = [r for r in s.records if r.status == "refused"]
        if refused:
            out.append(f"refused to loosen {len(refused)} gate(s) (use --t2i-allow-loosen after review):")
            out += [f"  {r.gate}: {r.direction} {r.bound:g} -> {r.value:.6f}" for r in refused]
        vacuous = [r.gate for r in s.records if r.status in ("pass", "fail", "inconclusive", "written")
                   and bound_cannot_fail(r.direction, r.write if r.status == "written" else r.bound, r.uncertainty)]
        if vacuous:
            out.append(f"{len(vacuous)} gate(s) cannot fail at their bound (a share in [0, 1] with a min bound at or "
                       "below 0 or a max bound at or above 1: the model measured the edge when the bound was written):")
            out += [f"  {g}" for g in vacuous[:10]] + ([f"  ... and {len(vacuous) - 10} more"] if len(vacuous) > 10 else [])
        if s.unused:
            out.append(f"{len(s.unused)} gate(s) in {s.thresholds_path} were not used by any test:")
            out += [f"  {g}" for g in s.unused[:20]] + ([f"  ... and {len(s.unused) - 20} more"] if len(s.unused) > 20 else [])
        return out

    def decision_lines(self) -> list[str]:
        """How the run decided: the adjustment, what only the whole step-down rejected, canary and sample-size lines."""
        s = self.session
        out: list[str] = []
        tested = [r for r in s.records if r.p_value is not None and r.status != "baseline"]
        if s.multiplicity and tested:
            names = {"holm": "Holm (family-wise error)", "bh": "Benjamini-Hochberg (false discovery rate)",
                     "none": "no adjustment"}
            out.append(f"decisions: one-sided p-values against the bounds, {names.get(s.multiplicity, s.multiplicity)} "
                       f"across {len(tested)} gates at alpha {s.alpha:g}; inconclusive = the estimate misses its bound "
                       "without significant evidence")
        if s.escalated:
            out.append(f"FAILED by the {s.multiplicity} step-down across the run: {len(s.escalated)} gate(s) inconclusive "
                       "on their own are significant together:")
            out += [f"  {g}" for g in s.escalated]
        out += s.canary_lines + s.plan_lines
        return out


def scorer_check_lines(s: GateSession) -> list[str]:
    """The scorer check's lines (:mod:`t2i_fairness.spine.scorer_check`): one when the scorers match."""
    check = s.scorer_check
    return [line.removeprefix("t2i-fairness: ") for line in check.lines()] if check is not None else []


def memory_lines(s: GateSession) -> list[str]:
    """The run's memory: each process's peak RSS, and the models it loaded (``+``, with the need checked)
    and released (``-``), in order.

    Example:
        >>> from pathlib import Path
        >>> s = GateSession(Path("t.yaml"))
        >>> s.memory.append({"peak_rss": 5 * 2**30, "needs": {"generator sd15-random": 4.3 * 2**30},
        ...                  "events": ["+generator sd15-random", "-generator sd15-random", "+scorer clip", "-scorer clip"]})
        >>> for line in memory_lines(s): print(line)
        memory: peak RSS 5.0 GB
        models (+ loaded when a gate first needed it, - released after the last gate that needs it): +generator sd15-random (needs 4.3 GB), -generator sd15-random, +scorer clip, -scorer clip
    """
    if not s.memory:
        return []
    peaks: dict[str, int] = {}
    for m in s.memory:
        who = m.get("worker") or ""
        peaks[who] = max(peaks.get(who, 0), int(m.get("peak_rss", 0)))
    out = ["memory: peak RSS " + ", ".join(f"{fmt(v)}" + (f" ({who})" if who else "") for who, v in sorted(peaks.items()))]
    for m in s.memory:
        events = m.get("events", [])
        if not events:
            continue
        needs = m.get("needs", {})
        shown = [e + (f" (needs {fmt(needs[e[1:]])})" if e[0] == "+" and e[1:] in needs else "") for e in events]
        again = sorted({e[1:] for e in events if e[0] == "+" and events.count(e) > 1})
        who = ", ".join(x for x in (m.get("worker"), m.get("role") if m.get("role") != "candidate" else None) if x)
        out.append(f"models{' of ' + who if who else ''} (+ loaded when a gate first needed it, - released after the last "
                   f"gate that needs it): {', '.join(shown)}" + (f"; loaded again after a release: {', '.join(again)}" if again else ""))
    out += [note for m in s.memory for note in m.get("notes", [])]
    return out


def corrupt_lines(corrupt: list[str], limit: int = 10) -> list[str]:
    """The summary's lines on damaged cache entries found on read and made again: row-store segments cut
    short, images, then every other entry, each listed once.

    Example:
        >>> for line in corrupt_lines(["/c/images/ab/ab12.png", "/c/images/ab/ab12.png"]): print(line)
        1 corrupt image regenerated (its bytes matched no index entry and did not decode):
          /c/images/ab/ab12.png
    """
    import os

    seen = list(dict.fromkeys(corrupt))
    images = [p for p in seen if p.endswith(".png") and f"{os.sep}images{os.sep}" in p]
    torn = [p for p in seen if ": cut short (" in p]
    other = [p for p in seen if p not in set(images) | set(torn)]
    out = []
    if torn:  # rows lost past a cut (what a killed run leaves too): computed again, said
        out.append(f"{len(torn)} cache segment{'' if len(torn) == 1 else 's'} found cut short; the rows past the cut "
                   "are computed again:")
        out += [f"  {p}" for p in torn[:limit]] + ([f"  ... and {len(torn) - limit} more"] if len(torn) > limit else [])
    if images:
        out.append(f"{len(images)} corrupt image{'' if len(images) == 1 else 's'} regenerated "
                   "(its bytes matched no index entry and did not decode):" if len(images) == 1 else
                   f"{len(images)} corrupt images regenerated (their bytes matched no index entry and did not decode):")
        out += [f"  {p}" for p in images[:limit]] + ([f"  ... and {len(images) - limit} more"] if len(images) > limit else [])
    if other:
        out.append(f"{len(other)} unreadable cache entr{'y' if len(other) == 1 else 'ies'} found and made again:")
        out += [f"  {p}" for p in other[:limit]] + ([f"  ... and {len(other) - limit} more"] if len(other) > limit else [])
    return out
