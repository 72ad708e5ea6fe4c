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
    p_value: float | None = None  # one-sided, against the bound
    threshold: float | None = None  # the run-time level it was held to (alpha / m for holm and bh)
    p_adjusted: float | None = None  # across the run's gates (--t2i-multiplicity), set at the session's end
    mde: float | None = None  # smallest shift beyond the bound detected with 80% power at the run's level
    uncertainty: dict | None = None  # the interval's method, standard error, degrees of freedom, units
    write_margin: float | None = None  # the written/proposed bound's distance from the estimate
    write_level: float | None = None  # the probability an equivalent model passes that bound
    blocking: bool = False  # an inconclusive verdict that fails the test (--t2i-inconclusive fail)

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
    escalated: list[str] = field(default_factory=list)  # inconclusive gates that the whole step-down rejects
    multiplicity: str | None = None  # the adjustment used, once adjusted
    alpha: float | None = None
    canary_lines: list[str] = field(default_factory=list)  # which gates caught the run's canary
    plan_lines: list[str] = field(default_factory=list)  # --t2i-plan-samples: images per prompt needed per gate
    canary_counts: dict = field(default_factory=dict)
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

    def adjust(self, method: str, alpha: float) -> None:
        """Adjust the p-values of the run's gates across the run (``holm``, ``bh`` or ``none``) and list the
        gates that only the whole step-down rejects (their test was inconclusive at run time, where
        each gate is held to the procedure's first step, ``alpha / m``): they fail the run."""
        from t2i_fairness.metrics.decisions import adjust_p_values

        tested = [r for r in self.records if r.status in ("pass", "fail", "inconclusive") and r.p_value is not None
                  and r.p_value == r.p_value]
        self.multiplicity, self.alpha = method, alpha
        if not tested:
            return
        adjusted = adjust_p_values([min(1.0, max(0.0, r.p_value)) for r in tested], method)
        for r, pa in zip(tested, adjusted):
            r.p_adjusted = float(pa)
            if r.status == "inconclusive" and r.p_adjusted <= alpha and method != "none":
                self.escalated.append(r.gate)

    def finish(self, write_files: bool, complete_run: bool, options=None) -> None:
        """Adjust the p-values across the run, write updates and proposals (controller only) and find
        gates no test used."""
        if options is not None and write_files:
            self.adjust(options.multiplicity, options.alpha)
            if options.canary:
                from t2i_fairness.canaries import catch_report

                self.canary_lines, self.canary_counts = catch_report(options.canary, self.records)
            if options.plan_samples:
                self.plan_lines = plan_sample_lines(self.records, options)
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


def plan_sample_lines(records, options) -> list[str]:
    """``--t2i-plan-samples DELTA``: per gate, the images per prompt that detect a change of DELTA beyond its
    bound with 80% power at the run's level (the variance taken to fall as 1 / images; see
    :func:`t2i_fairness.metrics.decisions.required_sample_size` for where that is optimistic)."""
    from t2i_fairness.metrics.decisions import required_sample_size

    delta = float(options.plan_samples)
    tested = [r for r in records if r.status in ("pass", "fail", "inconclusive") and r.uncertainty]
    m = len(tested) if options.multiplicity in ("holm", "bh") else 1
    out = [f"images per prompt to detect a change of {delta:g} with 80% power (alpha {options.alpha:g} over {m} "
           f"gate(s)); the run used {options.images_per_prompt}:"]
    for r in sorted(tested, key=lambda r: r.gate):
        se = (r.uncertainty or {}).get("se")
        if not se:
            out.append(f"  {r.gate}: no standard error (exact or degenerate); more images cannot be planned from it")
            continue
        need = required_sample_size(delta, float(se), options.images_per_prompt, alpha=options.alpha, power=0.8,
                                    family_size=max(1, m))
        out.append(f"  {r.gate}: {need} (now se {float(se):.3g}, detectable now {r.mde:.3g})" if r.mde else
                   f"  {r.gate}: {need}")
    return out
