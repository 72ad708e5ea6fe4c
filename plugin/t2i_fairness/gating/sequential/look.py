"""Where and why a sequential gate stopped: :class:`Look`, the round loop's typed record, and :class:`Reason`.

Reports, the gate fixture and the benches read a look's attributes; only run.json holds it as a dict
(``details["sequential"]``, written by :meth:`Look.to_dict`, read back by :meth:`Look.from_dict`).
"""

from __future__ import annotations

import dataclasses
import enum
import math
from dataclasses import dataclass
from typing import Any, Mapping

__all__ = ["Look", "Reason", "json_number"]


class Reason(str, enum.Enum):
    """Why a gate stopped, as every report words it (the value is the text run.json holds)."""

    FAIL = "fail: alpha spent at this look"
    FUTILITY = "pass: futility"
    CURTAIL = "pass: curtailed"
    FINAL = "ran to N"
    OPEN = "open"

    def __str__(self) -> str:
        return self.value

    @property
    def failed(self) -> bool:
        return self is Reason.FAIL


_NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
#: run.json's keys in its order: an early stop's, then a gate that ran to N's
_EARLY = ("kind", "reason", "early", "round", "rounds", "unit", "at", "planned", "share_of_planned", "p", "level",
          "gate_level", "alpha_share", "p_sequential")
_FINAL = ("kind", "reason", "early", "round", "rounds", "unit", "at", "planned", "share_of_planned", "alpha_share",
          "level", "gate_level", "earlier_looks_p")
_BY_REASON = {Reason.FUTILITY: ("futility_limit", "futility_miss", "futility_beta", "futility_basis"),
              Reason.CURTAIL: ("conditional_power", "curtail_miss", "curtail_gamma", "futility_beta")}
_OPTIONAL = ("open_groups", "cleared_groups", "note")


def json_number(x: Any) -> float | None:
    """A number that may have crossed strict JSON (``"Infinity"``), or ``None``."""
    if isinstance(x, str):
        x = _NONFINITE.get(x)
    if x is None or isinstance(x, bool):
        return None
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class Look:
    """One gate's sequential record: the look where it stopped (``early``), or ``N`` after its looks.

    Its fields are run.json's keys (:meth:`to_dict`; read by attribute, never by key): the ``kind``, the
    ``reason``, look ``round`` of ``rounds`` at ``at`` of ``planned`` ``unit``; the look's ``p`` against the ``level`` it
    spends (``alpha_share`` of the ``gate_level``) and the sequential p-value (``p_sequential``; at ``N``,
    ``earlier_looks_p``); the futility or curtailment rule that passed it (``futility_miss``: the margin it allowed,
    ``futility_basis`` why: ``"at N"``, ``"indifference"`` or ``"effect"``); a worst-of gate's open or cleared groups.

    Example:
        >>> look = Look("share", Reason.FUTILITY, True, 1, 3, "images per prompt", 4, 16, 0.25, p=0.3,
        ...             level=1e-9, gate_level=1e-4, alpha_share=1e-5, futility_limit=0.9, futility_miss=0.05,
        ...             futility_beta=0.0025)
        >>> Look.from_dict(look.to_dict()) == look, list(look.to_dict())[:3]
        (True, ['kind', 'reason', 'early'])
    """

    kind: str | None
    reason: Reason
    early: bool
    round: int | None
    rounds: int | None
    unit: str | None
    at: int | None
    planned: int | None
    share_of_planned: float | None = None
    p: float | None = None
    level: float | None = None
    gate_level: float | None = None
    alpha_share: float | None = None
    p_sequential: float | None = None
    earlier_looks_p: float | None = None
    futility_limit: float | None = None
    futility_miss: float | None = None
    futility_beta: float | None = None
    futility_basis: str | None = None
    conditional_power: float | None = None
    curtail_miss: float | None = None
    curtail_gamma: float | None = None
    open_groups: list | None = None
    cleared_groups: list | None = None
    note: str | None = None

    def replace(self, **changes) -> "Look":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        """The run.json form (its keys and their order)."""
        keys = _EARLY + _BY_REASON.get(self.reason, ()) if self.early else _FINAL
        out = {k: getattr(self, k) for k in keys}
        if self.kind is None:
            del out["kind"]
        out["reason"] = str(self.reason)
        out.update({k: getattr(self, k) for k in _OPTIONAL if getattr(self, k) is not None})
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Look":
        """A look from its run.json form (numbers may be strict JSON's ``"Infinity"``; an unknown reason is kept)."""
        ints = ("round", "rounds", "at", "planned")
        texts = ("kind", "unit", "note", "open_groups", "cleared_groups", "futility_basis")
        nums = {f.name for f in dataclasses.fields(cls)} - set(ints) - set(texts) - {"reason", "early"}
        values: dict[str, Any] = {k: data.get(k) for k in texts}
        for k in ints:
            v = json_number(data.get(k))
            values[k] = int(v) if v is not None and math.isfinite(v) else None
        values.update({k: json_number(data.get(k)) for k in nums})
        raw = data.get("reason")
        try:
            reason = None if raw is None else Reason(str(raw))
        except ValueError:
            reason = str(raw)  # a record another version wrote: its text is shown as is
        return cls(reason=reason, early=bool(data.get("early")), **values)

    @classmethod
    def of(cls, record: Any) -> "Look | None":
        """``record`` as a look: a look itself, its run.json dict, or ``None``."""
        if record is None or isinstance(record, cls):
            return record
        return cls.from_dict(record) if isinstance(record, Mapping) and record else None
