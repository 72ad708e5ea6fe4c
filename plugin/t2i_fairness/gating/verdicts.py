"""Threshold gates: the YAML file, the verdict on one measurement, and what to write back.

Semantics follow pytest-regressions and syrupy: nothing new passes silently.
- A gate missing from the file fails, and its measured value is proposed in ``<file>.proposed.yaml``.
- ``--t2i-update-thresholds`` writes measured values and reports each change, but refuses to loosen
  a gate (lower a ``min``, raise a ``max``) unless ``--t2i-allow-loosen`` is given.
- Every gate records the provenance it was set under; a measurement made under other settings
  warns, so a bound is never silently compared with a number it was not meant for.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from t2i_fairness.spine.cache import atomic_write_bytes

Direction = Literal["min", "max"]
DECIMALS = 6


class ThresholdFileError(ValueError):
    """The thresholds YAML is malformed; the message names the file and line."""


@dataclass
class Measurement:
    """One indicator value as a gate sees it.

    ``interval`` is a (low, high) confidence interval when one was computed; ``details`` holds
    what a person triaging a failure wants (per-object values, group sizes).
    """

    gate: str
    value: float
    n: int
    direction: Direction = "min"
    interval: tuple[float, float] | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["interval"] = list(self.interval) if self.interval is not None else None
        return d


@dataclass
class Bound:
    direction: Direction
    value: float
    provenance: str | None = None


def provenance_id(provenance: dict) -> str:
    return hashlib.sha256(json.dumps(provenance, sort_keys=True, default=str).encode()).hexdigest()[:8]


def safe_round(value: float, direction: Direction) -> float:
    """Round to 6 decimals towards passing, so the measured value itself passes the written bound.

    Example:
        >>> safe_round(0.12345678, "min"), safe_round(0.12345612, "max")
        (0.123456, 0.123457)
    """
    if not math.isfinite(value):
        return value
    scale = 10**DECIMALS
    if not math.isfinite(value * scale) or abs(value) >= 2**52 / scale:
        return value  # too large for 6 decimals to matter (or to round without overflow)
    if direction == "min":
        out = math.floor(value * scale) / scale
        return out if out <= value else out - 1 / scale
    out = math.ceil(value * scale) / scale
    return out if out >= value else out + 1 / scale


def passes(value: float, bound: Bound, interval: tuple[float, float] | None = None, mode: str = "point") -> bool:
    """``point``: the estimate meets the bound. ``significant``: some of the interval does (fail only
    when the whole interval misses); without an interval, significant falls back to the estimate."""
    if math.isnan(value):
        return False
    if mode == "significant" and interval is not None:
        value = interval[1] if bound.direction == "min" else interval[0]
    return value >= bound.value if bound.direction == "min" else value <= bound.value


def loosens(new: float, old: Bound) -> bool:
    return new < old.value if old.direction == "min" else new > old.value


@dataclass
class ThresholdFile:
    path: Path
    gates: dict[str, Bound] = field(default_factory=dict)
    provenances: dict[str, dict] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)  # gate -> line in the file, for messages

    @classmethod
    def load(cls, path: str | Path) -> "ThresholdFile":
        """Read and validate a thresholds file; a missing file is an empty one.

        Raises:
            ThresholdFileError: YAML syntax errors and bad entries, with file and line.
        """
        path = Path(path)
        if not path.exists():
            return cls(path)
        text = path.read_text(encoding="utf-8")
        try:
            root = yaml.compose(text)
            data = yaml.safe_load(text)
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            where = f"{path}:{mark.line + 1}" if mark else str(path)
            raise ThresholdFileError(f"{where}: invalid YAML: {exc.problem or exc}") from None
        if data is None:
            return cls(path)
        if not isinstance(data, dict):
            raise ThresholdFileError(f"{path}:1: expected a mapping with 'gates' (and 'provenance'), got {type(data).__name__}")
        unknown = set(data) - {"gates", "provenance"}
        if unknown:
            raise ThresholdFileError(f"{path}:1: unknown top-level key(s) {sorted(unknown)}; expected 'gates' and 'provenance'")
        lines = _key_lines(root, "gates")
        for section in ("gates", "provenance"):
            dup = _duplicate_key(root, section)
            if dup:
                raise ThresholdFileError(f"{path}:{dup[1]}: {dup[0]!r} appears twice under '{section}' (YAML would keep only the last)")
        gates: dict[str, Bound] = {}
        entries = data.get("gates") or {}
        if not isinstance(entries, dict):
            raise ThresholdFileError(
                f"{path}:{_top_line(root, 'gates')}: 'gates' must be a mapping of gate id -> min/max, got {type(entries).__name__}"
            )
        provenances = data.get("provenance") or {}
        if not isinstance(provenances, dict):
            raise ThresholdFileError(f"{path}:{_top_line(root, 'provenance')}: 'provenance' must be a mapping of id -> settings")
        prov_lines = _key_lines(root, "provenance")
        for pid, settings in provenances.items():
            if not isinstance(settings, dict):
                raise ThresholdFileError(
                    f"{path}:{prov_lines.get(str(pid), '?')}: provenance {pid!r} must be a mapping of setting -> value, got {settings!r}"
                )
        for name, entry in entries.items():
            where = f"{path}:{lines.get(str(name), '?')}"
            if not isinstance(entry, dict):
                raise ThresholdFileError(f"{where}: gate {name!r} must be a mapping with 'min' or 'max', got {entry!r}")
            kinds = [k for k in ("min", "max") if k in entry]
            extra = set(entry) - {"min", "max", "provenance"}
            if len(kinds) != 1 or extra:
                raise ThresholdFileError(
                    f"{where}: gate {name!r} needs exactly one of 'min' or 'max' (and optionally 'provenance'); got keys {sorted(entry)}"
                )
            value = entry[kinds[0]]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
                raise ThresholdFileError(f"{where}: gate {name!r}: {kinds[0]} must be a number, got {value!r}")
            prov = entry.get("provenance")
            if prov is not None and str(prov) not in provenances:
                raise ThresholdFileError(f"{where}: gate {name!r} names provenance {prov!r}, which the file does not define")
            gates[str(name)] = Bound(kinds[0], float(value), None if prov is None else str(prov))
        return cls(path, gates, {str(k): v for k, v in provenances.items()}, lines)

    def dump(self) -> str:
        used = {b.provenance for b in self.gates.values() if b.provenance}
        doc = {
            "gates": {
                name: {b.direction: b.value, **({"provenance": b.provenance} if b.provenance else {})}
                for name, b in sorted(self.gates.items())
            },
            "provenance": {k: v for k, v in sorted(self.provenances.items()) if k in used},
        }
        header = (
            "# t2i-fairness gates. Review changes to this file like code: a looser bound needs a reason.\n"
            "# min: the indicator must be at least this; max: at most this. 'provenance' names the settings\n"
            "# a bound was measured under (model, scorers, sample sizes, versions, device).\n"
        )
        return header + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=120)

    def save(self, path: Path | None = None) -> None:
        atomic_write_bytes(Path(path or self.path), self.dump().encode("utf-8"))


def _top_line(root, section: str) -> int | str:
    """Line number (1-based) of a top-level key, '?' if absent."""
    for key, _ in root.value if isinstance(root, yaml.MappingNode) else ():
        if getattr(key, "value", None) == section:
            return key.start_mark.line + 1
    return "?"


def _duplicate_key(root, section: str) -> tuple[str, int] | None:
    """The first key repeated under a top-level mapping key, with the line of its repetition."""
    seen: set[str] = set()
    for key, value in root.value if isinstance(root, yaml.MappingNode) else ():
        if getattr(key, "value", None) == section and isinstance(value, yaml.MappingNode):
            for k, _ in value.value:
                if str(k.value) in seen:
                    return str(k.value), k.start_mark.line + 1
                seen.add(str(k.value))
    return None


def _key_lines(root, section: str) -> dict[str, int]:
    """Line numbers (1-based) of the keys under a top-level mapping key."""
    out: dict[str, int] = {}
    if not isinstance(root, yaml.MappingNode):
        return out
    for key, value in root.value:
        if getattr(key, "value", None) == section and isinstance(value, yaml.MappingNode):
            for k, _ in value.value:
                out[str(k.value)] = k.start_mark.line + 1
    return out


def proposed_path(path: Path) -> Path:
    return path.with_name(path.stem + ".proposed.yaml")


def provenance_diff(stored: dict | None, current: dict) -> dict[str, tuple[Any, Any]]:
    """Fields whose value differs: name -> (stored, current)."""
    if stored is None:
        return {}
    keys = sorted(set(stored) | set(current))
    return {k: (stored.get(k), current.get(k)) for k in keys if stored.get(k) != current.get(k)}


@dataclass
class Verdict:
    """What the gate decided and what the controller should write."""

    status: Literal["pass", "fail", "missing", "written", "refused"]
    bound: Bound | None
    message: str
    write: float | None = None  # new bound to write (update mode) or propose (missing)
    provenance_changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.status in ("fail", "missing", "refused")


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.4f}"


def evaluate(
    m: Measurement,
    thresholds: ThresholdFile,
    provenance: dict,
    *,
    update: bool = False,
    allow_loosen: bool = False,
    mode: str = "point",
) -> Verdict:
    """Decide one gate.

    Example:
        >>> t = ThresholdFile(Path("t.yaml"), {"g": Bound("min", 0.5)})
        >>> evaluate(Measurement("g", 0.6, n=10), t, {}).status
        'pass'
        >>> evaluate(Measurement("g", 0.4, n=10), t, {}, update=True).status
        'refused'
    """
    bound = thresholds.gates.get(m.gate)
    stored = thresholds.provenances.get(bound.provenance) if bound and bound.provenance else None
    changes = provenance_diff(stored, provenance)
    interval = f" [{_fmt(m.interval[0])}, {_fmt(m.interval[1])}]" if m.interval else ""
    measured = f"measured {_fmt(m.value)}{interval} (n={m.n})"
    where = f"{thresholds.path}"
    if bound is None:
        proposal = None if math.isnan(m.value) else safe_round(m.value, m.direction)
        if update and proposal is not None:
            return Verdict("written", None, f"{m.gate}: new gate {m.direction}: {proposal} written to {where}", proposal)
        if proposal is None:
            return Verdict("missing", None, f"{m.gate}: no gate in {where}; {measured}: not a finite number, nothing to propose.")
        return Verdict(
            "missing",
            None,
            f"{m.gate}: no gate in {where}; {measured}. Proposed `{m.direction}: {proposal}` in "
            f"{proposed_path(thresholds.path)}: review it and copy it over, or run with --t2i-update-thresholds.",
            proposal,
        )
    ok = passes(m.value, bound, m.interval, mode)
    text = f"{m.gate}: {measured}, bound {bound.direction} {bound.value:g}" + (" (significant mode)" if mode == "significant" else "")
    if update and not math.isnan(m.value):
        new = safe_round(m.value, bound.direction)
        if loosens(new, bound) and not allow_loosen:
            return Verdict("refused", bound, f"{text}: refusing to loosen the gate to {new:g} without --t2i-allow-loosen", None, changes)
        if new != bound.value or changes:
            return Verdict("written", bound, f"{text}: bound {bound.value:g} -> {new:g}", new, changes)
        return Verdict("pass", bound, text, None, changes)
    return Verdict("pass" if ok else "fail", bound, text + ("" if ok else " FAILED"), None, changes)
