"""Session state: the plain object the pytest hooks feed (the report reads it: :mod:`t2i_fairness.report`).

Workers (pytest-xdist) evaluate gates read-only and send each verdict to the controller as a
report property; only the controller writes threshold files.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from t2i_fairness.gating.outcome import RunOutcome
from t2i_fairness.base.cache import CacheStats
from t2i_fairness.gating.thresholds import ThresholdFile

PROPERTY = "t2i_gate"  # test report property: a GateRecord as strict JSON text (report.ci.record_json)
SECTION = "t2i_section"  # a summary block {"title", "lines"}, as JSON text
ARTIFACT = "t2i_artifact"  # a file a test wrote {"nodeid", "path" relative to --t2i-artifacts}, as JSON text
# (JSON text, not dicts: pytest's --junitxml writes str() of each property, and CI parses it with json.loads)


_FLOATS = ("value", "bound", "write")
_NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def strict(obj: Any) -> Any:
    """``obj`` with non-finite floats replaced by ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` (strict JSON).

    Example:
        >>> strict({"a": [1.0, float("inf")], "b": float("nan")})
        {'a': [1.0, 'Infinity'], 'b': 'NaN'}
    """
    if hasattr(obj, "tolist") and not isinstance(obj, (str, bytes)):
        obj = obj.tolist()  # numpy scalars and arrays
    if isinstance(obj, float) and not math.isfinite(obj):
        return "NaN" if math.isnan(obj) else ("Infinity" if obj > 0 else "-Infinity")
    if isinstance(obj, Mapping):
        return {str(k): strict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [strict(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    return obj


def record_json(record: Mapping[str, Any]) -> str:
    """A gate record as strict JSON text (non-finite numbers as :func:`strict` writes them)."""
    return json.dumps(strict(record), allow_nan=False, default=str)


def record_from_json(text: str | Mapping[str, Any]) -> dict:
    """The record back from :func:`record_json` (numbers restored; a dict is passed through).

    Example:
        >>> record_from_json(record_json({"value": float("inf"), "interval": [0.1, float("nan")]}))
        {'value': inf, 'interval': [0.1, nan]}
    """
    data = dict(text) if isinstance(text, Mapping) else json.loads(text)
    for key in _FLOATS:
        if isinstance(data.get(key), str) and data[key] in _NONFINITE:
            data[key] = _NONFINITE[data[key]]
    if isinstance(data.get("interval"), list):
        data["interval"] = [_NONFINITE.get(v, v) if isinstance(v, str) else v for v in data["interval"]]
    return data


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
    bound_provenance: str | None = None  # the id of the settings the bound was written under (thresholds file)
    power: dict | None = None  # power against the kind's meaningful miss at the run's level (gating.power)
    units: dict | None = None  # {"ids", "values"}: the units the value is the mean of (gating.gate.unit_values)

    @property
    def failed(self) -> bool:
        """Whether the gate's test fails: a fail, a missing or refused bound, or a blocking inconclusive verdict."""
        return self.status in ("fail", "missing", "refused") or (self.status == "inconclusive" and self.blocking)

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
    outcome: RunOutcome = field(default_factory=RunOutcome)  # what pytest decided: tests, selection, interruption
    write_error: str | None = None  # the bounds or proposals could not be written (a full disk): the run fails
    # --t2i-sequential (None when off): {"alpha": the run's alpha, set by finish; optional, from the round
    # driver: "planned_images" (the fixed-N plan's images over the selection), "generation_seconds"}
    sequential: dict | None = None
    # what each process's workbenches loaded and released, and its peak resident memory (base.memory.ModelUse
    # payloads: one per role, and per worker under xdist)
    memory: list[dict] = field(default_factory=list)
    # the scorers' golden-set check before the first gate (spine.scorer_check.ScorerCheck; None: not run)
    scorer_check: object = None
    history: object = None  # history.view.HistoryView: the run's place in the run history, once recorded

    def add(self, data: dict | str) -> None:
        """A gate record (a dict, or the JSON text of the report property)."""
        self.records.append(GateRecord(**record_from_json(data)))

    def add_section(self, data: dict | str) -> None:
        data = json.loads(data) if isinstance(data, str) else data
        self.sections[data["title"]] = list(data["lines"])

    def add_artifact(self, data: dict | str) -> None:
        data = json.loads(data) if isinstance(data, str) else data
        if dict(data) not in self.artifacts:
            self.artifacts.append(dict(data))

    def merge_cache_stats(self, stats: dict) -> None:
        """Add one workbench's counts; entries are counted once across workers, so ``-n 0`` and ``-n 2`` on
        the same selection print the same computed and reused counts.
        """
        self.cache.generated += stats.get("generated", 0)
        self.cache.from_cache += stats.get("from_cache", 0)
        self.cache.regenerated += stats.get("regenerated", 0)
        self.cache.corrupt.extend(stats.get("corrupt", []))
        self.cache.blank.extend(stats.get("blank", []))
        for attr in ("computed", "reused", "digests"):
            mine = getattr(self.cache, attr)
            for k, v in stats.get(attr, {}).items():
                mine[k] = mine.get(k, 0) + v
        self.cache.identity.extend(n for n in stats.get("identity", []) if n not in self.cache.identity)  # workers say it alike
        if "computed_keys" not in stats:
            return
        c = self.cache
        for name in ("computed_keys", "reused_keys"):
            for kind, keys in stats.get(name, {}).items():
                getattr(c, name).setdefault(kind, set()).update(keys)
        c.generated_keys.update(stats.get("generated_keys", ()))
        c.from_cache_keys.update(stats.get("from_cache_keys", ()))
        for kind in set(c.computed_keys) | set(c.reused_keys):
            made = c.computed_keys.get(kind, set())
            c.computed[kind] = len(made)
            c.reused[kind] = len(c.reused_keys.get(kind, set()) - made)
        c.from_cache = len(c.from_cache_keys - c.generated_keys)

    def adjust(self, method: str, alpha: float, untested: int = 0) -> None:
        """Adjust the run's p-values (``holm``, ``bh`` or ``none``) and list the gates only the whole
        step-down rejects (they fail the run); ``untested`` gates count in ``m`` at ``p = 1``.
        """
        from t2i_fairness.metrics.decisions import adjust_p_values

        tested = [r for r in self.records if r.status in ("pass", "fail", "inconclusive") and r.p_value is not None
                  and r.p_value == r.p_value]
        self.multiplicity, self.alpha = method, alpha
        if not tested:
            return
        # --t2i-sequential: a gate's p-value is its sequential one (min over its looks of p_k / s_k: valid by the
        # union bound over the looks), so the step-down over every gate keeps the run's level
        adjusted = adjust_p_values([min(1.0, max(0.0, r.p_value)) for r in tested] + [1.0] * max(0, untested), method)
        for r, pa in zip(tested, adjusted):
            r.p_adjusted = float(pa)
            if r.status == "inconclusive" and r.p_adjusted <= alpha and method != "none":
                self.escalated.append(r.gate)

    def finish(self, write_files: bool, complete_run: bool, options=None, functions: list[str] | None = None,
               tests: Iterable[str] = (), thresholds: ThresholdFile | None = None) -> None:
        """Adjust the p-values across the run, write updates and proposals, and find gates no test used.

        Args:
            write_files: write bounds and proposals (the controller; workers only read).
            complete_run: the run reached the whole suite; only then are unused gates listed.
            functions: when file arguments named part of the suite, the test functions collected.
            tests: gate ids of the tests that ran (a test that crashed before its gate still used it).
            thresholds: the file as read when the run began; ``None`` reads it again.
        """
        if options is not None and write_files:
            self.adjust(options.multiplicity, options.alpha)
            if options.sequential:  # the reports' sequential block (report.sequential) reads it
                self.sequential = {**(self.sequential or {}), "alpha": float(options.alpha)}
            if options.canary:
                from t2i_fairness.generators.canary import catch_report

                self.canary_lines, self.canary_counts = catch_report(options.canary_spec or options.canary, self.records)
            if options.plan_samples:
                self.plan_lines = plan_sample_lines(self.records, options)
        if thresholds is None:
            try:
                thresholds = ThresholdFile.load(self.thresholds_path)
            except ValueError:
                return  # reported at configure time
        used = {r.gate for r in self.records if r.status != "baseline"} | set(tests)
        if complete_run and any(r.status != "baseline" for r in self.records):  # a run without gates (e.g. the project's own tests) says nothing
            unused = set(thresholds.gates) - used
            if functions is not None:
                unused = {g for g in unused if g.split("[", 1)[0] in set(functions)}
            self.unused = sorted(unused)
        if not write_files:
            return
        from t2i_fairness.gating.thresholds import write_back

        drop = []
        if options is not None and options.update_thresholds:  # a test gate's old bound (from a p-value) goes
            drop = [r.gate for r in self.records if r.gate in thresholds.gates and r.bound is None
                    and str((r.uncertainty or {}).get("method", "")).startswith("hypothesis test")]
        try:
            result = write_back(self.thresholds_path, self.records, drop=drop)
        except Exception as exc:  # noqa: BLE001  (a full disk: said in one line, the run fails; others as before)
            from t2i_fairness.errors import DiskFullError

            full = exc if isinstance(exc, DiskFullError) else exc.__cause__
            if not isinstance(full, DiskFullError):
                raise
            self.write_error = f"bounds not written: {full}"
            self.notes.append(self.write_error)
            return
        self.written += result.written
        self.proposed += result.proposed
        self.notes += result.notes
        if options is not None and options.update_thresholds and self.scorer_check is not None:
            from t2i_fairness.spine.scorer_check import write_record  # the scorers' golden outputs, with the bounds

            check = self.scorer_check
            write_record(check.path, check.now, keep=check.recorded)
            self.notes.append(f"scorer check: golden outputs of {', '.join(sorted(check.now))} written to {check.path}")


def plan_sample_lines(records, options) -> list[str]:
    """``--t2i-plan-samples DELTA``: per gate, the images per prompt that detect a change of DELTA beyond
    its bound with 80% power at the run's level.
    """
    from t2i_fairness.metrics.decisions import GateLevel, required_sample_size

    delta = float(options.plan_samples)
    tested = [r for r in records if r.status in ("pass", "fail", "inconclusive") and r.uncertainty]
    level = GateLevel.of(options, len(tested))
    out = [f"images per prompt to detect a change of {delta:g} with 80% power ({level.text}); the run used "
           f"{options.images_per_prompt}:"]
    for r in sorted(tested, key=lambda r: r.gate):
        se = (r.uncertainty or {}).get("se")
        if not se:
            out.append(f"  {r.gate}: no standard error (exact or degenerate); more images cannot be planned from it")
            continue
        need = required_sample_size(delta, float(se), options.images_per_prompt, alpha=level.value, power=0.8)
        detectable = (f"detectable now {r.mde:.3g}" if r.mde else
                      "no miss of its bound is caught with 80% power at this size")
        out.append(f"  {r.gate}: {need} (now se {float(se):.3g}, {detectable})")
    return out
