"""The thresholds YAML: per gate a bound (``min`` or ``max``) and the provenance it was measured under.

Loading validates every entry with file:line errors; writing goes through the one atomic write.
Semantics of a bound, and the verdict on a measurement, are in :mod:`t2i_fairness.gating.verdicts`.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import yaml

from t2i_fairness.spine.files import atomic_write_bytes

Direction = Literal["min", "max"]


class ThresholdFileError(ValueError):
    """The thresholds YAML is malformed; the message names the file and line."""


@dataclass
class Bound:
    direction: Direction
    value: float
    provenance: str | None = None


def provenance_id(provenance: dict) -> str:
    return hashlib.sha256(json.dumps(provenance, sort_keys=True, default=str).encode()).hexdigest()[:8]


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


