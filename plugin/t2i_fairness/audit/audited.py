"""A gate over a judged share, decided on its human labels and its scorer's judgements together (PPI).

A ``mean`` (CIS_K): the scorer-only term reads each prompt's mean judgement (prompts are the independent units; a
prompt's images and components move together), the rectifier the labelled units (drawn one per prompt by the audit's
sample); the evidence is :func:`t2i_fairness.metrics.ppi.prediction_powered` (its exact form: finite-sample limits
valid at the run's per-gate level; ``bench/bench_audit.py`` measures them). A ``worst`` (the rate floor) is the worst
of such a mean per group (:func:`~t2i_fairness.metrics.evidence.worst_of`); a ``linear`` (the drop per component)
the union bound over such means (:func:`~t2i_fairness.metrics.ppi.prediction_powered_sum`); a ``distance``
(word-level) the same over groups of independent images, as a distance from its centre.
Every group the value reads needs a label; otherwise the gate is not audited and says which groups lack one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from t2i_fairness.audit.labels import Labels, labels_for
from t2i_fairness.audit.units import JudgedShare

__all__ = ["Audited", "agreement", "audited"]


@dataclass(frozen=True)
class Audited:
    """``evidence`` (None without labels for the gate), the counts and the scorer's agreement per group."""

    evidence: object
    labels: int
    judgements: int
    agreement: dict  # group -> {"sensitivity": (value, low, high, n), "specificity": ...}
    scorer: str
    path: str
    unlabelled_groups: tuple[str, ...] = ()  # groups the value reads with no label (the gate is then not audited)

    def rests_on(self) -> str:
        """What the audited verdict rests on, in one clause."""
        if self.evidence is None:
            missing = self.unlabelled_groups
            why = (f"no label of this gate in {self.path}" if not self.labels else
                   f"{len(missing)} of its groups have no label in {self.path} ({', '.join(missing[:5])}"
                   + (", ..." if len(missing) > 5 else "") + ")")
            return f"not audited: {why}; the verdict rests on {self.judgements:,} {self.scorer} judgements alone"
        parts = []
        for group, rates in self.agreement.items():
            for name, (value, low, high, n) in rates.items():
                parts.append(f"scorer {name} in {group} " + (f"{value:.2f} [{low:.2f}, {high:.2f}] (n={n})"
                                                             if n else "unmeasured (no such label)"))
        return (f"{self.labels:,} human labels ({self.path}), {self.judgements:,} {self.scorer} judgements; "
                + "; ".join(parts))


def agreement(truth, judged, groups, confidence: float = 0.95) -> dict:
    """Per group: the scorer's sensitivity (yes among true yes) and specificity (no among true no), each
    ``(value, low, high, n)`` with its Wilson interval at ``confidence`` (``None`` where no such label exists).

    Example:
        >>> agreement([1, 1, 1, 0], [1, 1, 0, 0], ["a"] * 4)["a"]["sensitivity"][0]
        0.6666666666666666
    """
    from t2i_fairness.metrics.intervals import precision_interval

    truth, judged, groups = np.asarray(truth), np.asarray(judged), np.asarray(groups)
    out = {}
    for g in sorted(set(groups.tolist())):
        rates = {}
        for name, positive in (("sensitivity", 1), ("specificity", 0)):
            pick = (groups == g) & (truth == positive)
            if not pick.any():
                rates[name] = (None, None, None, 0)
                continue
            iv = precision_interval(judged[pick] == positive, confidence=confidence)
            rates[name] = (float(iv.estimate), float(iv.low), float(iv.high), int(pick.sum()))
        out[str(g)] = rates
    return out


def audited(gate: str, share: JudgedShare, labels: Labels, *, confidence: float = 0.95,
            form: str = "exact") -> Audited:
    """The audited evidence of ``gate`` and what it rests on.

    Raises:
        LabelsError: a label of the gate that does not match its units (file and line).
    """
    found = labels_for(labels, gate, share)
    n_units = len(share.units)
    if not found:
        return Audited(None, 0, n_units, {}, share.scorer, str(labels.path))
    idx = np.array([i for i, _ in found])
    truth = np.array([t for _, t in found], dtype=float)
    judged = np.array([share.units[i].judged for i in idx], dtype=float)
    groups = [share.units[i].group for i in idx]
    rates = agreement(truth, judged, groups, confidence)
    labelled = set(groups)
    missing = tuple(g for g in share.groups if g not in labelled)
    if missing:
        return Audited(None, len(found), n_units, rates, share.scorer, str(labels.path), missing)
    return Audited(_evidence(share, truth, judged, np.array(groups), confidence, form), len(found), n_units, rates,
                   share.scorer, str(labels.path))


def _evidence(share: JudgedShare, truth, judged, groups, confidence: float, form: str):
    """The audited evidence of each form (see the module)."""
    from t2i_fairness.metrics.evidence import worst_of
    from t2i_fairness.metrics.ppi import prediction_powered, prediction_powered_sum

    if share.form == "mean":
        return prediction_powered(truth, judged, share.cluster_means(), confidence=confidence, form=form, means=True)
    clustered, parts = share.clustered, share.by_group()

    def term(g: str):
        mine = groups == g
        values = parts[g].cluster_means() if clustered else [u.judged for u in parts[g].units]
        return prediction_powered(truth[mine], judged[mine], values, confidence=confidence, form=form,
                                  means=clustered)

    if share.form == "worst":
        return worst_of({g: term(g) for g in share.groups}, confidence=confidence, total=share.total)
    weights = [(g, w) for g, w in share.weights if w != 0.0]
    return prediction_powered_sum([term(g) for g, _ in weights], [w for _, w in weights], centre=share.centre,
                                  absolute=share.form == "distance", confidence=confidence)
