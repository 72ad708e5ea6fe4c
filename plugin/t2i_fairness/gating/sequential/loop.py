"""The round loop of ``--t2i-sequential``: a study's selected gates, decided look by look (plain, no pytest).

At each planned look before ``N`` :class:`Rounds` asks the study at that look (``look(study, n)``: the first ``n``
of the fixed-N run, byte for byte) for the indicator of every gate still open, decides each
(:func:`~t2i_fairness.gating.sequential.rules.decide_look`) and closes those that stopped. Each gate test then
reads the indicator of the look where its gate stopped, or the one at ``N``, with its
:class:`~t2i_fairness.gating.sequential.look.Look` in ``Indicator.sequential``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from t2i_fairness.gating.sequential.look import Look, Reason
from t2i_fairness.gating.sequential.plan import futility_levels, spending_shares
from t2i_fairness.gating.sequential.rules import CURTAIL_GAMMA, REASONS, decide_look
from t2i_fairness.gating.sequential.stopping import open_groups
from t2i_fairness.metrics.evidence import WorstOf

__all__ = ["GROUP_PARAMETERS", "GateCallSpec", "Rounds"]

#: the parameters through which a worst-of indicator method measures only some of its groups
GROUP_PARAMETERS = ("groups", "total", "cleared")


@dataclass(frozen=True)
class GateCallSpec:
    """A selected gate of a study: its id and the indicator method (and arguments) that makes it."""

    gate: str
    method: str
    kwargs: tuple[tuple[str, Any], ...]

    @property
    def key(self) -> tuple[str, tuple[tuple[str, Any], ...]]:
        return self.method, self.kwargs


def _key(method: str, kwargs: Mapping[str, Any]) -> tuple[str, tuple[tuple[str, Any], ...]]:
    """A gate's key: its method and arguments, without a worst-of method's ``groups``/``total``/``cleared`` left at
    ``None`` (the indicator decorator passes every parameter, its defaults included; the gates' specs leave those out)."""
    return method, tuple(sorted((k, v) for k, v in kwargs.items() if not (k in GROUP_PARAMETERS and v is None)))



class Rounds:
    """Decide a study's selected gates in rounds.

    Args:
        study: the fixed-N study (its indicator methods route here).
        look: ``look(study, n)`` -> the study at ``n`` (images per prompt, or prompts).
        schedule: the planned looks, increasing, the last ``N``; ``unit``: what they count.
        gates: the selected gates with a bound; ``bounds``: gate id -> its bound.
        level: each gate's level (``alpha / m``).
        raw: ``raw(study, method, kwargs)`` -> the indicator, bypassing the rounds.
        group_methods: method -> its parameters: a worst-of method with ``groups``/``total`` measures only its groups
            still open at later looks; one with ``cleared`` is told the groups earlier looks found clear.
        curtail: pass gates early by curtailment (off under ``--t2i-inconclusive fail``).
        indifference: kind -> a team's indifference margin (a gate's ``Bound.indifference`` overrides it); none by
            default: a gate passes early only where a miss its limit leaves possible is one ``N`` would not catch.

    Example:
        >>> import numpy as np
        >>> from t2i_fairness.gating.indicator import Indicator
        >>> from t2i_fairness.gating.thresholds import Bound
        >>> from t2i_fairness.metrics.intervals import precision_interval
        >>> class S:  # a share of n images: 95% inside for "good", 50% for "bad"
        ...     def __init__(self, n): self.n = n
        ...     def rate(self, which):
        ...         k = int(round((0.95 if which == "good" else 0.5) * self.n))
        ...         return Indicator(k / self.n, self.n, "share", precision_interval(np.r_[np.ones(k, bool),
        ...                          np.zeros(self.n - k, bool)]))
        >>> gates = [GateCallSpec(w, "rate", (("which", w),)) for w in ("good", "bad")]
        >>> r = Rounds(S(1024), lambda s, n: S(n), [256, 512, 1024], "images", gates,
        ...            {"good": Bound("min", 0.8), "bad": Bound("min", 0.8)}, 1e-3,
        ...            raw=lambda s, m, kw: getattr(s, m)(**kw))
        >>> [(w, str(r.indicator("rate", {"which": w}).sequential.reason)) for w in ("good", "bad")]
        [('good', 'pass: futility'), ('bad', 'fail: alpha spent at this look')]
        >>> r.reached().n          # a report reads the last look a gate needed: both stopped at the first
        256
    """

    def __init__(self, study, look: Callable[[Any, int], Any], schedule: Sequence[int], unit: str,
                 gates: Sequence[GateCallSpec], bounds: Mapping[str, Any], level: float,
                 raw: Callable[[Any, str, Mapping[str, Any]], Any], group_methods: Mapping[str, Sequence[str]] | None = None,
                 curtail: bool = True, indifference: Mapping[str, float] | None = None):
        self.study, self.look, self.unit, self.level, self.raw = study, look, unit, float(level), raw
        # curtailment reads the test at N that fails a gate on significant evidence; under --t2i-inconclusive fail a
        # miss of the estimate alone fails it, a test curtailment does not model: off there
        self.curtail = bool(curtail)
        self.kind_margins = dict(indifference or {})
        self.schedule = [int(n) for n in schedule]
        if not self.schedule or any(b <= a for a, b in zip(self.schedule, self.schedule[1:])):
            raise ValueError(f"`schedule` must be increasing and non-empty, but got {list(schedule)}")
        self.gates = {g.key: g for g in gates}
        self.bounds = bounds
        self.decided: dict = {}  # key -> the indicator at the look where its gate stopped
        self.finals: dict = {}  # key -> the record of a gate that reached N
        self.groups: dict = {}  # key -> a worst-of gate's groups still open
        self.total: dict = {}  # key -> a worst-of gate's number of groups
        self.cleared: dict = {}  # key -> the groups earlier looks found clear of a miss (``cleared`` methods)
        self.group_methods = dict(group_methods or {})  # method -> its parameters (those with ``groups`` filter)
        self.seen: dict = {}  # look size -> the study at that look
        self.done = False

    def _run(self) -> None:
        self.done = True
        N = self.schedule[-1]
        shares = spending_shares([n / N for n in self.schedule], self.level)
        betas = futility_levels(len(self.schedule))
        prior: dict = {}
        can_fail: dict = {}  # key -> whether its looks may fail it (else its level is all spent at N)
        open_ = dict(self.gates)
        for k, n in enumerate(self.schedule[:-1]):
            if not open_:
                break
            at = self.seen[n] = self.look(self.study, n)
            for key, spec in list(open_.items()):
                bound = self.bounds[spec.gate]
                try:
                    ind = self.raw(at, spec.method, self._kwargs(spec))
                except Exception:  # noqa: BLE001  (not computable at this look: the test at N says what is wrong,
                    # as without rounds; indicator methods raise no gate outcome, only gate() does)
                    continue
                fraction = n / N if self.curtail else None
                margin = self.indifference(spec.gate, ind.kind)
                d = decide_look(ind, bound.value, bound.direction, level=self.level, share=float(shares[k]),
                                beta=betas[k], prior=prior.get(key), fraction=fraction,
                                units_grow=self.unit == "prompts", indifference=margin)
                can_fail[key] = ind.early_fail
                prior[key] = d.p_sequential
                if d.stopped:
                    self.decided[key] = ind.replace(at=at, sequential=self._record(ind.kind, d, k, n, float(shares[k]),
                                                                                     betas[k]))
                    del open_[key]
                elif self._by_group(spec) and isinstance(ind.evidence, WorstOf) and d.futility_limit is not None:
                    # a worst-of gate goes on with the groups not yet clear of a miss (the Bonferroni factor stays
                    # the gate's): its cleared groups' prompts get no more images for it
                    still = open_groups(ind.evidence, bound.value, bound.direction, betas[k], self.level, fraction,
                                        units_grow=self.unit == "prompts", indifference=margin)
                    if "cleared" in self.group_methods.get(spec.method, ()):
                        self.cleared[key] = self.cleared.get(key, frozenset()) | (
                            frozenset(ind.evidence.labels) - frozenset(still))
                    else:
                        self.groups[key] = still
                        self.total.setdefault(key, ind.evidence.selection)
        K = len(self.schedule)
        for key, spec in open_.items():
            # a gate its looks could not fail (coverage: its estimand grows) spends its whole level at N
            last = float(shares[-1]) if can_fail.get(key, True) else 1.0
            self.finals[key] = Look(None, Reason.FINAL, False, K, K, self.unit, N, N, 1.0, alpha_share=last,
                                    level=self.level * last, gate_level=self.level, earlier_looks_p=prior.get(key),
                                    open_groups=list(self.groups[key]) if key in self.groups else None,
                                    cleared_groups=sorted(self.cleared[key]) if key in self.cleared else None)

    def indifference(self, gate: str, kind: str) -> float | None:
        """The indifference margin a team chose for ``gate`` (its bound's), else for its ``kind``; ``None``: none."""
        margin = getattr(self.bounds.get(gate), "indifference", None)
        return self.kind_margins.get(kind) if margin is None else float(margin)

    def _by_group(self, spec: GateCallSpec) -> bool:
        """Whether the gate's indicator method measures a subset of its groups (a ``groups`` or ``cleared`` parameter)."""
        return bool({"groups", "cleared"} & set(self.group_methods.get(spec.method, ())))

    def _restricted(self, key, kwargs: Mapping[str, Any]) -> dict:
        """``kwargs`` with the groups the earlier looks left open (or found clear) of a worst-of gate."""
        kwargs = dict(kwargs)
        if key in self.groups:
            kwargs.update(groups=tuple(self.groups[key]), total=self.total[key])
        if key in self.cleared:
            kwargs.update(cleared=tuple(sorted(self.cleared[key])))
        return kwargs

    def _kwargs(self, spec: GateCallSpec) -> dict:
        return self._restricted(spec.key, spec.kwargs)

    def _record(self, kind: str, d, k: int, n: int, share: float, beta: float) -> Look:
        N = self.schedule[-1]
        rule = {}
        if d.reason == "futility":
            rule = dict(futility_limit=d.futility_limit, futility_miss=d.futility_miss, futility_beta=beta,
                        futility_basis=d.futility_basis)
        elif d.reason == "curtail":
            rule = dict(conditional_power=d.conditional_power, curtail_miss=d.curtail_miss, curtail_gamma=CURTAIL_GAMMA,
                        futility_beta=beta)
        return Look(kind, REASONS[d.reason], True, k + 1, len(self.schedule), self.unit, int(n), int(N),
                    round(n / N, 4), p=d.p, level=d.level, gate_level=self.level, alpha_share=share,
                    p_sequential=d.p_sequential, **rule)

    def reached(self):
        """The study a report reads (a test of the family that is not a gate): the last look any gate needed, the study
        at ``N`` when one ran to ``N`` or the loop has no gate. A report is not a gate: it holds no prompt open, so
        it shows the images the gates made (its own lines say how many)."""
        if not self.done:
            self._run()
        if self.finals or not self.decided:
            return self.study
        return self.seen[max(ind.sequential.at for ind in self.decided.values())]

    def indicator(self, method: str, kwargs: Mapping[str, Any]):
        """The indicator a gate test reads: at the look where its gate stopped, or at ``N``."""
        if not self.done:
            self._run()
        key = _key(method, kwargs)
        if key in self.decided:
            return self.decided[key]
        ind = self.raw(self.study, method, self._restricted(key, kwargs))
        if key in self.finals:
            return ind.replace(at=self.study, sequential=self.finals[key].replace(kind=ind.kind))
        return ind.replace(at=self.study)
