"""A gate over a judged share, decided on its human labels and its scorer's judgements together (PPI).

The scorer-only term reads each prompt's mean judgement (prompts are the independent units; a prompt's images and
components move together), the rectifier the labelled units (drawn one per prompt by the audit's sample); the
evidence is :func:`t2i_fairness.metrics.ppi.prediction_powered` (its exact form: finite-sample limits valid at the
run's per-gate level; ``bench/bench_audit.py`` measures them).
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

    def rests_on(self) -> str:
        """What the audited verdict rests on, in one clause."""
        if self.evidence is None:
            return (f"not audited: no label of this gate in {self.path}; the verdict rests on "
                    f"{self.judgements:,} {self.scorer} judgements alone")
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
    from t2i_fairness.metrics.ppi import prediction_powered

    found = labels_for(labels, gate, share)
    n_units = len(share.units)
    if not found:
        return Audited(None, 0, n_units, {}, share.scorer, str(labels.path))
    idx = np.array([i for i, _ in found])
    truth = np.array([t for _, t in found], dtype=float)
    judged = np.array([share.units[i].judged for i in idx], dtype=float)
    groups = [share.units[i].group for i in idx]
    evidence = prediction_powered(truth, judged, share.cluster_means(), confidence=confidence, form=form,
                                  means=True)
    return Audited(evidence, len(found), n_units, agreement(truth, judged, groups, confidence), share.scorer,
                   str(labels.path))
