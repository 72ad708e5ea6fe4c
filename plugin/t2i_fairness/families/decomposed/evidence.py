"""Evidence beside a failing Decomposed-DIG precision or coverage gate, in the gate's masked feature space.

:func:`group_evidence` gathers one region in one setup from what the gate computed (nothing is
generated, segmented or encoded again): the generated rows it scored, those without a feature
(misses for precision) and the region's real images, masks outlined. Drawing is
:mod:`t2i_fairness.report.evidence`'s.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from t2i_fairness.families.decomposed.rules import SETUP_NAMES, has_features
from t2i_fairness.report.evidence import GeneratedImage, GroupEvidence, RealImage, on_failure_grids

__all__ = ["evidence", "group_evidence"]


def group_evidence(study, reference: str, template: str, region: str, setup: str) -> GroupEvidence | None:
    """One region's generated and real images in ``setup``'s feature space (``obj``, ``bg`` or ``full``),
    as the gate scored them; None where the region has no scores.

    Raises:
        ValueError: an unknown ``setup``.
    """
    if setup not in SETUP_NAMES:
        raise ValueError(f"setup must be one of {sorted(SETUP_NAMES)}, got {setup!r}")
    sc = study.scores(reference, template, region)  # the gate's own scores (memo), the region's or the template's
    if region not in sc.scores:
        return None
    manifold, kept = sc.real.manifolds[(region, setup)]
    score = sc.scores[region][setup]
    rows = np.asarray(sc.groups[region], dtype=int)
    feats = sc.features[setup][rows]
    store = study.models()[1] if setup != "full" else None

    def mask(item):
        return None if store is None else (lambda: store.get(item))

    def generated(i):
        it = sc.items[int(i)]
        return GeneratedImage(it.prompt or it.label, it.seed, it.load, mask(it))

    real = [sc.real.items[int(j)] for j in kept]
    return GroupEvidence(
        region, [generated(i) for i in rows[score.used]],
        [RealImage(it.label, it.object, it.region, it.load, mask(it)) for it in real],
        feats[score.used], manifold.features, manifold.radii, space=f"{SETUP_NAMES[setup]} ViT",
        missing=[generated(i) for i in rows[~has_features(feats)]],
        dropped=[generated(i) for i in rows[np.setdiff1d(np.flatnonzero(has_features(feats)), score.used)]])


def evidence(ind, reference: str, template: str, setup: str, metric: str, region: str | Callable[[], str],
             limit: int = 8) -> Callable[[], dict]:
    """A callable for ``t2i_report.on_failure(...)``: the region's grids in ``setup``'s space, on the study
    the indicator ``ind`` was measured on, drawn only when the gate fails. ``region`` may be a callable (the
    worst region, known once computed).

    Example:
        >>> callable(evidence(None, "synthetic", "object_in_region", "bg", "coverage", "africa"))
        True
    """
    return on_failure_grids(lambda: group_evidence(ind.at, reference, template, region() if callable(region) else region,
                                                   setup), metric, limit)
