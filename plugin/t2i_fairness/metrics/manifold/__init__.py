"""Precision, recall, density and coverage of a generated feature set against a real one.

One module per job: :mod:`.scores` (the four scores and the reference manifold), :mod:`.balls`
(which generated image lies in which real ball), :mod:`.inputs` (validation, deduplication) and
:mod:`.exact` (the exact k-NN engine). docs/manifold.md says why every decision is exact.
"""

from __future__ import annotations

import os  # noqa: F401  (tests patch os.replace through this module)

from t2i_fairness.metrics.manifold.balls import Membership, ball_membership, membership, pair_distances
from t2i_fairness.metrics.manifold.exact import (  # noqa: F401  (tests read the engine's parts here)
    _F32, _FALLBACK_MIN_PAIRS, _Bounds, _Frame, _identity_block, _prepare,
)
from t2i_fairness.metrics.manifold.inputs import DEDUPE_CHOICES, DEFAULT_NEAREST_K, Dedupe
from t2i_fairness.metrics.manifold.scores import (
    ReferenceManifold, dedupe_index, deduplicate, prdc, precision_coverage, real_radii,
)

__all__ = [
    "Dedupe",
    "Membership",
    "ReferenceManifold",
    "ball_membership",
    "dedupe_index",
    "deduplicate",
    "membership",
    "pair_distances",
    "prdc",
    "precision_coverage",
    "real_radii",
]
