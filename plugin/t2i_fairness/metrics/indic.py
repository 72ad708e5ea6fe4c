"""IndicTTI indicators: correctness (CLGC, IGC, LGC) and representation (SCAL, SCWL, DWL) per language.

Mittal et al. (ECCV 2024), Section 4: means of cosine similarities between embeddings the caller
computed, in [-1, 1] (DWL in [0, 2]). One language's images are ``(n_prompts, n_images, dim)``,
prompt vectors ``(n_prompts, dim)``, prompt ``k`` the same in every array; many languages are a
mapping ``code -> array``. Every indicator is a plain mean over pairs (docs/indicators.md).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from t2i_fairness.vocab.languages import ENGLISH

__all__ = [
    "HIGHER_IS_BETTER",
    "RELATIVE_MODES",
    "clgc",
    "dwl",
    "igc",
    "lgc",
    "mean_relative_to_english",
    "relative_to_english",
    "scal",
    "scal_matrix",
    "scal_overall",
    "scwl",
]

# All six indicators: higher is better (more faithful, more consistent, more distinct).
HIGHER_IS_BETTER: dict[str, bool] = {"clgc": True, "igc": True, "lgc": True, "scal": True, "scwl": True, "dwl": True}
RELATIVE_MODES: tuple[str, ...] = ("difference", "ratio")

_SHAPES = {2: "(n_prompts, dim)", 3: "(n_prompts, n_images, dim)"}


# ---------------------------------------------------------------- validation (public boundary only)


def _unit_features(name: str, value: object, ndim: int, min_images: int = 1, min_prompts: int = 1) -> np.ndarray:
    """``value`` as float64 unit vectors along the last axis, after checking it."""
    array = np.asarray(value)
    expected = _SHAPES[ndim]
    if array.dtype.kind not in "biuf":
        raise ValueError(f"expected `{name}` to hold real numbers, but got dtype {array.dtype}")
    if array.ndim != ndim:
        raise ValueError(f"expected `{name}` to have shape {expected}, but got shape {array.shape}")
    if array.shape[0] < min_prompts:
        raise ValueError(
            f"expected `{name}` {expected} to have n_prompts >= {min_prompts}, but got shape {array.shape}"
        )
    if ndim == 3 and array.shape[1] < min_images:
        raise ValueError(f"expected `{name}` {expected} to have n_images >= {min_images}, but got shape {array.shape}")
    if array.shape[-1] < 1:
        raise ValueError(f"expected `{name}` {expected} to have dim >= 1, but got shape {array.shape}")
    array = array.astype(np.float64, copy=False)
    if not np.isfinite(array).all():
        index = tuple(int(i) for i in np.argwhere(~np.isfinite(array))[0])
        raise ValueError(f"`{name}` of shape {array.shape} holds a non-finite value at index {index}")
    norms = np.linalg.norm(array, axis=-1, keepdims=True)
    if not (norms > 0).all():
        index = tuple(int(i) for i in np.argwhere(norms[..., 0] == 0)[0])
        raise ValueError(
            f"`{name}` of shape {array.shape} has a zero vector at index {index}; its cosine similarity is undefined"
        )
    return array / norms


def _same_prompts_and_dim(name_a: str, a: np.ndarray, name_b: str, b: np.ndarray) -> None:
    if a.shape[0] != b.shape[0] or a.shape[-1] != b.shape[-1]:
        raise ValueError(
            f"expected `{name_a}` and `{name_b}` to have the same n_prompts (first axis) and dim (last axis), "
            f"but got shapes {a.shape} and {b.shape}"
        )


def _check_mode(mode: str) -> None:
    if mode not in RELATIVE_MODES:
        raise ValueError(f"unknown mode {mode!r}; choose from {list(RELATIVE_MODES)}")


def _clip(value: float, low: float = -1.0, high: float = 1.0) -> float:
    """Rounding can put a mean of cosines a few ulps outside its range."""
    return float(min(max(value, low), high))


# ---------------------------------------------------------------- update (per prompt) and compute (mean)


def _grounded_update(anchors: np.ndarray, images: np.ndarray) -> np.ndarray:
    """(n_prompts,): the mean cosine between each prompt's anchor and its images (unit inputs)."""
    return np.einsum("pd,pd->p", anchors, images.mean(axis=1))


def _scal_update(images_a: np.ndarray, images_b: np.ndarray, include_same_seed: bool) -> np.ndarray:
    """(n_prompts,): the mean cosine over the cross pairs (u, v) of one prompt's images in a and b."""
    n_a, n_b = images_a.shape[1], images_b.shape[1]
    total = np.einsum("pd,pd->p", images_a.sum(axis=1), images_b.sum(axis=1))  # sum over all (u, v)
    if include_same_seed:
        return total / (n_a * n_b)
    same = np.einsum("pnd,pnd->p", images_a, images_b)  # the pairs u == v
    return (total - same) / (n_a * (n_a - 1))


def _scwl_update(images: np.ndarray) -> np.ndarray:
    """(n_prompts,): the mean cosine over the unordered pairs u < v of one prompt's images."""
    n = images.shape[1]
    sums = images.sum(axis=1)
    all_pairs = np.einsum("pd,pd->p", sums, sums)  # ordered pairs, u == v included
    self_pairs = np.einsum("pnd,pnd->p", images, images)  # ~= n
    return (all_pairs - self_pairs) / (n * (n - 1))


def _dwl_update(images: np.ndarray) -> tuple[np.ndarray, float, int, int]:
    """Sufficient statistics of DWL, additive over batches of prompts: (sum of all image vectors,
    sum over prompts of |sum of the prompt's vectors|^2, n_prompts, n_images)."""
    sums = images.sum(axis=1)
    return sums.sum(axis=0), float(np.einsum("pd,pd->", sums, sums)), images.shape[0], images.shape[1]


def _dwl_compute(stats: tuple[np.ndarray, float, int, int]) -> float:
    total, within, n_prompts, n_images = stats
    cross = float(total @ total) - within  # sum over ordered image pairs of different prompts
    return _clip(1.0 - cross / (n_images * n_images * n_prompts * (n_prompts - 1)), 0.0, 2.0)


def _mean_compute(per_prompt: np.ndarray) -> float:
    return _clip(float(per_prompt.mean()))


# ---------------------------------------------------------------- correctness


def clgc(prompt_text_features: np.ndarray, caption_text_features: np.ndarray) -> float:
    """Cyclic Language-Grounded Correctness (Eq. 3): mean cos(t(English prompt k), t(caption of image r)).

    Args:
        prompt_text_features: (n_prompts, dim), t of each English prompt.
        caption_text_features: (n_prompts, n_images, dim), t of the caption of each image.

    Example:
        >>> prompts = np.array([[1.0, 0.0], [0.0, 1.0]])
        >>> captions = np.array([[[1.0, 0.0], [0.0, 1.0]], [[0.0, 2.0], [0.0, 3.0]]])
        >>> clgc(prompts, captions)  # prompt 0: (1 + 0) / 2, prompt 1: (1 + 1) / 2
        0.75
    """
    anchors = _unit_features("prompt_text_features", prompt_text_features, 2)
    images = _unit_features("caption_text_features", caption_text_features, 3)
    _same_prompts_and_dim("prompt_text_features", anchors, "caption_text_features", images)
    return _mean_compute(_grounded_update(anchors, images))


def igc(reference_image_features: np.ndarray, image_features: np.ndarray) -> float:
    """Image-Grounded Correctness (Eq. 4): mean cos(f(reference image k), f(image r of prompt k))."""
    anchors = _unit_features("reference_image_features", reference_image_features, 2)
    images = _unit_features("image_features", image_features, 3)
    _same_prompts_and_dim("reference_image_features", anchors, "image_features", images)
    return _mean_compute(_grounded_update(anchors, images))


def lgc(prompt_features: np.ndarray, image_features: np.ndarray) -> float:
    """Language-Grounded Correctness (Eq. 5): mean cos(text(English prompt k), image(image r)) in one space."""
    anchors = _unit_features("prompt_features", prompt_features, 2)
    images = _unit_features("image_features", image_features, 3)
    _same_prompts_and_dim("prompt_features", anchors, "image_features", images)
    return _mean_compute(_grounded_update(anchors, images))


# ---------------------------------------------------------------- representation


def scal(image_features_a: np.ndarray, image_features_b: np.ndarray, *, include_same_seed: bool = True) -> float:
    """Self-Consistency Across Languages of a pair (Eqs. 6-7): mean cosine over cross pairs of a prompt's images.

    ``include_same_seed=False`` leaves out ``u == v`` (the paper's literal ``u != v``); then
    ``scal(x, x, include_same_seed=False) == scwl(x)``.

    Example:
        >>> a, b = np.array([[[1.0, 0.0], [0.0, 1.0]]]), np.array([[[1.0, 0.0], [1.0, 0.0]]])
        >>> scal(a, b), scal(a, a, include_same_seed=False)
        (0.5, 0.0)
    """
    a = _unit_features("image_features_a", image_features_a, 3)
    b = _unit_features("image_features_b", image_features_b, 3)
    _same_prompts_and_dim("image_features_a", a, "image_features_b", b)
    if not include_same_seed:
        _check_same_seeds({"image_features_a": a, "image_features_b": b})
    return _mean_compute(_scal_update(a, b, include_same_seed))


def _check_same_seeds(arrays: Mapping[str, np.ndarray]) -> None:
    counts = {name: array.shape[1] for name, array in arrays.items()}
    if len(set(counts.values())) != 1 or min(counts.values()) < 2:
        shapes = {name: array.shape for name, array in arrays.items()}
        raise ValueError(
            "include_same_seed=False pairs image u of one language with image u (same seed) of the other, "
            f"so every array needs the same n_images >= 2, but got shapes {shapes}"
        )


def scal_matrix(
    image_features: Mapping[str, np.ndarray],
    languages: Sequence[str] | None = None,
    *,
    include_same_seed: bool = True,
) -> np.ndarray:
    """SCAL of every language pair: a symmetric (n_languages, n_languages) matrix, diagonal included.

    Args:
        languages: the rows' order, a subset of the keys; default the mapping's order.
    """
    order = list(image_features) if languages is None else list(languages)
    unknown = [code for code in order if code not in image_features]
    if unknown:
        raise ValueError(f"language(s) {unknown} not in `image_features`; keys: {list(image_features)}")
    repeated = sorted({code for code in order if order.count(code) > 1})
    if repeated:
        raise ValueError(f"language(s) {repeated} given twice in `languages` {order}")
    if not order:
        raise ValueError("expected at least one language in `image_features`, but got none")
    units = {code: _unit_features(f"image_features[{code!r}]", image_features[code], 3) for code in order}
    first = order[0]
    for code in order[1:]:
        _same_prompts_and_dim(f"image_features[{first!r}]", units[first], f"image_features[{code!r}]", units[code])
    size = len(order)
    matrix = np.empty((size, size))
    if include_same_seed:
        # Mean over all cross pairs of prompt k = <mean of a's unit vectors, mean of b's unit vectors>.
        means = np.stack([units[code].mean(axis=1) for code in order])  # (L, P, d)
        flat = means.reshape(size, -1)
        matrix[:] = flat @ flat.T / means.shape[1]
    else:
        _check_same_seeds({f"image_features[{code!r}]": units[code] for code in order})
        for i, code_a in enumerate(order):
            for j in range(i, size):
                matrix[i, j] = matrix[j, i] = _scal_update(units[code_a], units[order[j]], False).mean()
    return np.clip(matrix, -1.0, 1.0)


def scal_overall(matrix: np.ndarray) -> float:
    """The overall SCAL (Eq. 9): the mean of the matrix's strict upper triangle."""
    array = np.asarray(matrix, dtype=np.float64)
    if array.ndim != 2 or array.shape[0] != array.shape[1] or array.shape[0] < 2:
        raise ValueError(f"expected `matrix` to have shape (n_languages, n_languages) with n_languages >= 2, "
                         f"but got shape {array.shape}")
    if not np.isfinite(array).all():
        raise ValueError(f"`matrix` of shape {array.shape} holds non-finite values")
    if not np.allclose(array, array.T, rtol=1e-9, atol=1e-12):
        raise ValueError(f"expected `matrix` to be symmetric (SCAL(a, b) == SCAL(b, a)), but got {array.tolist()}")
    upper = array[np.triu_indices(array.shape[0], k=1)]
    return _clip(float(upper.mean()))


def scwl(image_features: np.ndarray) -> float:
    """Self-Consistency Within Language (Eqs. 10-11): mean cosine over pairs ``u < v`` of a prompt's images.

    Example:
        >>> scwl(np.array([[[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]]))  # pairs: 1, 0, 0
        0.3333333333333333
    """
    images = _unit_features("image_features", image_features, 3, min_images=2)
    return _mean_compute(_scwl_update(images))


def dwl(image_features: np.ndarray) -> float:
    """Distinctiveness Within Language (Eq. 12): 1 minus the mean cosine between images of different prompts."""
    images = _unit_features("image_features", image_features, 3, min_prompts=2)
    return _dwl_compute(_dwl_update(images))


# ---------------------------------------------------------------- relative to English


def relative_to_english(
    scores: Mapping[str, float], *, mode: str = "difference", english: str = ENGLISH
) -> dict[str, float]:
    """Each language's score against English's: ``"difference"`` (English minus it) or ``"ratio"``.

    Example:
        >>> relative_to_english({"eng_Latn": 0.5, "hin_Deva": 0.375, "tam_Taml": 0.25})
        {'hin_Deva': 0.125, 'tam_Taml': 0.25}
    """
    _check_mode(mode)
    if english not in scores:
        raise ValueError(f"`scores` has no English entry {english!r}; keys: {list(scores)}")
    others = [code for code in scores if code != english]
    if not others:
        raise ValueError(f"`scores` needs a language besides {english!r}, but got keys {list(scores)}")
    bad = {code: value for code, value in scores.items() if not np.isfinite(value)}
    if bad:
        raise ValueError(f"`scores` holds non-finite values {bad}")
    base = float(scores[english])
    if mode == "ratio" and base <= 0:
        raise ValueError(f"mode='ratio' needs a positive English score, but `scores[{english!r}]` is {base}")
    if mode == "difference":
        return {code: base - float(scores[code]) for code in others}
    return {code: float(scores[code]) / base for code in others}


def mean_relative_to_english(
    scores: Mapping[str, float], *, mode: str = "difference", english: str = ENGLISH
) -> float:
    """The paper's single number per model: English against the average of the other languages."""
    relative = relative_to_english(scores, mode=mode, english=english)
    return float(np.mean(list(relative.values())))
