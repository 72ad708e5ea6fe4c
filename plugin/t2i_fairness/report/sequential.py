"""``--t2i-sequential`` in every report: per gate, why and when it stopped; for the run, the method and the images.

Under ``--t2i-sequential`` each gate's :class:`~t2i_fairness.gating.session.GateRecord` carries its
sequential record in ``details["sequential"]`` (made by
:func:`~t2i_fairness.gating.sequential.look_record`, or by the gate for one that was never looked at
before ``N``): ``kind``, ``reason`` (``fail: bound excluded``, ``pass: bound met with certainty``,
``pass: futility``, ``ran to N``), ``early``, and, when the gate was looked at, ``round``/``rounds``,
``images_per_prompt``/``planned_per_prompt``, ``images``/``planned_images`` and the ``sequence`` at
stopping. It rides inside ``details``, so it reaches the xdist controller with the rest of the record.

This module turns those records into the run's ``sequential`` block (:func:`sequential_summary`,
the ``run.json`` object), its terminal lines (:func:`sequential_lines`), a gate's flat JUnit
properties (:func:`junit_sequential`) and its one-line text (:func:`gate_line`, for the HTML report
and Allure). A run without ``--t2i-sequential`` has no such record and gets nothing from here: its
reports stay byte for byte what they were. ``docs/sequential-reports.md`` shows every line.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

__all__ = ["EARLY_LIMIT", "REASON_ORDER", "gate_line", "junit_sequential", "record_of", "sequential_lines",
           "sequential_on", "sequential_summary", "where_parts"]

#: early-stop lines the terminal prints before "... and K more (run.json)"
EARLY_LIMIT = 20
#: the reasons in the order the reports list them (the texts of ``metrics.sequential.REASONS``)
REASON_ORDER = ("fail: bound excluded", "pass: bound met with certainty", "pass: futility", "ran to N")
_NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_MULTIPLICITY = {"holm": "Holm", "bh": "Benjamini-Hochberg", "none": "no adjustment"}


def record_of(record: Any) -> dict | None:
    """The sequential record of a gate record (a ``GateRecord`` or its dict), or ``None`` when it has none.

    Example:
        >>> record_of({"details": {"sequential": {"kind": "ratio", "reason": "ran to N", "early": False}}})["kind"]
        'ratio'
        >>> record_of({"details": {}}) is None
        True
    """
    details = record.get("details") if isinstance(record, Mapping) else getattr(record, "details", None)
    seq = (details or {}).get("sequential") if isinstance(details, Mapping) else None
    return dict(seq) if isinstance(seq, Mapping) else None


def _f(x: Any) -> float | None:
    """A number of a record that may have crossed strict JSON (``"Infinity"``), or ``None``."""
    if isinstance(x, str):
        x = _NONFINITE.get(x)
    if x is None or isinstance(x, bool):
        return None
    try:
        return float(x)  # numpy numbers too
    except (TypeError, ValueError):
        return None


def _int(x: Any) -> int | None:
    v = _f(x)
    return int(v) if v is not None and math.isfinite(v) else None


def _gated(records: Iterable[Any]) -> list:
    return [r for r in records if getattr(r, "status", None) != "baseline"]


def sequential_on(session) -> bool:
    """Whether the run was a ``--t2i-sequential`` run: the session says so (``GateSession.sequential``,
    set at the session's end) or a gate carries a sequential record.

    Example:
        >>> from pathlib import Path
        >>> from t2i_fairness.gating.session import GateSession
        >>> sequential_on(GateSession(Path("t.yaml")))
        False
    """
    return bool(getattr(session, "sequential", None)) or any(record_of(r) for r in _gated(session.records))


def _pct(part: float, whole: float) -> str:
    return f"{part / whole:.0%}" if whole else "-"


def _seq_text(seq: Any) -> str | None:
    if not isinstance(seq, (list, tuple)) or len(seq) != 2:
        return None
    lo, hi = _f(seq[0]), _f(seq[1])
    if lo is None or hi is None:
        return None
    return f"[{lo:.4f}, {hi:.4f}]"


def where_parts(seq: Mapping[str, Any] | None) -> list[str]:
    """Where a gate stopped, as phrases: ``round r of R``, ``n of N images per prompt``, ``sequence [lo, hi]``
    (each only when the record has it).

    Example:
        >>> where_parts({"round": 2, "rounds": 3, "images_per_prompt": 8, "planned_per_prompt": 16})
        ['round 2 of 3', '8 of 16 images per prompt']
    """
    if not seq:
        return []
    out = []
    rnd, rounds = _int(seq.get("round")), _int(seq.get("rounds"))
    if rnd is not None and rounds is not None:
        out.append(f"round {rnd} of {rounds}")
    n, N = _int(seq.get("images_per_prompt")), _int(seq.get("planned_per_prompt"))
    if n is not None and N is not None:
        out.append(f"{n} of {N} images per prompt")
    text = _seq_text(seq.get("sequence"))
    if text:
        out.append(f"sequence {text}")
    return out


def gate_line(seq: Mapping[str, Any] | None) -> str:
    """One gate's sequential record in a line: reason, round r of R, images n of N per prompt, sequence.

    Example:
        >>> gate_line({"kind": "share", "reason": "pass: futility", "early": True, "round": 1, "rounds": 3,
        ...            "images_per_prompt": 4, "planned_per_prompt": 16, "sequence": [0.61, 0.74]})
        'pass: futility at round 1 of 3, 4 of 16 images per prompt, sequence [0.6100, 0.7400]'
        >>> gate_line({"kind": "ratio", "reason": "ran to N", "early": False,
        ...            "note": "no valid early stop for a ratio gate: runs to N"})
        'ran to N (no valid early stop for a ratio gate: runs to N)'
        >>> gate_line(None)
        ''
    """
    if not seq:
        return ""
    parts = where_parts(seq)
    line = str(seq.get("reason", "?"))
    if parts:
        line += (" at " if parts[0].startswith("round ") else ", ") + ", ".join(parts)
    if seq.get("note"):
        line += f" ({seq['note']})"
    return line


def junit_sequential(record: Mapping[str, Any]) -> list[tuple[str, str]]:
    """A gate's flat JUnit properties under ``--t2i-sequential`` (none without a sequential record):
    ``t2i_sequential_reason``, ``t2i_sequential_kind``, and, when the gate was looked at,
    ``t2i_sequential_round`` (``r/R``) and ``t2i_sequential_images`` (``n/N per prompt``).

    Example:
        >>> rec = {"details": {"sequential": {"kind": "share", "reason": "fail: bound excluded", "early": True,
        ...        "round": 1, "rounds": 3, "images_per_prompt": 4, "planned_per_prompt": 16}}}
        >>> junit_sequential(rec)
        [('t2i_sequential_reason', 'fail: bound excluded'), ('t2i_sequential_round', '1/3'), ('t2i_sequential_images', '4/16 per prompt'), ('t2i_sequential_kind', 'share')]
        >>> junit_sequential({"details": {}})
        []
    """
    seq = record_of(record)
    if seq is None:
        return []
    props = [("t2i_sequential_reason", str(seq.get("reason")))]
    rnd, rounds = _int(seq.get("round")), _int(seq.get("rounds"))
    if rnd is not None and rounds is not None:
        props.append(("t2i_sequential_round", f"{rnd}/{rounds}"))
    n, N = _int(seq.get("images_per_prompt")), _int(seq.get("planned_per_prompt"))
    if n is not None and N is not None:
        props.append(("t2i_sequential_images", f"{n}/{N} per prompt"))
    props.append(("t2i_sequential_kind", str(seq.get("kind"))))
    return props


def _holm_m(records: list) -> int:
    """The ``m`` of the session's fixed-N step-down (``GateSession.adjust``): gates tested at ``N`` plus early stops."""
    early = [r for r in records if (record_of(r) or {}).get("early")]
    ids = {id(r) for r in early}
    tested = [r for r in records if r.status in ("pass", "fail", "inconclusive") and r.p_value is not None
              and r.p_value == r.p_value and id(r) not in ids]
    return len(tested) + len(early)


def sequential_summary(session) -> dict | None:
    """The run's ``sequential`` object (``run.json``): method, alpha split, per-reason counts, per-kind
    images used against planned, early stops, and the run's images against the fixed-N plan.
    ``None`` for a run without ``--t2i-sequential``.

    ``images`` per kind sum each gate's ``images`` (images per prompt at stopping x its prompts) over the
    gates whose record has them; gates that share prompts count them once each, so these sums say
    where each kind's evidence came from, not what was generated. The run's ``images_used`` is the cache
    counts' ``generated`` (the GPU work) plus ``from_cache`` (distinct images an earlier run made: the
    session counts each image once, whichever xdist worker or look read it).
    ``planned_images`` is the fixed-N plan's total over the selection when the round driver records it
    (``GateSession.sequential["planned_images"]``), else ``None``.

    Args:
        session: the run's :class:`~t2i_fairness.gating.session.GateSession` (after ``finish``).

    Example:
        >>> from pathlib import Path
        >>> from t2i_fairness.gating.session import GateRecord, GateSession
        >>> s = GateSession(Path("t.yaml"), sequential={"alpha": 0.05, "planned_images": 1600})
        >>> s.records.append(GateRecord("g", "t.py::g", 0.3, 40, "min", "fail", 0.5, None, "", {}, p_value=2e-5,
        ...     details={"sequential": {"kind": "share", "reason": "fail: bound excluded", "early": True, "round": 1,
        ...     "rounds": 3, "images_per_prompt": 4, "planned_per_prompt": 16, "prompts": 10, "images": 40,
        ...     "planned_images": 160, "e_threshold": 40.0}}))
        >>> out = sequential_summary(s)
        >>> out["reasons"]["fail: bound excluded"], out["kinds"]["share"]["images"], out["gates"]
        (1, 40, 1)
    """
    if not sequential_on(session):
        return None
    records = _gated(session.records)
    info = dict(getattr(session, "sequential", None) or {})
    alpha = _f(info.get("alpha"))
    if alpha is None and getattr(session, "alpha", None) is not None:
        alpha = 2 * float(session.alpha)  # the session's step-down ran at alpha / 2
    half = alpha / 2 if alpha is not None else None
    thresholds = [t for t in (_f((record_of(r) or {}).get("e_threshold")) for r in records) if t and math.isfinite(t)]
    m_early = int(round(thresholds[0] * half)) if thresholds and half else len(records)
    e_threshold = thresholds[0] if thresholds else (m_early / half if half else None)
    m_holm = _holm_m(records)
    multiplicity = getattr(session, "multiplicity", None) or "holm"
    method = (f"early fails: per-gate normal-mixture e-process against m/(alpha/2) = "
              f"{_g(e_threshold)} (Bonferroni at alpha/2 = {_g(half)} over the run's m = {m_early} gates, "
              f"anytime-valid by Ville); the rest: the fixed-N test at alpha/2 = {_g(half)} with "
              f"{_MULTIPLICITY.get(multiplicity, multiplicity)} over all {m_holm} gates, early stops counted with p = 1; "
              "early passes (bound met, futility) are non-binding")
    reasons = {reason: 0 for reason in REASON_ORDER}
    kinds: dict[str, dict] = {}
    early = []
    without = 0
    for r in records:
        seq = record_of(r)
        if seq is None:
            without += 1
            continue
        reason = str(seq.get("reason"))
        reasons[reason] = reasons.get(reason, 0) + 1
        k = kinds.setdefault(str(seq.get("kind")), {"gates": 0, "early": 0, "sized": 0, "images": 0, "planned_images": 0})
        k["gates"] += 1
        k["early"] += bool(seq.get("early"))
        used, planned = _int(seq.get("images")), _int(seq.get("planned_images"))
        if used is not None and planned is not None:
            k["sized"] += 1
            k["images"] += used
            k["planned_images"] += planned
        if seq.get("early"):
            early.append(r)
    for k in kinds.values():
        k["share_of_planned"] = round(k["images"] / k["planned_images"], 4) if k["planned_images"] else None
    order = {reason: i for i, reason in enumerate(REASON_ORDER)}
    early.sort(key=lambda r: (order.get(str(record_of(r).get("reason")), 9), r.gate))
    c = session.cache
    used_total = int(c.generated) + int(c.from_cache)
    planned_total = _int(info.get("planned_images"))
    secs = _f(info.get("generation_seconds"))
    rate = c.generated / secs if secs and c.generated else None  # images per second of generation this run
    return {
        "method": method, "alpha": alpha, "alpha_early_fails": half, "alpha_fixed_n": half,
        "e_threshold": e_threshold, "gates_early_fail_family": m_early, "multiplicity": multiplicity,
        "gates": len(records) - without, "gates_without_record": without,
        "reasons": reasons,  # the four reasons always, then any other a record names
        "kinds": dict(sorted(kinds.items())),
        "early_stops": [{"gate": r.gate, **{key: record_of(r).get(key) for key in (
            "kind", "reason", "round", "rounds", "images_per_prompt", "planned_per_prompt", "sequence")}}
            for r in early],
        "images_used": used_total, "generated": int(c.generated), "from_cache": int(c.from_cache),
        "planned_images": planned_total,
        "share_of_planned": round(used_total / planned_total, 4) if planned_total else None,
        "generated_share_of_planned": round(int(c.generated) / planned_total, 4) if planned_total else None,
        "generation_seconds": secs,
        "planned_seconds_at_this_rate": round(planned_total / rate, 1) if rate and planned_total else None,
    }


def _g(x: float | None) -> str:
    return "?" if x is None else f"{x:g}"


def sequential_lines(session, limit: int = EARLY_LIMIT) -> list[str]:
    """The terminal summary's ``sequential`` block (empty for a run without ``--t2i-sequential``): the
    method, counts per reason, per kind gates and images used against planned, one line per gate that
    stopped early (fails first; at most ``limit``, then ``... and K more (run.json)``), and the run's
    images against the fixed-N plan.

    Example:
        >>> from pathlib import Path
        >>> from t2i_fairness.gating.session import GateRecord, GateSession
        >>> s = GateSession(Path("t.yaml"), sequential={"alpha": 0.05})
        >>> s.records.append(GateRecord("g", "t.py::g", 0.7, 40, "min", "pass", 0.5, None, "", {}, p_value=1.0,
        ...     details={"sequential": {"kind": "share", "reason": "pass: futility", "early": True, "round": 1,
        ...     "rounds": 3, "images_per_prompt": 4, "planned_per_prompt": 16, "prompts": 10, "images": 40,
        ...     "planned_images": 160, "sequence": [0.6, 0.8], "e_threshold": 40.0}}))
        >>> print("\\n".join(sequential_lines(s)[2:]))
        reasons: 0 fail: bound excluded, 0 pass: bound met with certainty, 1 pass: futility, 0 ran to N
        per kind (images: each gate's images per prompt x its prompts, summed over its gates; gates sharing prompts count them once each):
          share: 1 gate (1 early): 40 of 160 images (25%)
        early stops (1):
          g: pass: futility at round 1 of 3, 4 of 16 images per prompt, sequence [0.6000, 0.8000]
        images used this run: 0 (0 generated, 0 from the cache of earlier runs); the fixed-N plan's total is not recorded for this run (`t2i-fairness plan` prints it)
    """
    summary = sequential_summary(session)
    if summary is None:
        return []
    out = ["-- sequential (--t2i-sequential) --", f"method: {summary['method']}"]
    counts = [f"{n} {reason}" for reason, n in summary["reasons"].items()]
    if summary["gates_without_record"]:
        counts.append(f"{summary['gates_without_record']} without a sequential record (undefined or not judged)")
    out.append("reasons: " + ", ".join(counts))
    if summary["kinds"]:
        out.append("per kind (images: each gate's images per prompt x its prompts, summed over its gates; "
                   "gates sharing prompts count them once each):")
    for kind, k in summary["kinds"].items():
        line = f"  {kind}: {k['gates']} gate{'s' if k['gates'] != 1 else ''} ({k['early']} early)"
        if k["sized"]:
            line += f": {k['images']:,} of {k['planned_images']:,} images ({_pct(k['images'], k['planned_images'])})"
            if k["sized"] < k["gates"]:
                line += f" over the {k['sized']} with sizes; {k['gates'] - k['sized']} ran to N unsized"
        else:
            line += ": ran to N (sizes not recorded)"
        out.append(line)
    early = [r for r in _gated(session.records) if (record_of(r) or {}).get("early")]
    order = {reason: i for i, reason in enumerate(REASON_ORDER)}
    early.sort(key=lambda r: (order.get(str(record_of(r).get("reason")), 9), r.gate))
    if early:
        out.append(f"early stops ({len(early)}):")
        out += [f"  {r.gate}: {gate_line(record_of(r))}" for r in early[:limit]]
        if len(early) > limit:
            out.append(f"  ... and {len(early) - limit} more (run.json)")
    used = (f"images used this run: {summary['images_used']:,} ({summary['generated']:,} generated, "
            f"{summary['from_cache']:,} from the cache of earlier runs)")
    if summary["planned_images"]:
        used += (f" of the fixed-N plan's {summary['planned_images']:,} "
                 f"({_pct(summary['images_used'], summary['planned_images'])}; generated "
                 f"{_pct(summary['generated'], summary['planned_images'])})")
    else:
        used += "; the fixed-N plan's total is not recorded for this run (`t2i-fairness plan` prints it)"
    out.append(used)
    if summary["generation_seconds"] is not None:
        line = f"generation time this run: {summary['generation_seconds']:,.1f} s"
        if summary["planned_seconds_at_this_rate"] is not None:
            line += (f"; the fixed-N plan at this run's rate: {summary['planned_seconds_at_this_rate']:,.1f} s "
                     "(extrapolated, every image generated)")
        out.append(line)
    return out
