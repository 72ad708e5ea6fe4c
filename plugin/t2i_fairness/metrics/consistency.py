"""DIG In's Object Consistency Indicator (section 4.4): the mean over objects of each object's
10th-percentile CLIPScore, the raw cosine of image and object name (as the authors' code computes it).
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

PERCENTILE = 10.0
higher_is_better = True


def cosine_similarities(image_embeddings, text_embeddings) -> np.ndarray:
    """Row-wise cosine between matched image and text embeddings (n, d) x (n, d) -> (n,); a ValueError
    for shapes that differ or are not 2-D, or a zero row.
    """
    a = np.asarray(image_embeddings, dtype=np.float64)
    b = np.asarray(text_embeddings, dtype=np.float64)
    if a.ndim != 2 or a.shape != b.shape:
        raise ValueError(
            f"image_embeddings and text_embeddings are expected to be 2-D with the same shape, but got {a.shape} and {b.shape}"
        )
    na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    if (na == 0).any() or (nb == 0).any():
        raise ValueError("an embedding has zero norm; cosine similarity is undefined")
    return np.einsum("ij,ij->i", a, b) / (na * nb)


def _object_percentiles_update(cosines_by_object: Mapping[str, Sequence[float]]) -> dict[str, float]:
    out = {}
    for obj, values in cosines_by_object.items():
        arr = np.asarray(values, dtype=np.float64).ravel()
        if arr.size == 0:
            raise ValueError(f"object {obj!r} has no CLIPScores")
        if not np.isfinite(arr).all():
            raise ValueError(f"object {obj!r} has {int((~np.isfinite(arr)).sum())} non-finite CLIPScore(s)")
        out[obj] = float(np.percentile(arr, PERCENTILE, method="linear"))
    return out


def object_percentiles(cosines_by_object: Mapping[str, Sequence[float]]) -> dict[str, float]:
    """Per object, the 10th-percentile CLIPScore (linear interpolation)."""
    return _object_percentiles_update(cosines_by_object)


def object_consistency(cosines_by_object: Mapping[str, Sequence[float]]) -> float:
    """The mean over objects of each object's 10th-percentile CLIPScore.

    Example:
        >>> round(object_consistency({"bag": [0.2] * 5, "stove": [0.1, 0.3]}), 4)
        0.16
    """
    if not cosines_by_object:
        raise ValueError("cosines_by_object is empty: no objects to score")
    per_object = _object_percentiles_update(cosines_by_object)
    return math.fsum(per_object.values()) / len(per_object)
