"""Session state and the report: plain objects the pytest hooks feed and print.

Workers (pytest-xdist) evaluate gates read-only and send each verdict to the controller as a
report property; only the controller writes threshold files.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from t2i_fairness.spine.cache import CacheStats
from t2i_fairness.gating.verdicts import Bound, ThresholdFile, proposed_path

PROPERTY = "t2i_gate"
SECTION = "t2i_section"
ARTIFACT = "t2i_artifact"


@dataclass
class GateRecord:
    """One gate's outcome as it travels from a worker to the controller (JSON-able)."""

    gate: str
    nodeid: str
    value: float
    n: int
    direction: str
    status: str
    bound: float | None
    write: float | None
    message: str
    provenance: dict
    interval: list | None = None
    provenance_changes: dict = field(default_factory=dict)
    details: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class GateSession:
    thresholds_path: Path
    records: list[GateRecord] = field(default_factory=list)
    cache: CacheStats = field(default_factory=CacheStats)
    written: list[str] = field(default_factory=list)
    proposed: list[str] = field(default_factory=list)
    unused: list[str] = field(default_factory=list)
    sections: dict[str, list[str]] = field(default_factory=dict)  # title -> lines, printed after the gate table
    artifacts: list[dict] = field(default_factory=list)  # {"nodeid", "path" relative to --t2i-artifacts}

    def add(self, data: dict) -> None:
        self.records.append(GateRecord(**data))

    def add_section(self, data: dict) -> None:
        self.sections[data["title"]] = list(data["lines"])

    def add_artifact(self, data: dict) -> None:
        self.artifacts.append(dict(data))

    def merge_cache_stats(self, stats: dict) -> None:
        self.cache.generated += stats.get("generated", 0)
        self.cache.from_cache += stats.get("from_cache", 0)
        self.cache.corrupt.extend(stats.get("corrupt", []))
        self.cache.blank.extend(stats.get("blank", []))
        for attr in ("computed", "reused"):
            mine = getattr(self.cache, attr)
            for k, v in stats.get(attr, {}).items():
                mine[k] = mine.get(k, 0) + v

    def finish(self, write_files: bool, complete_run: bool) -> None:
        """Write updates and proposals (controller only) and find gates no test used."""
        try:
            thresholds = ThresholdFile.load(self.thresholds_path)
        except ValueError:
            return  # reported at configure time
        used = {r.gate for r in self.records if r.status != "baseline"}
        if complete_run and used:  # a run without gates (e.g. the project's own tests) says nothing
            self.unused = sorted(set(thresholds.gates) - used)
        if not write_files:
            return
        from t2i_fairness.gating.verdicts import provenance_id

        updates = [r for r in self.records if r.status == "written" and r.write is not None]
        if updates:
            for r in updates:
                pid = provenance_id(r.provenance)
                thresholds.provenances[pid] = r.provenance
                thresholds.gates[r.gate] = Bound(r.direction, r.write, pid)  # type: ignore[arg-type]
                self.written.append(r.gate)
            thresholds.save()
        missing = [r for r in self.records if r.status == "missing" and r.write is not None]
        target = proposed_path(self.thresholds_path)
        if missing:
            proposal = ThresholdFile.load(target) if target.exists() else ThresholdFile(target)
            for r in missing:
                pid = provenance_id(r.provenance)
                proposal.provenances[pid] = r.provenance
                proposal.gates[r.gate] = Bound(r.direction, r.write, pid)  # type: ignore[arg-type]
                self.proposed.append(r.gate)
            proposal.save()


def _num(x: float | None) -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and math.isnan(x):
        return "nan"
    return f"{x:.4f}"


@dataclass
class GateReport:
    """The terminal summary as lines (printed by the hook, asserted by tests)."""

    session: GateSession

    def table(self) -> list[str]:
        rows = [("gate", "measured", "bound", "n", "verdict")]
        for r in sorted((r for r in self.session.records if r.status != "baseline"), key=lambda r: r.gate):
            interval = f" [{_num(r.interval[0])}, {_num(r.interval[1])}]" if r.interval else ""
            bound = "-" if r.bound is None else f"{r.direction} {_num(r.bound)}"
            verdict = {"pass": "ok", "fail": "FAIL", "missing": "MISSING", "written": "written", "refused": "REFUSED"}[r.status]
            rows.append((r.gate, _num(r.value) + interval, bound, str(r.n), verdict))
        widths = [max(len(row[i]) for row in rows) for i in range(5)]
        out = []
        for j, row in enumerate(rows):
            out.append("  ".join(cell.ljust(widths[i]) if i != 1 else cell.rjust(widths[i]) for i, cell in enumerate(row)).rstrip())
            if j == 0:
                out.append("  ".join("-" * w for w in widths))
        return out

    def lines(self) -> list[str]:
        s = self.session
        out: list[str] = []
        if s.records:
            out += self.table()
            gated = [r for r in s.records if r.status != "baseline"]
            failed = sum(r.status in ("fail", "missing", "refused") for r in gated)
            out.append(f"{len(gated)} gates, {failed} failed ({s.thresholds_path})")
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
            out.append(f"images: {c.generated} generated, {c.from_cache} from cache")
        if c.blank:
            out.append(f"{len(c.blank)} generated image(s) are entirely black (safety checker? NaN output?); "
                       "they are scored as they are:")
            out += [f"  {b}" for b in c.blank[:10]] + ([f"  ... and {len(c.blank) - 10} more"] if len(c.blank) > 10 else [])
        for kind in sorted(set(c.computed) | set(c.reused)):
            out.append(f"{kind}: {c.computed.get(kind, 0)} computed, {c.reused.get(kind, 0)} from cache")
        if c.corrupt:
            out.append(f"{len(c.corrupt)} unreadable cache entr{'y' if len(c.corrupt) == 1 else 'ies'} found and made again:")
            out += [f"  {p}" for p in c.corrupt[:10]]
        if s.written:
            out.append(f"updated {len(s.written)} gate(s) in {s.thresholds_path}:")
            for r in s.records:
                if r.status == "written" and r.gate in s.written:
                    old = "new" if r.bound is None else f"{r.direction} {r.bound:g}"
                    out.append(f"  {r.gate}: {old} -> {r.direction} {r.write:g}")
        if s.proposed:
            out.append(f"{len(s.proposed)} gate(s) missing; proposed bounds written to {proposed_path(s.thresholds_path)}")
        refused = [r for r in s.records if r.status == "refused"]
        if refused:
            out.append(f"refused to loosen {len(refused)} gate(s) (use --t2i-allow-loosen after review):")
            out += [f"  {r.gate}: {r.direction} {r.bound:g} -> {r.value:.6f}" for r in refused]
        changed = {}
        for r in s.records:
            for k, (old, new) in r.provenance_changes.items():
                changed.setdefault(k, set()).add((str(old), str(new)))
        if changed:
            n = sum(1 for r in s.records if r.provenance_changes)
            out.append(f"WARNING: {n} gate(s) were set under other settings:")
            for k, pairs in sorted(changed.items()):
                out.append(f"  {k}: " + "; ".join(f"{a} -> {b}" for a, b in sorted(pairs)))
        if s.unused:
            out.append(f"{len(s.unused)} gate(s) in {s.thresholds_path} were not used by any test:")
            out += [f"  {g}" for g in s.unused[:20]] + ([f"  ... and {len(s.unused) - 20} more"] if len(s.unused) > 20 else [])
        return out
