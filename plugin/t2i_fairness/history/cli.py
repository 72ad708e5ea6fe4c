"""``t2i-fairness history`` and ``t2i-fairness compare``: the run history read back (no pytest, no model).

::

    t2i-fairness history [-k EXPR] [--model NAME] [--since TIME] [--until TIME] [--runs N] [--json]
    t2i-fairness compare [A [B]] [-k EXPR] [--alpha X] [--changed-only] [--fail-on-regression] [--json]

Both read ``--t2i-history FILE`` (default ``t2i-history.sqlite`` in the current folder, where a gate
run in this folder writes it). ``A`` and ``B`` are run ids, model names (the latest finished run of
that model) or ``last``; with none, the last finished run against the finished run before it.
Exit status: 0, 1 (``--fail-on-regression`` and a gate regressed beyond noise), 2 (usage).
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Sequence

from t2i_fairness.history.compare import GateChange, compare_gates
from t2i_fairness.history.expression import ExpressionError, matcher
from t2i_fairness.history.store import HISTORY_FILE, HistoryError, HistoryStore, RunRow

__all__ = ["add_parsers", "main", "resolve_run"]


class Usage(Exception):
    """A bad argument: printed as one line, exit status 2."""


def add_parsers(sub) -> None:
    """The ``history`` and ``compare`` sub-commands of ``t2i-fairness``."""
    hist = sub.add_parser("history", help="each gate's values over the recorded runs")
    comp = sub.add_parser("compare", help="two recorded runs, gate by gate: the change, its interval, and whether "
                          "it is beyond noise across the gates compared")
    for p in (hist, comp):
        p.add_argument("--t2i-history", dest="store", default=HISTORY_FILE, metavar="FILE",
                       help=f"the history store (default: {HISTORY_FILE} in the current folder)")
        p.add_argument("-k", dest="keyword", metavar="EXPR", help="only gates whose id matches, as pytest's -k")
        p.add_argument("--json", action="store_true", help="print JSON instead of text")
    hist.add_argument("--model", metavar="NAME", help="only runs of this model (a part of its name or identity)")
    hist.add_argument("--since", metavar="TIME", help="only runs started at or after TIME (ISO date or date-time, UTC)")
    hist.add_argument("--until", metavar="TIME", help="only runs started before TIME")
    hist.add_argument("--runs", type=int, default=10, metavar="N", help="the last N runs that match (default 10)")
    comp.add_argument("runs", nargs="*", metavar="RUN", help="run id, model name or 'last' (none: the last run "
                      "against the one before it; one: that run against the last)")
    comp.add_argument("--alpha", type=float, default=0.05, metavar="X",
                      help="the level across the gates compared (Holm; default 0.05)")
    comp.add_argument("--changed-only", action="store_true", help="list only the gates that changed beyond noise")
    comp.add_argument("--fail-on-regression", action="store_true",
                      help="exit 1 when a gate changed beyond noise in its failing direction (for CI)")


def main(ns: argparse.Namespace) -> int:
    """Run ``history`` or ``compare``; returns the exit status."""
    try:
        if ns.command == "compare" and not 0.0 < ns.alpha < 1.0:
            raise Usage(f"--alpha: must be in (0, 1), got {ns.alpha!r}")
        keep = matcher(ns.keyword)
        store = HistoryStore(ns.store, create=False)
        try:
            return (_history if ns.command == "history" else _compare)(store, ns, keep)
        finally:
            store.close()
    except (Usage, HistoryError, ExpressionError) as exc:
        import sys

        print(f"t2i-fairness {ns.command}: {exc}", file=sys.stderr)
        return 2


def resolve_run(runs: Sequence[RunRow], ref: str) -> RunRow:
    """A run from a reference: its id (``12``, or with a leading ``#``), ``last`` (the last finished run), or a model name (the
    latest finished run of that model).

    Example:
        >>> from t2i_fairness.history.store import RunRow
        >>> mk = lambda i, model, state: RunRow(i, "t", None, state, state, None, 0, model, None, None, None, 0, {},
        ...                                     None, None, None, None)
        >>> runs = [mk(1, "v1", "finished"), mk(2, "v2", "finished"), mk(3, "v2", "killed")]
        >>> resolve_run(runs, "last").id, resolve_run(runs, "v1").id, resolve_run(runs, "3").id
        (2, 1, 3)
    """
    text = ref.strip()
    if text.lstrip("#").isdigit():
        for run in runs:
            if run.id == int(text.lstrip("#")):
                return run
        raise Usage(f"no run {text} in the store (runs {runs[0].id}..{runs[-1].id})" if runs else "the store is empty")
    finished = [r for r in runs if r.state == "finished"]
    if text == "last":
        if not finished:
            raise Usage("no finished run in the store")
        return finished[-1]
    named = [r for r in finished if r.model == text] or [r for r in finished if text in (r.model or "")]
    if not named:
        models = sorted({r.model for r in runs if r.model})
        raise Usage(f"{text!r} is not a run id, 'last' or the model of a finished run; models: {', '.join(models)}")
    return named[-1]


def _pair(store: HistoryStore, refs: Sequence[str]) -> tuple[RunRow, RunRow]:
    runs = store.runs()
    if len(refs) > 2:
        raise Usage(f"compare takes at most two runs, got {len(refs)}")
    if len(refs) == 2:
        a, b = resolve_run(runs, refs[0]), resolve_run(runs, refs[1])
    elif len(refs) == 1:
        a, b = resolve_run(runs, refs[0]), resolve_run(runs, "last")
    else:
        b = resolve_run(runs, "last")
        from t2i_fairness.history.view import previous_run

        a = previous_run(store, b.id, {g.gate for g in store.gates(b.id)})
        if a is None:
            raise Usage(f"no finished run before {b.label} measured its gates; nothing to compare")
    if a.id == b.id:
        raise Usage(f"both runs are {a.label}")
    return a, b


def _compare(store: HistoryStore, ns: argparse.Namespace, keep) -> int:
    a, b = _pair(store, ns.runs)
    rows_a = [g for g in store.gates(a.id) if keep(g.gate)]
    rows_b = [g for g in store.gates(b.id) if keep(g.gate)]
    changes = compare_gates(rows_a, rows_b, ns.alpha)
    regressed = [c for c in changes if c.regressed]
    if ns.json:
        print(json.dumps({"a": _run_dict(a), "b": _run_dict(b), "alpha": ns.alpha, "method": "holm",
                          "gates": [_change_dict(c) for c in changes]}, indent=1, default=str))
    else:
        for line in compare_lines(a, b, changes, ns.alpha, ns.changed_only):
            print(line)
    return 1 if ns.fail_on_regression and regressed else 0


def compare_lines(a: RunRow, b: RunRow, changes: Sequence[GateChange], alpha: float, changed_only: bool = False) -> list[str]:
    """The text ``compare`` prints: the two runs, then each gate (changed ones first), then the tally."""
    tested = [c for c in changes if c.p_value is not None or c.changed]  # measured, or a value lost
    changed = [c for c in tested if c.changed]
    out = [f"A: {a.label} seed {a.seed}; thresholds commit {a.thresholds_commit or '-'}",
           f"B: {b.label} seed {b.seed}; thresholds commit {b.thresholds_commit or '-'}",
           f"change = B - A, its {1 - alpha:.0%} interval (two-sided, per gate); beyond noise: Holm-adjusted p <= "
           f"{alpha:g} across the {len(tested)} gate(s) compared", ""]
    order = sorted(changes, key=lambda c: (not c.changed, not c.regressed, c.p_value if c.p_value is not None else 2,
                                           c.gate))
    for c in order:
        if changed_only and not c.changed:
            continue
        if c.p_value is None:
            out.append(f"  {'LOST' if c.changed else '':9s} {c.gate}: {c.note}")
            continue
        mark = "REGRESSED" if c.regressed else ("CHANGED" if c.changed else "same")
        out.append(f"  {mark:9s} {c.gate}: {c.a.value:.4f} -> {c.b.value:.4f}, change {c.delta:+.4f} "
                   f"[{c.interval[0]:+.4f}, {c.interval[1]:+.4f}] ({c.pairing}), p {c.p_value:.3g}, "
                   f"adjusted {c.p_adjusted:.3g}")
    out += ["", f"{len(changed)} of {len(tested)} gate(s) changed beyond noise, "
                f"{sum(c.regressed for c in changed)} of them in the failing direction"]
    return out


def _history(store: HistoryStore, ns: argparse.Namespace, keep) -> int:
    runs = [r for r in store.runs() if _run_kept(r, ns)][-max(1, ns.runs):]
    if not runs:
        raise Usage("no run matches" if store.runs() else "the store has no runs yet")
    series: dict[str, dict[int, object]] = {}
    for run in runs:
        for g in store.gates(run.id):
            if keep(g.gate):
                series.setdefault(g.gate, {})[run.id] = g
    if ns.json:
        print(json.dumps({"runs": [_run_dict(r) for r in runs], "gates": {
            gate: [{"run": rid, "value": _f(g.value), "interval": [_f(g.low), _f(g.high)], "verdict": g.verdict,
                    "n": g.n, "bound": _f(g.bound)} for rid, g in sorted(rows.items())]
            for gate, rows in sorted(series.items())}}, indent=1, default=str))
        return 0
    print("runs:")
    for r in runs:
        print(f"  #{r.id} {r.started.replace('T', ' ')[:19]} {r.model} seed {r.seed}: {r.state}"
              + (f", {r.verdict}" if r.verdict else "") + (f"; {r.selection}" if r.selection else ""))
    for gate, rows in sorted(series.items()):
        print(f"{gate}:")
        for rid, g in sorted(rows.items()):
            iv = f" [{g.low:.4f}, {g.high:.4f}]" if g.low is not None and g.high is not None else ""
            value = "undefined" if g.value is None else f"{g.value:.4f}"
            print(f"  #{rid} {value}{iv} n {g.n}, {g.verdict}")
    return 0


def _run_kept(r: RunRow, ns: argparse.Namespace) -> bool:
    if ns.model and ns.model not in (r.model or "") and ns.model not in (r.model_identity or ""):
        return False
    if ns.since and r.started < ns.since:
        return False
    return not (ns.until and r.started >= ns.until)


def _f(x):
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else x


def _run_dict(r: RunRow) -> dict:
    return {"id": r.id, "started": r.started, "finished": r.finished, "state": r.state, "verdict": r.verdict,
            "model": r.model, "model_identity": r.model_identity, "seed": r.seed, "thresholds_commit": r.thresholds_commit}


def _change_dict(c: GateChange) -> dict:
    return {"gate": c.gate, "a": _f(c.a.value) if c.a else None, "b": _f(c.b.value) if c.b else None,
            "delta": c.delta, "interval": c.interval, "pairing": c.pairing, "p_value": c.p_value,
            "p_adjusted": c.p_adjusted, "changed": c.changed, "regressed": c.regressed, "note": c.note}
