"""``--t2i-sequential`` in every report: per gate, why and when it stopped; for the run, the method and the images.

Each gate record carries its look in ``details["sequential"]``; this module makes run.json's
``sequential`` block, the terminal lines and the JUnit properties (docs/sequential-reports.md).
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

from t2i_fairness.gating.sequential.look import Look, Reason
from t2i_fairness.gating.sequential.look import json_number as _f
from t2i_fairness.gating.sequential.messages import gate_line, where_parts  # noqa: F401  (re-exported: reports call them here)

__all__ = ["EARLY_LIMIT", "REASON_ORDER", "gate_line", "junit_sequential", "record_of", "sequential_lines",
           "sequential_on", "sequential_summary", "where_parts"]

#: early-stop lines the terminal prints before "... and K more (run.json)"
EARLY_LIMIT = 20
#: the reasons in the order the reports list them
REASON_ORDER = tuple(str(r) for r in (Reason.FAIL, Reason.FUTILITY, Reason.CURTAIL, Reason.FINAL))
_MULTIPLICITY = {"holm": "Holm", "bh": "Benjamini-Hochberg", "none": "no adjustment"}


def record_of(record: Any) -> Look | None:
    """The sequential look of a gate record (a ``GateRecord`` or its run.json dict), or ``None`` when it has none.

    Example:
        >>> record_of({"details": {"sequential": {"kind": "ratio", "reason": "ran to N", "early": False}}}).kind
        'ratio'
        >>> record_of({"details": {}}) is None
        True
    """
    details = record.get("details") if isinstance(record, Mapping) else getattr(record, "details", None)
    return Look.of((details or {}).get("sequential")) if isinstance(details, Mapping) else None


def _int(x: Any) -> int | None:
    v = _f(x)
    return int(v) if v is not None and math.isfinite(v) else None


def _gated(records: Iterable[Any]) -> list:
    return [r for r in records if getattr(r, "status", None) != "baseline"]


def sequential_on(session) -> bool:
    """Whether the run was a ``--t2i-sequential`` run: the session says so or a gate carries a look."""
    return bool(getattr(session, "sequential", None)) or any(record_of(r) for r in _gated(session.records))


def _pct(part: float, whole: float) -> str:
    return f"{part / whole:.0%}" if whole else "-"


def junit_sequential(record: Mapping[str, Any]) -> list[tuple[str, str]]:
    """A gate's flat JUnit properties under ``--t2i-sequential`` (none without a sequential record).

    Example:
        >>> rec = {"details": {"sequential": {"kind": "share", "reason": "pass: futility", "early": True,
        ...        "round": 1, "rounds": 3, "at": 4, "planned": 16, "unit": "images per prompt"}}}
        >>> junit_sequential(rec)
        [('t2i_sequential_reason', 'pass: futility'), ('t2i_sequential_round', '1/3'), ('t2i_sequential_images', '4/16 images per prompt'), ('t2i_sequential_kind', 'share')]
    """
    seq = record_of(record)
    if seq is None:
        return []
    props = [("t2i_sequential_reason", str(seq.reason))]
    if seq.round is not None and seq.rounds is not None:
        props.append(("t2i_sequential_round", f"{seq.round}/{seq.rounds}"))
    if seq.at is not None and seq.planned is not None:
        props.append(("t2i_sequential_images", f"{seq.at}/{seq.planned} {seq.unit or 'images per prompt'}"))
    props.append(("t2i_sequential_kind", str(seq.kind)))
    return props


def sequential_summary(session) -> dict | None:
    """The run's ``sequential`` object (``run.json``): method, counts per reason, per kind the gates and
    the mean share of their fixed-N size at stopping, early stops and images; ``None`` when off.
    """
    if not sequential_on(session):
        return None
    records = _gated(session.records)
    info = dict(getattr(session, "sequential", None) or {})
    alpha = _f(info.get("alpha"))
    multiplicity = getattr(session, "multiplicity", None) or "holm"
    method = ("each gate's level alpha/m (Holm's first step) spent over its planned looks in the O'Brien-Fleming "
              "shape (Lan-DeMets; union bound over looks), its sequential p-value min_k p_k / s_k joining the "
              f"session's {_MULTIPLICITY.get(multiplicity, multiplicity)} step-down; futility passes (non-binding) when "
              "the gate's one-sided limit, at levels summing to 0.005, leaves possible only misses the fixed-N test "
              "at N would catch at most 0.5% of the time (or, where the thresholds file sets one, misses below a "
              "team's indifference margin), or by curtailment when the fixed-N test's conditional power at the "
              "largest miss the look leaves possible is below 0.005: the fixed-N power kept within about a point at "
              "every miss")
    reasons = {reason: 0 for reason in REASON_ORDER}
    kinds: dict[str, dict] = {}
    early, without = [], 0
    for r in records:
        seq = record_of(r)
        if seq is None:
            without += 1
            continue
        reason = str(seq.reason)
        reasons[reason] = reasons.get(reason, 0) + 1
        k = kinds.setdefault(str(seq.kind), {"gates": 0, "early": 0, "shares": []})
        k["gates"] += 1
        k["early"] += seq.early
        if seq.share_of_planned is not None:
            k["shares"].append(seq.share_of_planned)
        if seq.early:
            early.append(r)
    for k in kinds.values():
        shares = k.pop("shares")
        k["mean_share_of_planned"] = round(sum(shares) / len(shares), 4) if shares else None
    order = {reason: i for i, reason in enumerate(REASON_ORDER)}
    early.sort(key=lambda r: (order.get(str(record_of(r).reason), 9), r.gate))
    c = session.cache
    used_total = int(c.generated) + int(c.from_cache)
    planned_total = _int(info.get("planned_images"))
    return {
        "method": method, "alpha": alpha, "multiplicity": multiplicity,
        "gates": len(records) - without, "gates_without_record": without,
        "reasons": reasons,
        "kinds": dict(sorted(kinds.items())),
        "early_stops": [_early_stop(r) for r in early],
        # early passes on a team's indifference margin (thresholds file), not on what N can catch: said in every report
        "indifference_passes": {r.gate: record_of(r).futility_miss for r in early
                                if record_of(r).futility_basis == "indifference"},
        "images_used": used_total, "generated": int(c.generated), "from_cache": int(c.from_cache),
        "planned_images": planned_total,
        "share_of_planned": round(used_total / planned_total, 4) if planned_total else None,
    }


def _early_stop(r) -> dict:
    """An early stop in run.json's ``sequential`` block: the gate and its look's main fields, as the record has them."""
    data = record_of(r).to_dict()
    return {"gate": r.gate, **{key: data.get(key) for key in (
        "kind", "reason", "round", "rounds", "at", "planned", "unit", "p", "level", "futility_limit",
        "conditional_power")}}


def sequential_lines(session, limit: int = EARLY_LIMIT) -> list[str]:
    """The terminal summary's ``sequential`` block (empty for a run without ``--t2i-sequential``): the method,
    counts per reason, per kind gates and the mean share of their fixed-N size they stopped at, one line per
    gate that stopped early (fails first; at most ``limit``), and the run's images.

    Example:
        >>> from pathlib import Path
        >>> from t2i_fairness.gating.session import GateRecord, GateSession
        >>> s = GateSession(Path("t.yaml"), sequential={"alpha": 0.05})
        >>> s.records.append(GateRecord("g", "t.py::g", 0.9, 40, "min", "pass", 0.5, None, "", {}, p_value=1.0,
        ...     details={"sequential": {"kind": "share", "reason": "pass: futility", "early": True, "round": 1,
        ...     "rounds": 3, "at": 4, "planned": 16, "unit": "images per prompt", "share_of_planned": 0.25}}))
        >>> print("\\n".join(sequential_lines(s)[2:]))
        reasons: 0 fail: alpha spent at this look, 1 pass: futility, 0 pass: curtailed, 0 ran to N
        per kind (mean share of the fixed-N size at stopping):
          share: 1 gate (1 early), 25%
        early stops (1):
          g: pass: futility at look 1 of 3, 4 of 16 images per prompt
        images used this run: 0 (0 generated, 0 from the cache of earlier runs)
    """
    summary = sequential_summary(session)
    if summary is None:
        return []
    out = ["-- sequential (--t2i-sequential) --", f"method: {summary['method']}"]
    counts = [f"{n} {reason}" for reason, n in summary["reasons"].items()]
    if summary["gates_without_record"]:
        counts.append(f"{summary['gates_without_record']} without a sequential record (no bound, or not a study's "
                      "indicator)")
    out.append("reasons: " + ", ".join(counts))
    if summary["kinds"]:
        out.append("per kind (mean share of the fixed-N size at stopping):")
    for kind, k in summary["kinds"].items():
        share = k["mean_share_of_planned"]
        out.append(f"  {kind}: {k['gates']} gate{'s' if k['gates'] != 1 else ''} ({k['early']} early)"
                   + (f", {share:.0%}" if share is not None else ""))
    if summary["indifference_passes"]:
        out.append(f"passed early on a team's indifference margin (the thresholds file's, not what N can catch: the "
                   f"fixed-N run may fail a smaller miss) ({len(summary['indifference_passes'])}): "
                   + ", ".join(f"{g} (any miss below {m:g})" for g, m in list(summary["indifference_passes"].items())[:limit]))
    early = [r for r in _gated(session.records) if record_of(r) and record_of(r).early]
    order = {reason: i for i, reason in enumerate(REASON_ORDER)}
    early.sort(key=lambda r: (order.get(str(record_of(r).reason), 9), r.gate))
    if early:
        out.append(f"early stops ({len(early)}):")
        out += [f"  {r.gate}: {gate_line(record_of(r))}" for r in early[:limit]]
        if len(early) > limit:
            out.append(f"  ... and {len(early) - limit} more (run.json)")
    used = (f"images used this run: {summary['images_used']:,} ({summary['generated']:,} generated, "
            f"{summary['from_cache']:,} from the cache of earlier runs)")
    if summary["planned_images"]:
        used += (f" of the fixed-N plan's {summary['planned_images']:,} "
                 f"({_pct(summary['images_used'], summary['planned_images'])})")
    out.append(used)
    return out
