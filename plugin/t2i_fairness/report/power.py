"""Underpowered gates in every output: the verdict cell, a summary block, run.json, JUnit, Allure.

A gate's record carries ``power``: its test's chance of failing a model that misses the bound by
the kind's meaningful miss, at the run's per-gate level. A pass or inconclusive below 50% is
marked ``underpowered`` wherever the verdict is shown.
"""

from __future__ import annotations

from typing import Any, Iterable

from t2i_fairness.gating.power import MEANINGFUL_MISS, UNDERPOWERED, power_words

__all__ = ["power_cell", "power_lines", "power_summary", "underpowered", "verdict_suffix"]


def _get(r: Any, key: str) -> Any:
    return r.get(key) if isinstance(r, dict) else getattr(r, key, None)


def underpowered(records: Iterable[Any]) -> list[Any]:
    """The records whose verdict is a pass or an inconclusive their test could hardly have failed."""
    return [r for r in records if _get(r, "status") in ("pass", "inconclusive")
            and (_get(r, "power") or {}).get("underpowered")]


def power_cell(record: Any) -> str:
    """The power column: ``3.1%`` against the kind's miss, ``-`` without one."""
    p = _get(record, "power")
    if not p:
        return "-"
    v = float(p["power"])
    return "<0.1%" if v < 0.001 else (f"{100 * v:.1f}%" if v < 0.1 else f"{100 * v:.0f}%")


def verdict_suffix(record: Any) -> str:
    """``", underpowered"`` after the verdict of an underpowered pass or inconclusive, else ``""``."""
    return ", underpowered" if underpowered([record]) else ""


def power_lines(records: Iterable[Any], limit: int = 10) -> list[str]:
    """The summary block: how many gates passed (or were inconclusive) underpowered, and the first ``limit``."""
    weak = sorted(underpowered(records), key=lambda r: _get(r, "gate"))
    if not weak:
        return []
    misses = ", ".join(f"{k} {v:g}" for k, v in MEANINGFUL_MISS.items() if k != "bounded")
    out = [f"{len(weak)} gate(s) underpowered: their test would catch the miss they exist for less than "
           f"{UNDERPOWERED:.0%} of the time at the run's per-gate level (meaningful miss per kind: {misses}); "
           "a green here says little:"]
    for r in weak[:limit]:
        out.append(f"  {_get(r, 'gate')}: {power_words(_get(r, 'power'), _get(r, 'status'))}")
    if len(weak) > limit:
        out.append(f"  ... and {len(weak) - limit} more (run.json, the HTML report and `t2i-fairness plan` list all)")
    return out


def power_summary(records: Iterable[Any]) -> dict:
    """run.json's ``power`` object: the kinds' misses, the threshold and every underpowered gate."""
    weak = underpowered(records)
    return {"meaningful_miss": dict(MEANINGFUL_MISS), "underpowered_below": UNDERPOWERED, "underpowered": len(weak),
            "gates": [{"gate": _get(r, "gate"), "status": _get(r, "status"), **(_get(r, "power") or {})}
                      for r in sorted(weak, key=lambda r: _get(r, "gate"))]}


def plan_power_lines(artifacts, gate_ids: Iterable[str], limit: int = 30) -> list[str]:
    """``t2i-fairness plan``'s list of the selected gates the last run (``<artifacts>/run.json``) found
    underpowered, each with the images that would lift it to 80%.

    Example:
        >>> import json, tempfile, pathlib
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (d / "run.json").write_text(json.dumps({"gates": [{"gate": "g", "status": "pass", "power": {
        ...     "effect": 0.1, "power": 0.03, "underpowered": True, "factor_for_80": 4.0, "n": 60, "images_for_80": 240,
        ...     "level": 1e-4}}]}))
        >>> plan_power_lines(d, ["g"])[1]
        '  g: would catch a 0.1 miss 3.0% of the time at 0.0001; 80% needs about 4x its images per prompt (240 of its 60 units)'
    """
    from t2i_fairness.report.last_run import last_run_gates

    path, records, problem = last_run_gates(artifacts)
    if problem == "no run":
        return [f"power: not measured yet (no run in {path}); a run of these gates records each gate's power against "
                "its kind's meaningful miss, and this command then lists the underpowered ones"]
    if records is None:
        return [f"power: {path} {problem}; run the gates to measure power"]
    wanted = set(gate_ids)
    weak = sorted((r for r in underpowered(records) if r.get("gate") in wanted), key=lambda r: r["gate"])
    head = (f"power (from the last run, {path}): {len(weak)} of the {len(wanted)} selected gate(s) underpowered "
            f"(below {UNDERPOWERED:.0%} against their kind's meaningful miss)")
    out = [head + (":" if weak else "")]
    for r in weak[:limit]:
        p = r["power"]
        need = (f"80% needs about {p['factor_for_80']:.3g}x its images per prompt ({p['images_for_80']} of its "
                f"{p['n']} units)" if p.get("factor_for_80") else
                f"it needs more prompts ({p['units']} give no p below {p['p_floor']:.2g})" if p.get("p_floor") else
                "80% needs more prompts or images per prompt" if p.get("miss") else "no size up to 10,000x its images reaches 80%")
        miss = p.get("miss") or f"{p['effect']:g} miss"
        out.append(f"  {r['gate']}: would catch a {miss} {power_cell(r)} of the time at {p['level']:.2g}; {need}")
    if len(weak) > limit:
        out.append(f"  ... and {len(weak) - limit} more (plan --output FILE lists all)")
    return out
