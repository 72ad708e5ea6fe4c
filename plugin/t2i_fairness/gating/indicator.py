"""What a study hands a gate: one indicator's value, the evidence it is judged by, and its kind.

A family's study makes each gated indicator in one method and returns an :class:`Indicator`; the gate test
calls ``gate(indicator)``. Because the study makes the number, the round loop of ``--t2i-sequential`` can
compute every selected indicator at each planned look without calling a test.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping

__all__ = ["Indicator", "KINDS"]

#: gate kinds and what ``--t2i-sequential`` may stop them for: ``fail`` where an early fail is valid (the estimand does
#: not move with the sample), ``futility`` and ``curtail`` the early passes (``docs/sequential.md``)
KINDS: dict[str, frozenset[str]] = {
    "share": frozenset({"fail", "futility", "curtail"}),  # a share of images (or of prompts' images)
    "coverage": frozenset({"futility", "curtail"}),  # a share of real balls: its expectation grows with n
    "worst": frozenset({"fail", "futility", "curtail"}),  # the worst of G groups (of coverages: no early fail)
    "spread": frozenset({"fail", "futility", "curtail"}),  # best minus worst, an improvement, a drop per component
    "ratio": frozenset({"fail", "futility", "curtail"}),  # worst / best, a language's score over English's
    "percentile": frozenset({"futility", "curtail"}),  # a mean of low percentiles: its expectation shifts with n
    "score": frozenset({"fail", "futility", "curtail"}),  # means of cosines
    # a family's test (no bound): futility against an effect of its own (``Family.futility_miss``); its permutation
    # p cannot reach an early look's share of the level, so the test at N decides at its whole level
    "test": frozenset({"futility"}),
    "hoeffding": frozenset({"fail", "futility", "curtail"}),  # a mean bounded by Hoeffding's inequality
}


@dataclass(frozen=True)
class Indicator:
    """One gate's measurement, as a study makes it.

    Attributes:
        n, kind: the units behind the value, and a key of :data:`KINDS`.
        evidence: the test it is judged by (an :class:`~t2i_fairness.metrics.intervals.Interval` or one of
            :mod:`t2i_fairness.metrics.evidence`), a ``(low, high)`` pair, or ``None``.
        test: the hypothesis test of a gate with no bound.
        undefined, inconclusive, skip: why it cannot be computed or does not apply.
        grows: the estimand grows with the images (coverage-like): no early fail.
        at, sequential: the study (a look's) it was measured on; where and why the round loop stopped it.
        judged: a share of per-image judgements: its units (:class:`~t2i_fairness.audit.JudgedShare`), which
            ``t2i-fairness audit`` samples and ``--t2i-audit`` decides on with human labels.

    Example:
        >>> ind = Indicator(0.8, 60, "share")
        >>> ind.direction, ind.early_fail, Indicator(0.5, 20, "coverage").early_fail
        ('min', True, False)
    """

    value: float
    n: int
    kind: str
    evidence: Any = None
    higher_is_better: bool = True
    test: Any = None
    details: Mapping[str, Any] = field(default_factory=dict)
    provenance: Mapping[str, Any] = field(default_factory=dict)
    undefined: str | None = None
    inconclusive: bool = False
    skip: str | None = None
    grows: bool = False
    at: Any = field(default=None, repr=False, compare=False)
    sequential: Any = None
    judged: Any = field(default=None, repr=False, compare=False)  # an audit.JudgedShare: the judgements it is the mean of

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown indicator kind {self.kind!r}; one of {sorted(KINDS)}")

    @property
    def direction(self) -> str:
        return "min" if self.higher_is_better else "max"

    @property
    def early_fail(self) -> bool:
        """Whether a look before ``N`` may fail this gate (its kind allows it and its estimand does not grow)."""
        return "fail" in KINDS[self.kind] and not self.grows

    @property
    def curtail(self) -> bool:
        """Whether a look may pass this gate by curtailment: its kind allows it and its estimand does not move, or only
        grows toward a floor (a coverage; a low percentile whose evidence models its move).
        """
        if "curtail" not in KINDS[self.kind]:
            return False
        if self.kind == "percentile":  # only an evidence that models its move (``PercentileMean``)
            return bool(getattr(self.evidence, "models_drift", False))
        return not self.grows or (self.kind in ("coverage", "worst") and self.direction == "min")

    def replace(self, **changes) -> "Indicator":
        return replace(self, **changes)
