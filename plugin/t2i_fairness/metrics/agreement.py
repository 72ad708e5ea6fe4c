"""What a verdict rests on: a scorer's per-image judgements against labels, per gate group, and how
wrong the scorer would have to be to flip a verdict.

A CIS, word-level or consistency verdict is a statement about what a scorer says of the images. Where
labels exist (the procedural world's truth, a labelled reference set, a human audit) each judgement is a
:class:`Judgement` and :func:`agreement_by_group` gives the scorer's sensitivity and specificity per group
with exact (Clopper-Pearson) intervals; :func:`disagreeing` names the groups where the scorer's interval
lies below a floor. Without labels, :func:`flip_margin` says how large a net error of the scorer in the
failing group would flip the verdict, and :func:`labels_for_width` how many labels an audit needs for an
interval about as narrow as the scorer-only one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

__all__ = ["AGREEMENT_FLOOR", "Agreement", "Judgement", "agreement_by_group", "clopper_pearson", "disagreeing",
           "flip_margin", "labels_for_width"]

#: A scorer "disagrees with the labels" in a group when its sensitivity's or specificity's interval lies below this.
AGREEMENT_FLOOR = 0.9


@dataclass(frozen=True)
class Judgement:
    """One yes/no judgement a scorer made of one image, and its label when one exists.

    Attributes:
        key: the image's cache key; ``path``: its file.
        question: the question as the scorer was asked it (e.g. ``Does the image show a macaw?`` for a CIS component).
        group: the gate group it counts for (a CIS component, a word-level group).
        gate: the gate whose number rests on it.
        judged: the scorer's answer; ``truth``: the label (``None``: none).
    """

    key: str
    path: str
    question: str
    group: str
    gate: str
    judged: bool
    truth: bool | None = None


def clopper_pearson(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """The exact two-sided binomial interval (``(nan, nan)`` with no trials).

    Example:
        >>> [round(x, 4) for x in clopper_pearson(9, 10)]
        [0.555, 0.9975]
    """
    from scipy.stats import beta

    if trials <= 0:
        return math.nan, math.nan
    a = (1.0 - confidence) / 2.0
    low = 0.0 if successes == 0 else float(beta.ppf(a, successes, trials - successes + 1))
    high = 1.0 if successes == trials else float(beta.ppf(1.0 - a, successes + 1, trials - successes))
    return low, high


@dataclass(frozen=True)
class Agreement:
    """A scorer against labels in one group: ``positives`` labelled yes (``hits`` of them judged yes),
    ``negatives`` labelled no (``rejections`` of them judged no)."""

    group: str
    positives: int
    hits: int
    negatives: int
    rejections: int
    confidence: float = 0.95

    @property
    def sensitivity(self) -> float:
        return self.hits / self.positives if self.positives else math.nan

    @property
    def specificity(self) -> float:
        return self.rejections / self.negatives if self.negatives else math.nan

    @property
    def sensitivity_interval(self) -> tuple[float, float]:
        return clopper_pearson(self.hits, self.positives, self.confidence)

    @property
    def specificity_interval(self) -> tuple[float, float]:
        return clopper_pearson(self.rejections, self.negatives, self.confidence)

    @property
    def disagreement(self) -> float:
        """The share of labelled judgements the scorer got wrong."""
        n = self.positives + self.negatives
        return (n - self.hits - self.rejections) / n if n else math.nan

    def text(self) -> str:
        """``macaw: sensitivity 0.41 [0.30, 0.53] (n 64), specificity 1.00 [0.94, 1.00] (n 60)``."""
        parts = []
        for name, value, (lo, hi), n in (("sensitivity", self.sensitivity, self.sensitivity_interval, self.positives),
                                          ("specificity", self.specificity, self.specificity_interval, self.negatives)):
            if n:
                parts.append(f"{name} {value:.2f} [{lo:.2f}, {hi:.2f}] (n {n})")
        return f"{self.group}: " + (", ".join(parts) or "no labelled judgement")

    def to_dict(self) -> dict:
        return {"group": self.group, "positives": self.positives, "hits": self.hits, "negatives": self.negatives,
                "rejections": self.rejections, "sensitivity": self.sensitivity,
                "sensitivity_interval": list(self.sensitivity_interval), "specificity": self.specificity,
                "specificity_interval": list(self.specificity_interval)}


def agreement_by_group(judgements: Iterable[Judgement], confidence: float = 0.95) -> dict[str, Agreement]:
    """Per group, the scorer's agreement with the labelled judgements (unlabelled ones are left out).

    Example:
        >>> js = [Judgement("k", "p", "q", "crab", "g", j, t) for j, t in [(1, 1), (0, 1), (0, 0), (1, None)]]
        >>> a = agreement_by_group(js)["crab"]
        >>> a.sensitivity, a.specificity, a.positives
        (0.5, 1.0, 2)
    """
    counts: dict[str, list[int]] = {}
    for j in judgements:
        if j.truth is None:
            continue
        c = counts.setdefault(j.group, [0, 0, 0, 0])
        if j.truth:
            c[0] += 1
            c[1] += bool(j.judged)
        else:
            c[2] += 1
            c[3] += not j.judged
    return {g: Agreement(g, *c, confidence=confidence) for g, c in sorted(counts.items())}


def disagreeing(agreements: Iterable[Agreement], floor: float = AGREEMENT_FLOOR) -> list[Agreement]:
    """The groups where the scorer's sensitivity or specificity interval lies entirely below ``floor``."""
    out = []
    for a in agreements:
        highs = [iv[1] for iv, n in ((a.sensitivity_interval, a.positives), (a.specificity_interval, a.negatives)) if n]
        if highs and min(highs) < floor:
            out.append(a)
    return out


def flip_margin(direction: str, bound: float, interval: Sequence[float]) -> float:
    """How far the scorer's judgements would have to be off, net, in the gate's units (a share of what the
    group's images show) for the verdict to change: a min gate's interval upper end against its bound (a
    fail flips to not-failing once the truth is that much higher; a pass or an inconclusive verdict flips
    to fail once it is that much lower), a max gate's lower end.

    Example:
        >>> round(flip_margin("min", 0.65, (0.50, 0.62)), 4), round(flip_margin("max", 0.2, (0.05, 0.3)), 4)
        (0.03, 0.15)
    """
    lo, hi = float(interval[0]), float(interval[1])
    return abs(hi - bound) if direction == "min" else abs(bound - lo)


def labels_for_width(se: float, disagreement: float, ratio: float = 1.1) -> int:
    """Labels an audit needs for its prediction-powered interval to be at most ``ratio`` times as wide as the
    scorer-only one: PPI's variance is the scorer's ``se**2`` plus the rectifier's ``d (1 - d) / n``, so
    ``n = d (1 - d) / ((ratio**2 - 1) se**2)`` (``d``: the share of judgements the scorer gets wrong).

    Example:
        >>> labels_for_width(0.01, 0.1)
        4286
    """
    if se <= 0 or not math.isfinite(se):
        raise ValueError(f"`se` must be a positive number, got {se!r}")
    if not 0.0 <= disagreement <= 1.0 or ratio <= 1.0:
        raise ValueError(f"`disagreement` must be in [0, 1] and `ratio` > 1, got {disagreement!r}, {ratio!r}")
    var = disagreement * (1.0 - disagreement)
    return max(1, math.ceil(var / ((ratio**2 - 1.0) * se**2) - 1e-9)) if var > 0 else 1  # float dust is no label
