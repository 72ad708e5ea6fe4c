"""The thresholds file: load and validate it (errors name file and line), edit it, write it back.

A YAML 1.2 mapping with ``gates:`` (gate id -> bound, provenance) and ``provenance:`` (id ->
settings). An update keeps every comment, order and number spelling it does not change (YAML
editing: :mod:`t2i_fairness.gating.yaml_roundtrip`); docs/thresholds.md gives the rules.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Literal, Mapping

from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.nodes import MappingNode, ScalarNode

from t2i_fairness.base.files import atomic_write_bytes
from t2i_fairness.gating.yaml_roundtrip import (
    MAX_BYTES,
    ThresholdFileError,
    _emit,
    _guess_indent,
    _insert,
    _line,
    _pairs,
    _parse,
    _plain,
    _read_text,
    _remove,
    _section,
    _sorted_pos,
)

__all__ = [
    "ApplyResult",
    "Bound",
    "BoundUpdate",
    "Direction",
    "GATE_EXTRA_KEYS",
    "HEADER",
    "MAX_BYTES",
    "ThresholdFile",
    "ThresholdFileError",
    "WriteBack",
    "atomic_write_text",
    "bound_problem",
    "proposed_path",
    "provenance_id",
    "write_back",
]

Direction = Literal["min", "max"]

HEADER = (
    "# t2i-fairness gates. Review changes to this file like code: a looser bound needs a reason.\n"
    "# min: the indicator must be at least this; max: at most this. 'provenance' names the settings\n"
    "# a bound was measured under (model, scorers, sample sizes, versions, device).\n"
)


@dataclass
class Bound:
    """A gate's bound. ``margin`` and ``level``: how far the update flow put it from the measured value
    (the measurement's uncertainty) and the probability that an equivalent model passes it; ``policy``:
    a hand-set floor or ceiling that the update flow never rewrites; ``indifference``: a team's indifference
    margin for ``--t2i-sequential`` (a look passes the gate early once any miss is below it; docs/sequential.md)."""

    direction: Direction
    value: float
    provenance: str | None = None
    margin: float | None = None
    level: float | None = None
    policy: bool = False
    indifference: float | None = None


def provenance_id(provenance: dict) -> str:
    """A short stable id of a settings mapping (the key under ``provenance:``).

    Example:
        >>> provenance_id({"seed": 0, "model": "m"}) == provenance_id({"model": "m", "seed": 0})
        True
    """
    return hashlib.sha256(json.dumps(provenance, sort_keys=True, default=str).encode()).hexdigest()[:8]


def proposed_path(path: Path) -> Path:
    """Where the proposals for gates missing from ``path`` go.

    Example:
        >>> proposed_path(Path("thresholds/tiny.yaml")).as_posix()
        'thresholds/tiny.proposed.yaml'
    """
    return path.with_name(path.stem + ".proposed.yaml")


def bound_problem(value: Any) -> str | None:
    """Why ``value`` cannot be a bound, or None if it can. The one place that says what a bound may be.

    Example:
        >>> bound_problem(1e-3) is None, bound_problem(0) is None
        (True, True)
        >>> bound_problem(True)
        'must be a number, got True'
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"must be a number, got {value!r}"
    try:
        value = float(value)
    except OverflowError:
        return "is too large to be a float"
    if math.isnan(value):
        return "must be a number, got nan"
    if math.isinf(value):
        return (f"is {'-' if value < 0 else ''}.inf, not a finite number: a bound at infinity can never fail "
                "(or never pass); write a finite bound or delete the gate")
    return None


@dataclass(frozen=True)
class BoundUpdate:
    """A bound to write: the gate, its direction, the value and the settings it was measured under."""

    gate: str
    direction: Direction
    value: float
    provenance: Mapping[str, Any]
    margin: float | None = None
    level: float | None = None


@dataclass
class ApplyResult:
    """What :meth:`ThresholdFile.apply_updates` did: gates ``changed`` (new or a new value), ``unchanged``
    (bound and provenance left as they were) and ``refused`` (one message each).
    """

    changed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


@dataclass
class ThresholdFile:
    """A thresholds file in memory: ``gates`` (gate id -> :class:`Bound`), ``provenances`` (id -> settings),
    ``lines`` (gate id -> 1-based line of its key, for messages) and ``bound_lines`` (of its bound).

    Edit ``gates``/``provenances`` directly or with :meth:`apply_updates`, then :meth:`save`; a file that
    was loaded is written back with its comments and order (docs/thresholds.md).

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "t.yaml"
        >>> _ = path.write_text("gates:\\n  a:   # lowered for REL-42\\n    min: 1e-3\\n")
        >>> t = ThresholdFile.load(path)
        >>> t.gates["a"], t.lines["a"]
        (Bound(direction='min', value=0.001, provenance=None, margin=None, level=None, policy=False, indifference=None), 2)
        >>> _ = t.apply_updates([BoundUpdate("b", "max", 0.5, {"seed": 1})])
        >>> print(t.dump())
        gates:
          a:   # lowered for REL-42
            min: 1e-3
          b:
            max: 0.5
            provenance: a4bbadc1
        provenance:
          a4bbadc1:
            seed: 1
        <BLANKLINE>
    """

    path: Path
    gates: dict[str, Bound] = field(default_factory=dict)
    provenances: dict[str, dict] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)
    bound_lines: dict[str, int] = field(default_factory=dict)  # gate id -> 1-based line of its min/max value
    indifference: dict[str, float] = field(default_factory=dict)  # gate kind -> a team's indifference margin
    _doc: Any = field(default=None, repr=False, compare=False)  # the round-trip document (CommentedMap)
    _preamble: str | None = field(default=None, repr=False, compare=False)  # a comments-only file's text
    _indent: int = field(default=2, repr=False, compare=False)
    _gate_keys: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)  # name -> doc key
    _prov_keys: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)  # id -> doc key
    _in_doc: dict[str, Bound] = field(default_factory=dict, repr=False, compare=False)  # what the doc says

    # ------------------------------------------------------------------------------ reading

    @classmethod
    def load(cls, path: str | Path) -> "ThresholdFile":
        """Read and validate a thresholds file (a symlink is followed); a missing file is an empty one.

        Raises ThresholdFileError naming the file and line for an unreadable file, invalid YAML, a
        repeated key or a bad entry.
        """
        path = Path(path)
        text = _read_text(path)
        if text is None:
            return cls(path)
        node, doc = _parse(path, text)
        if doc is None:
            comments_only = all(not ln.strip() or ln.lstrip().startswith("#") for ln in text.splitlines())
            return cls(path, _preamble=text if comments_only and text.strip() else None)
        if not isinstance(doc, CommentedMap) or not isinstance(node, MappingNode):
            raise ThresholdFileError(
                f"{path}:1: expected a mapping with 'gates' (and 'provenance'), got {type(doc).__name__}")
        top = _pairs(path, node, doc)
        unknown = [(raw, kn) for raw, (kn, _, _, _) in top.items() if raw not in ("gates", "provenance", "indifference")]
        if unknown:
            raise ThresholdFileError(
                f"{path}:{_line(unknown[0][1])}: unknown top-level key(s) {sorted(r for r, _ in unknown)}; "
                "expected 'gates' and 'provenance' (and optionally 'indifference')")
        out = cls(path, _doc=doc, _indent=_guess_indent(node))
        if "indifference" in top:
            out.indifference = _kind_margins(path, top["indifference"])

        provenances: dict[str, dict] = {}
        if "provenance" in top:
            kn, vn, _, section = top["provenance"]
            if section is not None:
                if not isinstance(section, CommentedMap):
                    raise ThresholdFileError(
                        f"{path}:{_line(kn)}: 'provenance' must be a mapping of id -> settings, got {type(section).__name__}")
                for pid, (pkn, pvn, dkey, settings) in _pairs(path, vn, section).items():
                    if not isinstance(settings, dict):
                        raise ThresholdFileError(
                            f"{path}:{_line(pkn)}: provenance {pid!r} must be a mapping of setting -> value, got {settings!r}")
                    provenances[pid] = _plain(settings)
                    out._prov_keys[pid] = dkey
        out.provenances = provenances

        if "gates" in top:
            kn, vn, _, section = top["gates"]
            if section is not None:
                if not isinstance(section, CommentedMap):
                    raise ThresholdFileError(
                        f"{path}:{_line(kn)}: 'gates' must be a mapping of gate id -> min/max, got {type(section).__name__}")
                for name, (gkn, gvn, dkey, entry) in _pairs(path, vn, section).items():
                    where = f"{path}:{_line(gkn)}"
                    if not isinstance(entry, dict):
                        raise ThresholdFileError(f"{where}: gate {name!r} must be a mapping with 'min' or 'max', got {entry!r}")
                    fields = _pairs(path, gvn, entry)
                    kinds = [k for k in ("min", "max") if k in fields]
                    extra = set(fields) - {"min", "max", "provenance", *GATE_EXTRA_KEYS}
                    if len(kinds) != 1 or extra:
                        raise ThresholdFileError(
                            f"{where}: gate {name!r} needs exactly one of 'min' or 'max' (and optionally "
                            f"'provenance', {', '.join(repr(k) for k in GATE_EXTRA_KEYS)}); got keys {sorted(fields)}")
                    extras = _gate_extras(path, name, fields)
                    _, value_node, _, value = fields[kinds[0]]
                    problem = bound_problem(value)
                    if problem:
                        raise ThresholdFileError(f"{path}:{_line(value_node)}: gate {name!r}: {kinds[0]} {problem}")
                    prov = None
                    if "provenance" in fields:
                        _, pnode, _, pval = fields["provenance"]
                        if pval is not None:
                            # the text as written: a legacy id such as 1234e567 must not turn into a float
                            prov = pnode.value if isinstance(pnode, ScalarNode) else str(pval)
                            if prov not in provenances:
                                raise ThresholdFileError(
                                    f"{path}:{_line(pnode)}: gate {name!r} names provenance {prov!r}, which the file does not define")
                    bound = Bound(kinds[0], float(value), prov, **extras)  # type: ignore[arg-type]
                    out.gates[name] = bound
                    out._in_doc[name] = copy.copy(bound)
                    out._gate_keys[name] = dkey
                    out.lines[name] = _line(gkn)
                    out.bound_lines[name] = _line(value_node)
        return out

    # ------------------------------------------------------------------------------ editing

    def apply_updates(self, updates: Iterable[BoundUpdate | Mapping[str, Any]]) -> ApplyResult:
        """Set bounds from measured values; a bound whose value is unchanged keeps its provenance.

        Args:
            updates: :class:`BoundUpdate` records, or mappings with ``gate``, ``direction``, ``value``
                and ``provenance`` (the settings dict the value was measured under).

        Returns:
            An :class:`ApplyResult`; non-finite values are refused, not written.

        Raises:
            ValueError: an update lacks a field or has a direction other than ``min``/``max``.
        """
        result = ApplyResult()
        for u in updates:
            u = _as_update(u)
            problem = bound_problem(u.value)
            if problem:
                result.refused.append(f"{u.gate}: {u.direction} {problem}; not written to {self.path}")
                continue
            value = float(u.value)
            old = self.gates.get(u.gate)
            if old is not None and old.policy:
                result.refused.append(f"{u.gate}: a policy bound ({old.direction} {old.value:g}) is hand-set; the update "
                                      f"flow never rewrites it (edit {self.path} to change it)")
                continue
            if old is not None and old.direction == u.direction and old.value == value:
                result.unchanged.append(u.gate)
                continue
            settings = _plain(dict(u.provenance))
            pid = provenance_id(settings)
            self.provenances[pid] = settings
            self.gates[u.gate] = Bound(u.direction, value, pid, u.margin, u.level,
                                       indifference=None if old is None else old.indifference)
            result.changed.append(u.gate)
        return result

    # ------------------------------------------------------------------------------ writing

    def dump(self) -> str:
        """The file's text: the loaded document with the edits applied, or a fresh file. Raises
        ThresholdFileError for a non-finite bound or an unknown provenance.
        """
        for name, b in self.gates.items():
            problem = bound_problem(b.value)
            if problem:
                raise ThresholdFileError(f"{self.path}: gate {name!r}: {b.direction} {problem}")
            if b.direction not in ("min", "max"):
                raise ThresholdFileError(f"{self.path}: gate {name!r}: direction must be 'min' or 'max', got {b.direction!r}")
            if b.provenance is not None and b.provenance not in self.provenances:
                raise ThresholdFileError(f"{self.path}: gate {name!r} names provenance {b.provenance!r}, which is not defined")
        if self._doc is None:
            self._doc = CommentedMap()
            self._doc["gates"] = CommentedMap()
            self._doc["provenance"] = CommentedMap()
            self._preamble = self._preamble if self._preamble is not None else HEADER
        self._sync()
        return (self._preamble or "") + _emit(self._doc, self._indent)

    def save(self, path: Path | None = None) -> Path:
        """Write :meth:`dump` atomically to ``path`` (default: where it was loaded from) and return the file
        written (a symlink's target). Raises ThresholdFileError as :meth:`dump` or when it cannot write.
        """
        target = Path(path or self.path)
        text = self.dump()
        try:
            return atomic_write_text(target, text)
        except OSError as exc:
            raise ThresholdFileError(f"{target}: cannot write: {exc.strerror or exc}") from exc

    def _sync(self) -> None:
        """Make the round-trip document say what ``gates``/``provenances`` say, touching only differences."""
        doc = self._doc
        gates = _section(doc, "gates", first=True)
        for name in [n for n in self._gate_keys if n not in self.gates]:
            _remove(gates, self._gate_keys.pop(name), parent=(doc, "gates"))
            self._in_doc.pop(name, None)
        for name in sorted(self.gates):
            b = self.gates[name]
            if name in self._gate_keys:
                _sync_entry(gates[self._gate_keys[name]], self._in_doc[name], b)
            else:
                entry = CommentedMap([(b.direction, b.value)] + ([("provenance", b.provenance)] if b.provenance else [])
                                     + [(k, v) for k, v in _extras_of(b).items()])
                _insert(gates, _sorted_pos(gates, self._gate_keys, name), name, entry, parent=(doc, "gates"))
                self._gate_keys[name] = name
            self._in_doc[name] = copy.copy(b)

        used = {b.provenance for b in self.gates.values() if b.provenance}
        if not used and "provenance" not in doc:
            return
        provs = _section(doc, "provenance", first=False)
        for pid in [p for p in self._prov_keys if p not in used]:
            _remove(provs, self._prov_keys.pop(pid), parent=(doc, "provenance"))
        for pid in sorted(used):
            settings = self.provenances[pid]
            if pid in self._prov_keys:
                if _plain(provs[self._prov_keys[pid]]) != _plain(settings):
                    provs[self._prov_keys[pid]] = CommentedMap(settings)
            else:
                _insert(provs, _sorted_pos(provs, self._prov_keys, pid), pid, CommentedMap(settings), parent=(doc, "provenance"))
                self._prov_keys[pid] = pid


@dataclass
class WriteBack:
    """What :func:`write_back` wrote: gate ids updated in the thresholds file, gate ids proposed in
    ``<file>.proposed.yaml``, and lines to show the user (refusals, a corrupt proposal file set aside)."""

    written: list[str] = field(default_factory=list)
    proposed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def write_back(thresholds_path: str | Path, records: Iterable[Any], drop: Iterable[str] = ()) -> WriteBack:
    """Write a run's gate records back: ``written`` ones into the thresholds file, ``missing`` ones into
    ``<file>.proposed.yaml``; an unreadable proposal file is set aside as ``<name>.corrupt-<time>``.

    Args:
        records: mappings or objects with ``gate``, ``status``, ``direction``, ``write`` and ``provenance``.
        drop: gates whose entry is removed (hypothesis-test gates, judged at the run's level).

    Raises:
        ThresholdFileError: the thresholds file itself cannot be read or written (names it).

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "t.yaml"
        >>> r = write_back(path, [{"gate": "g", "status": "missing", "direction": "min", "write": 0.25,
        ...                        "provenance": {"seed": 0}}])
        >>> r.proposed, ThresholdFile.load(proposed_path(path)).gates["g"].value
        (['g'], 0.25)
    """
    path = Path(thresholds_path)
    records = list(records)
    out = WriteBack()
    updates = [_update_from_record(r) for r in records if _get(r, "status") == "written" and _get(r, "write") is not None]
    missing = [_update_from_record(r) for r in records if _get(r, "status") == "missing" and _get(r, "write") is not None]
    drop = list(drop)
    if updates or drop:
        thresholds = ThresholdFile.load(path)
        result = thresholds.apply_updates(updates)
        out.notes += result.refused
        removed = [g for g in drop if thresholds.gates.pop(g, None) is not None]
        out.notes += [f"{g}: removed its bound from {path}: a hypothesis-test gate fails when its H0 is rejected at "
                      "the run's level, not against a bound written from an earlier p-value" for g in removed]
        if result.changed or removed:
            thresholds.save()
            out.written += result.changed
    if missing:
        target = proposed_path(path)
        try:
            proposal = ThresholdFile.load(target)
        except ThresholdFileError as exc:
            aside = _set_aside(target)
            out.notes.append(f"{target} could not be read ({exc}); kept it as {aside} and wrote this run's "
                             f"proposals to a new {target.name}")
            proposal = ThresholdFile(target)
        result = proposal.apply_updates(missing)
        out.notes += result.refused
        proposal.save()
        out.proposed += result.changed + result.unchanged
    return out


def atomic_write_text(path: str | Path, text: str, *, encoding: str = "utf-8") -> Path:
    """Replace a file's content atomically (symlinks written through, mode and group kept)."""
    return atomic_write_bytes(path, text.encode(encoding))


def _set_aside(path: Path) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%S")
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while aside.exists() or aside.is_symlink():
        aside = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
        n += 1
    os.replace(path, aside)
    return aside


def _get(record: Any, name: str) -> Any:
    return record.get(name) if isinstance(record, Mapping) else getattr(record, name, None)


def _update_from_record(record: Any) -> BoundUpdate:
    margin = _get(record, "write_margin") if _has(record, "write_margin") else None
    level = _get(record, "write_level") if _has(record, "write_level") else None
    return BoundUpdate(str(_get(record, "gate")), _get(record, "direction"), _get(record, "write"),
                       _get(record, "provenance") or {}, margin, level)


def _has(record: Any, name: str) -> bool:
    return name in record if isinstance(record, Mapping) else hasattr(record, name)


def _as_update(u: BoundUpdate | Mapping[str, Any]) -> BoundUpdate:
    if isinstance(u, Mapping):
        missing = [k for k in ("gate", "direction", "value", "provenance") if k not in u]
        if missing:
            raise ValueError(f"update {dict(u)!r} lacks {missing}")
        u = BoundUpdate(str(u["gate"]), u["direction"], u["value"], u["provenance"] or {}, u.get("margin"), u.get("level"))
    if u.direction not in ("min", "max"):
        raise ValueError(f"update for gate {u.gate!r}: direction must be 'min' or 'max', got {u.direction!r}")
    return u


GATE_EXTRA_KEYS = ("margin", "level", "policy", "indifference")


def _extras_of(b: Bound) -> dict[str, Any]:
    """The optional keys of a gate's entry, in file order, as they are written."""
    out: dict[str, Any] = {}
    if b.margin is not None:
        out["margin"] = b.margin
    if b.level is not None:
        out["level"] = b.level
    if b.policy:
        out["policy"] = True
    if b.indifference is not None:
        out["indifference"] = b.indifference
    return out


def _kind_margins(path: Path, item) -> dict[str, float]:
    """The top-level ``indifference:`` section: gate kind -> a team's indifference margin (>= 0), file:line errors."""
    from t2i_fairness.gating.indicator import KINDS

    kn, vn, _, section = item
    if section is None:
        return {}
    if not isinstance(section, CommentedMap):
        raise ThresholdFileError(f"{path}:{_line(kn)}: 'indifference' must be a mapping of gate kind -> margin, "
                                 f"got {type(section).__name__}")
    out = {}
    for kind, (ikn, ivn, _, value) in _pairs(path, vn, section).items():
        if kind not in KINDS:
            raise ThresholdFileError(f"{path}:{_line(ikn)}: indifference: unknown gate kind {kind!r}; one of {sorted(KINDS)}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) < math.inf:
            raise ThresholdFileError(f"{path}:{_line(ivn)}: indifference: {kind} must be a finite number >= 0, got {value!r}")
        out[kind] = float(value)
    return out


def _gate_extras(path: Path, name: str, fields: dict) -> dict[str, Any]:
    """Validate ``margin`` and ``indifference`` (finite, >= 0), ``level`` (in (0, 1)) and ``policy`` (a bool) with
    file:line errors."""
    out: dict[str, Any] = {}
    for key in GATE_EXTRA_KEYS:
        if key not in fields:
            continue
        _, node, _, value = fields[key]
        where = f"{path}:{_line(node)}: gate {name!r}: {key}"
        if key == "policy":
            if not isinstance(value, bool):
                raise ThresholdFileError(f"{where} must be true or false, got {value!r}")
            out[key] = value
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
            raise ThresholdFileError(f"{where} must be a finite number, got {value!r}")
        value = float(value)
        if key in ("margin", "indifference") and value < 0:
            raise ThresholdFileError(f"{where} must be >= 0, got {value!r}")
        if key == "level" and not 0.0 < value < 1.0:
            raise ThresholdFileError(f"{where} must be a probability in (0, 1), got {value!r}")
        out[key] = value
    return out


def _sync_entry(entry: CommentedMap, was: Bound, now: Bound) -> None:
    """Edit one gate's mapping from ``was`` to ``now``, keeping its comments."""
    if was.direction != now.direction:
        pos = list(entry).index(was.direction)
        ca = entry.ca.items.pop(was.direction, None)
        del entry[was.direction]
        entry.insert(pos, now.direction, now.value)
        if ca is not None:
            entry.ca.items[now.direction] = ca
    elif float(entry[now.direction]) != now.value:
        entry[now.direction] = now.value
    if was.provenance != now.provenance:
        if now.provenance is None:
            _remove(entry, "provenance", parent=None)
        elif "provenance" in entry:
            entry["provenance"] = now.provenance
        else:
            _insert(entry, len(entry), "provenance", now.provenance, parent=None)
    before, after = _extras_of(was), _extras_of(now)
    for key in GATE_EXTRA_KEYS:
        if key in before and key not in after:
            _remove(entry, key, parent=None)
        elif key in after and before.get(key) != after[key]:
            if key in entry:
                entry[key] = after[key]
            else:
                _insert(entry, len(entry), key, after[key], parent=None)
