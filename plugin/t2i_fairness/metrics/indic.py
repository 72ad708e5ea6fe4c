"""IndicTTI indicators: correctness (CLGC, IGC, LGC) and representation (SCAL, SCWL, DWL) per language.

Mittal et al., "Navigating Text-to-Image Generative Bias across Indic Languages" (ECCV 2024),
Section 4. Every indicator is a mean of cosine similarities phi between embeddings that the caller
has already computed (the paper: BLIP-2 image features f, BLIP-2 captions c, all-mpnet-base-v2
sentence features t, BLIP-2 image-text features for LGC). Values are fractions in [-1, 1] (DWL in
[0, 2]); the paper prints them multiplied by 100.

Shapes: for one language, the images of ``n_prompts`` prompts, ``n_images`` each (the paper: 4
seeds), are an array ``(n_prompts, n_images, dim)``; one vector per prompt (the English prompt,
the reference image) is ``(n_prompts, dim)``. Prompt ``k`` must be the same prompt in every array
(and image ``r`` the same seed, for ``include_same_seed=False``). Many languages are a mapping
``code -> array``.

Normalisation. The paper's formulas sum over ordered pairs ``u != v`` but divide by ``nC2``, the
number of unordered pairs, which would double a mean and allow values up to 2; its sums also run
``r = 0..n`` for ``n`` images. We read every indicator as a plain **mean over pairs**, as the
docstrings below spell out for each. All of them are computed from unit vectors (normalised once)
with sums and dot products: memory is linear in the inputs, never a pairwise matrix.

Drops. The paper reports each model's drop relative to English as a difference of averages in
percentage points ("a 56.64% drop" for Stable Diffusion's CLGC is 64.53 minus the mean 7.89 of the
30 Indic languages): :func:`relative_to_english` gives per-language differences (or ratios) and
:func:`mean_relative_to_english` the paper's single number.

Every public function validates its inputs once (shape, finite values, no zero vectors) and raises
``ValueError`` naming the argument, its shape or value, and what was expected.
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
    """Cyclic Language-Grounded Correctness of one language: text-text similarity of the English
    prompt and the captions of the images generated from that language's prompt.

    Paper, Eq. 3 (p'_k = c(i_{p_k,l,r}) is the caption of image r):
    ``CLGC(l) = 1/(n|P|) sum_{p_k}^{P} sum_{r=0}^{n} phi[t(p_k), t(p'_k)]``.
    Here: the mean over prompts k and images r of cos(t(English prompt k), t(caption of image r)).

    Args:
        prompt_text_features: (n_prompts, dim), t of each English prompt.
        caption_text_features: (n_prompts, n_images, dim), t of the caption of each image.

    Returns:
        A float in [-1, 1]; higher is more faithful.

    Raises:
        ValueError: wrong number of dimensions, n_prompts or dim differ, empty axes, non-finite
            values or a zero vector (the message names the argument and shows the shapes).

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
    """Image-Grounded Correctness of one language: image-image similarity of each prompt's
    reference (ground-truth) image and the images generated from that language's prompt.

    Paper, Eq. 4: ``IGC(l) = 1/(n|P|) sum_{p_k}^{P} sum_{r=0}^{n} phi[f(q_k), f(i_{p_k})]``.
    Here: the mean over prompts k and images r of cos(f(reference image k), f(image r of prompt k)).

    Args:
        reference_image_features: (n_prompts, dim), f of each prompt's reference image.
        image_features: (n_prompts, n_images, dim), f of each generated image.

    Returns:
        A float in [-1, 1]; higher is more faithful.

    Raises:
        ValueError: as :func:`clgc`.

    Example:
        >>> references = np.array([[1.0, 0.0]])
        >>> igc(references, np.array([[[1.0, 1.0], [1.0, -1.0]]]))  # cos 45 degrees, twice
        0.7071067811865475
    """
    anchors = _unit_features("reference_image_features", reference_image_features, 2)
    images = _unit_features("image_features", image_features, 3)
    _same_prompts_and_dim("reference_image_features", anchors, "image_features", images)
    return _mean_compute(_grounded_update(anchors, images))


def lgc(prompt_features: np.ndarray, image_features: np.ndarray) -> float:
    """Language-Grounded Correctness of one language: image-text similarity of the English prompt
    and the images generated from that language's prompt, both embedded in one image-text space.

    Paper, Eq. 5: ``LGC(l) = 1/(n|P|) sum_{p_k}^{P} sum_{r=0}^{n} phi[t(p_k), f(i_{p_k})]``.
    Here: the mean over prompts k and images r of cos(text(English prompt k), image(image r)).

    Args:
        prompt_features: (n_prompts, dim), the English prompts in the image-text space.
        image_features: (n_prompts, n_images, dim), the generated images in the same space.

    Returns:
        A float in [-1, 1]; higher is more faithful.

    Raises:
        ValueError: as :func:`clgc`.

    Example:
        >>> lgc(np.array([[0.0, 1.0]]), np.array([[[0.0, 5.0], [0.0, -5.0], [3.0, 0.0]]]))
        0.0
    """
    anchors = _unit_features("prompt_features", prompt_features, 2)
    images = _unit_features("image_features", image_features, 3)
    _same_prompts_and_dim("prompt_features", anchors, "image_features", images)
    return _mean_compute(_grounded_update(anchors, images))


# ---------------------------------------------------------------- representation


def scal(image_features_a: np.ndarray, image_features_b: np.ndarray, *, include_same_seed: bool = True) -> float:
    """Self-Consistency Across Languages of a language pair: how alike the images of the same
    prompt are when it is given in language a and in language b.

    Paper, Eqs. 6-7:
    ``SCAL(l_a, l_b, p_k) = 1/nC2 sum_{u=0}^{n} sum_{v=0}^{n} phi[f(i_{p_k,l_a,u}), f(i_{p_k,l_b,v})]; u != v``
    and ``SCAL(l_a, l_b) = 1/|P| sum_{p_k}^{P} SCAL(l_a, l_b, p_k)``.
    Here: the mean over prompts k of the mean cosine over the cross pairs (u, v), image u of
    prompt k in a and image v of prompt k in b. By default all n_a * n_b pairs count. With
    ``include_same_seed=False`` the pairs u == v are left out, the paper's literal ``u != v``
    (images u of a and b made from the same seed share their initial noise, which can make them
    alike whatever the language); this needs n_a == n_b.

    With itself: ``scal(x, x)`` is the mean over all n^2 ordered pairs of a prompt's images,
    including each image with itself (cosine 1), i.e. ``1/n + (n-1)/n * scwl(x)``;
    ``scal(x, x, include_same_seed=False)`` drops the pairs u == v and equals ``scwl(x)``.

    Args:
        image_features_a: (n_prompts, n_images_a, dim), f of the images from language a.
        image_features_b: (n_prompts, n_images_b, dim), f of the images from language b, prompts
            in the same order.
        include_same_seed: count the pairs u == v (default) or not.

    Returns:
        A float in [-1, 1], symmetric in a and b; higher is more consistent across the languages.

    Raises:
        ValueError: as :func:`clgc`; with ``include_same_seed=False``, n_images differ or are 1.

    Example:
        >>> a = np.array([[[1.0, 0.0], [0.0, 1.0]]])
        >>> b = np.array([[[1.0, 0.0], [1.0, 0.0]]])
        >>> scal(a, b)  # pairs (u, v): 1, 1, 0, 0
        0.5
        >>> scal(a, b, include_same_seed=False)  # only (0, 1) and (1, 0): 1, 0
        0.5
        >>> scal(a, a), scal(a, a, include_same_seed=False), scwl(a)
        (0.5, 0.0, 0.0)
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
    """SCAL of every language pair: a symmetric (n_languages, n_languages) matrix.

    ``matrix[i, j] == scal(image_features[languages[i]], image_features[languages[j]])`` for all
    i, j, the diagonal included (see :func:`scal` for what SCAL of a language with itself means;
    :func:`scal_overall` ignores the diagonal).

    Args:
        image_features: language code -> (n_prompts, n_images, dim), f of that language's images;
            the same prompts in the same order in every array. n_images may differ between
            languages unless ``include_same_seed=False``.
        languages: the rows' order, a subset of the keys; default the mapping's order.
        include_same_seed: as in :func:`scal`.

    Returns:
        A float64 array of shape (n_languages, n_languages).

    Raises:
        ValueError: a language not in the mapping or given twice, fewer than one language,
            arrays that disagree on n_prompts or dim, and the errors of :func:`scal`.

    Example:
        >>> feats = {"eng_Latn": np.array([[[1.0, 0.0]]]), "hin_Deva": np.array([[[1.0, 1.0]]])}
        >>> scal_matrix(feats).round(4)
        array([[1.    , 0.7071],
               [0.7071, 1.    ]])
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
    """The overall SCAL of a set of languages: the mean of SCAL over unordered pairs of distinct
    languages, i.e. the mean of the matrix's strict upper triangle.

    Paper, Eq. 9: ``SCAL = 1/|L|C2 sum_{l_a}^{L} sum_{l_b}^{L} SCAL(l_a, l_b); a != b``; read as a
    mean over the |L|C2 unordered pairs (SCAL is symmetric).

    Args:
        matrix: (n_languages, n_languages), from :func:`scal_matrix`; n_languages >= 2.

    Raises:
        ValueError: not a square matrix of at least 2 x 2, non-finite values, or not symmetric.

    Example:
        >>> scal_overall(np.array([[1.0, 0.25, 0.5], [0.25, 1.0, 0.75], [0.5, 0.75, 1.0]]))
        0.5
    """
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
    """Self-Consistency Within Language: how alike the images of one prompt in one language are.

    Paper, Eqs. 10-11:
    ``SCWL(l, p_k) = 1/nC2 sum_{u=0}^{n} sum_{v=0}^{n} phi[f(i_{p_k,u}), f(i_{p_k,v})]; u != v`` and
    ``SCWL(l) = 1/|P| sum_{p_k}^{P} SCWL(l, p_k)``.
    Here: the mean over prompts k of the mean cosine over the nC2 unordered pairs u < v of the
    prompt's distinct images.

    Args:
        image_features: (n_prompts, n_images, dim) with n_images >= 2, f of one language's images.

    Returns:
        A float in [-1, 1]; higher is more consistent.

    Raises:
        ValueError: as :func:`clgc`, or n_images < 2.

    Example:
        >>> scwl(np.array([[[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]]))  # pairs: 1, 0, 0
        0.3333333333333333
    """
    images = _unit_features("image_features", image_features, 3, min_images=2)
    return _mean_compute(_scwl_update(images))


def dwl(image_features: np.ndarray) -> float:
    """Distinctiveness Within Language: how different the images of different prompts are.

    Paper, Eq. 12: ``DWL(l) = 1 - 1/|P|C2 sum_{p_a}^{P} sum_{p_b}^{P} phi[f(i_{p_a}), f(i_{p_b})]; a != b``.
    Here: 1 minus the mean cosine over all pairs of images of different prompts (every image of
    prompt a with every image of prompt b, a != b), i.e. the mean over the |P|C2 prompt pairs of
    the mean over their n^2 image pairs.

    Args:
        image_features: (n_prompts, n_images, dim) with n_prompts >= 2, f of one language's images.

    Returns:
        A float in [0, 2]; 0 when all images are alike, higher is more distinct.

    Raises:
        ValueError: as :func:`clgc`, or n_prompts < 2.

    Example:
        >>> dwl(np.array([[[1.0, 0.0]], [[0.0, 1.0]]]))  # orthogonal prompts
        1.0
        >>> dwl(np.ones((3, 2, 4)))
        0.0
    """
    images = _unit_features("image_features", image_features, 3, min_prompts=2)
    return _dwl_compute(_dwl_update(images))


# ---------------------------------------------------------------- relative to English


def relative_to_english(
    scores: Mapping[str, float], *, mode: str = "difference", english: str = ENGLISH
) -> dict[str, float]:
    """Each language's score relative to English's.

    ``mode="difference"``: ``scores[english] - scores[l]``, the drop from English (positive when
    l scores lower; in percentage points when scores are in %), which is how the paper reports
    drops. ``mode="ratio"``: ``scores[l] / scores[english]`` (1 means as good as English).

    Args:
        scores: language code -> score (one indicator, one model); must include ``english``.
        mode: ``"difference"`` or ``"ratio"``.
        english: the key of the English score.

    Returns:
        language -> relative score, for every key but ``english``, in the mapping's order.

    Raises:
        ValueError: unknown mode, ``english`` missing, no other language, non-finite scores, or
            (ratio) an English score <= 0.

    Example:
        >>> scores = {"eng_Latn": 0.5, "hin_Deva": 0.375, "tam_Taml": 0.25}
        >>> relative_to_english(scores)
        {'hin_Deva': 0.125, 'tam_Taml': 0.25}
        >>> relative_to_english(scores, mode="ratio")
        {'hin_Deva': 0.75, 'tam_Taml': 0.5}
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
    """The paper's single number per model: English against the average of the other languages.

    ``difference``: ``scores[english] - mean(others)`` ("there is a 56.64% drop in performance for
    the Stable Diffusion model", Section 5); ``ratio``: ``mean(others) / scores[english]``. Both
    equal the mean of :func:`relative_to_english` over the other languages.

    Raises:
        ValueError: as :func:`relative_to_english`.

    Example:
        >>> round(mean_relative_to_english({"eng_Latn": 64.53, "asm_Beng": 7.29, "ben_Beng": 6.39}), 2)
        57.69
    """
    relative = relative_to_english(scores, mode=mode, english=english)
    return float(np.mean(list(relative.values())))
