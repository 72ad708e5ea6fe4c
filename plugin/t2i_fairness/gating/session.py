"""Session state: the plain object the pytest hooks feed (the report reads it: :mod:`t2i_fairness.report`).

Workers (pytest-xdist) evaluate gates read-only and send each verdict to the controller as a
report property; only the controller writes threshold files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from t2i_fairness.spine.cache import CacheStats
from t2i_fairness.gating.thresholds import ThresholdFile

PROPERTY = "t2i_gate"  # test report property: a GateRecord as a dict
SECTION = "t2i_section"  # a summary block {"title", "lines"}
ARTIFACT = "t2i_artifact"  # a file a test wrote {"nodeid", "path" relative to --t2i-artifacts}


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
    family: str | None = None  # the paper family of the gate's test module

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
    notes: list[str] = field(default_factory=list)  # what the write-back has to say (refusals, a corrupt proposal file)
    vocabulary: object = None  # report.labels.Vocabulary: the families' label tokens, for the reports

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
        for attr in ("computed", "reused", "digests"):
            mine = getattr(self.cache, attr)
            for k, v in stats.get(attr, {}).items():
                mine[k] = mine.get(k, 0) + v
        self.cache.identity.extend(n for n in stats.get("identity", []) if n not in self.cache.identity)  # workers say it alike

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
        from t2i_fairness.gating.thresholds import write_back

        result = write_back(self.thresholds_path, self.records)
        self.written += result.written
        self.proposed += result.proposed
        self.notes += result.notes
