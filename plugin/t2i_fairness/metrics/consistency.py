"""DIG In's Object Consistency Indicator (section 4.4): the mean over objects of each object's
10th-percentile CLIPScore, the raw cosine of image and object name (as the authors' code computes it).
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

PERCENTILE = 10.0
higher_is_better = True


def zero_shot_labels(image_features: np.ndarray, group_features: np.ndarray) -> np.ndarray:
    """CLIP's zero-shot choice for each image: the text (unit rows: a group, an object name) with the highest cosine
    similarity (word-level groups; DIG In consistency's object recognition on labelled real images).

    Raises:
        ValueError: if the arrays are not 2-D with the same width, or there are fewer than 2 groups.

    Example:
        >>> zero_shot_labels(np.array([[1.0, 0.0], [0.6, 0.8]]), np.array([[0.0, 1.0], [1.0, 0.0]])).tolist()
        [1, 0]
    """
    img, grp = np.asarray(image_features, dtype=float), np.asarray(group_features, dtype=float)
    if img.ndim != 2 or grp.ndim != 2 or img.shape[1] != grp.shape[1]:
        raise ValueError(
            f"`image_features` and `group_features` must be 2-D with the same width, but got {img.shape} and {grp.shape}"
        )
    if grp.shape[0] < 2:
        raise ValueError(f"`group_features` must hold at least 2 groups, but got {grp.shape[0]}")
    return np.argmax(img @ grp.T, axis=1)


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
