"""CIS order test: does the position of a component in the prompt change whether it is generated?"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from t2i_fairness.metrics.cis.prompts import _check_components, _check_pos_int, shuffled_prompts



@dataclass(frozen=True)
class ChiSquareResult:
    """Pearson chi-square test of independence between two groups of images."""

    statistic: float
    dof: int
    pvalue: float
    table: np.ndarray  # 2 x columns contingency table actually tested (all-zero columns dropped)
    columns: tuple  # label of each kept column


def _two_group_chi_square(a: Counter, b: Counter, labels: Sequence) -> ChiSquareResult:
    from scipy.stats import chi2_contingency

    kept = [lab for lab in labels if a[lab] + b[lab] > 0]
    table = np.array([[a[lab] for lab in kept], [b[lab] for lab in kept]], dtype=float)
    if table.sum(axis=1).min() == 0:
        raise ValueError("both groups need at least one observation, but one group is empty")
    if len(kept) < 2:
        # One category only: the distributions are identical, chi-square has no degrees of freedom.
        return ChiSquareResult(0.0, 0, 1.0, table, tuple(kept))
    statistic, pvalue, dof, _ = chi2_contingency(table, correction=False)  # tuple form: scipy >= 1.10
    return ChiSquareResult(float(statistic), int(dof), float(pvalue), table, tuple(kept))


def _check_detected_counts(name: str, values: Sequence[int], k: int) -> list[int]:
    arr = np.asarray(values)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"`{name}` must be a non-empty 1-D sequence of counts, but got shape {arr.shape}")
    if arr.dtype.kind not in "iu" and not (arr.dtype.kind == "f" and np.all(arr == np.round(arr))):
        raise ValueError(f"`{name}` must hold integer counts in [0, {k}], but got dtype {arr.dtype}")
    bad = arr[(arr < 0) | (arr > k)]
    if bad.size:
        raise ValueError(f"`{name}` must hold counts in [0, {k}], but got {sorted(set(bad.tolist()))}")
    return arr.astype(int).tolist()


def order_invariance_test(
    original_counts: Sequence[int], shuffled_counts: Sequence[int], k: int
) -> ChiSquareResult:
    """Chi-square test: does shuffling component order change how many components appear?

    Pearson's X^2 on the ``2 x (K + 1)`` table of images by detected-component count (all-zero columns
    dropped, no Yates' correction). The paper's per-component variant is
    :func:`order_invariance_test_by_component`.

    Example:
        >>> r = order_invariance_test([0, 1, 2, 2], [0, 1, 2, 2], k=2)
        >>> r.statistic, r.dof, r.pvalue
        (0.0, 2, 1.0)
    """
    k = _check_pos_int("k", k)
    a = Counter(_check_detected_counts("original_counts", original_counts, k))
    b = Counter(_check_detected_counts("shuffled_counts", shuffled_counts, k))
    return _two_group_chi_square(a, b, range(k + 1))


#: Monte Carlo resamples of :func:`order_invariance_permutation_test`: its p-value is at least
#: ``1 / (ORDER_RESAMPLES + 1) = 5e-5``, below a Holm first step of ``0.05 / 475 = 1.05e-4``.
ORDER_RESAMPLES = 19_999


@dataclass(frozen=True)
class PermutationResult:
    """A Monte Carlo permutation test: ``pvalue = (1 + #{resampled >= observed}) / (1 + resamples)``."""

    statistic: float
    dof: int
    pvalue: float
    resamples: int
    exceed: int  # resampled statistics at least the observed one
    asymptotic_pvalue: float
    table: np.ndarray
    columns: tuple
    method: str = "stratified permutation (Monte Carlo), Pearson chi-square statistic"

    @property
    def resolution(self) -> float:
        """The smallest p-value the test can report: ``1 / (1 + resamples)``."""
        return 1.0 / (1.0 + self.resamples)


def _pearson_rows(first: np.ndarray, totals: np.ndarray, n1: float, n2: float) -> np.ndarray:
    """Pearson's X^2 of 2 x C tables from their first rows (``first``: (..., C)) with fixed column totals."""
    n = n1 + n2
    e1, e2 = totals * (n1 / n), totals * (n2 / n)
    second = totals - first
    return ((first - e1) ** 2 / e1).sum(axis=-1) + ((second - e2) ** 2 / e2).sum(axis=-1)


def order_invariance_permutation_test(original_counts, shuffled_counts, k: int, *, n_resamples: int = ORDER_RESAMPLES,
                                      seed: int = 0) -> PermutationResult:
    """Permutation test of "shuffling the order changes nothing" on the number of components per image.

    Valid at any size but with no power against an order effect; the order gate uses
    :func:`order_position_test`. Labels are permuted within each prompt (row ``j`` of both arrays is
    prompt ``j`` and its shuffle).

    Args:
        original_counts, shuffled_counts: ``(prompts, images)`` integer counts in ``[0, k]``.
        n_resamples: B (>= 1); the p-value's resolution is ``1 / (B + 1)``.

    Example:
        >>> same = np.array([[0, 1], [2, 2]])
        >>> r = order_invariance_permutation_test(same, same, k=2, n_resamples=99)
        >>> r.statistic, r.pvalue, r.resolution
        (0.0, 1.0, 0.01)
    """
    k = _check_pos_int("k", k)
    a, b = np.asarray(original_counts), np.asarray(shuffled_counts)
    if a.ndim != 2 or a.shape != b.shape or a.size == 0:
        raise ValueError(f"`original_counts` and `shuffled_counts` must be non-empty (prompts, images) arrays of one "
                         f"shape, but got {a.shape} and {b.shape}")
    _check_detected_counts("original_counts", a.ravel(), k)
    _check_detected_counts("shuffled_counts", b.ravel(), k)
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise ValueError(f"`n_resamples` must be a positive integer, but got {n_resamples!r}")
    a, b = a.astype(int), b.astype(int)
    observed = _two_group_chi_square(Counter(a.ravel().tolist()), Counter(b.ravel().tolist()), range(k + 1))
    if observed.dof == 0:
        return PermutationResult(0.0, 0, 1.0, int(n_resamples), int(n_resamples), 1.0, observed.table, observed.columns)
    cols = np.asarray(observed.columns)
    pooled = np.concatenate([a, b], axis=1)  # (P, 2n): a prompt's images of both groups
    per_prompt = (pooled[..., None] == cols).sum(axis=1)  # (P, C): a prompt's images per column
    totals = per_prompt.sum(axis=0).astype(float)
    n = a.shape[1]
    stat = float(_pearson_rows(observed.table[0], totals, a.size, b.size))
    rng = np.random.default_rng(seed)
    # the first group's share of a prompt's 2n images is a uniform n-subset: its column counts are
    # multivariate hypergeometric; prompts with equal column counts are drawn together
    patterns, repeats = np.unique(per_prompt, axis=0, return_counts=True)
    rows = np.zeros((int(n_resamples), cols.size))
    for colors, times in zip(patterns, repeats):
        draws = rng.multivariate_hypergeometric(colors, n, size=(int(n_resamples), int(times)))
        rows += draws.sum(axis=1)
    tol = 1e-9 * max(1.0, stat)  # float ties count as extreme (conservative)
    exceed = int(np.count_nonzero(_pearson_rows(rows, totals, a.size, b.size) >= stat - tol))
    return PermutationResult(stat, observed.dof, (1.0 + exceed) / (1.0 + n_resamples), int(n_resamples), exceed,
                             observed.pvalue, observed.table, observed.columns)


def order_invariance_test_by_component(
    original_detected: Sequence[Sequence[str]], shuffled_detected: Sequence[Sequence[str]]
) -> ChiSquareResult:
    """The paper's chi-square (section 8.1): a ``2 x components`` table of detections per group.

    Example:
        >>> r = order_invariance_test_by_component([("crab",), ("sock",)], [("crab",), ("sock",)])
        >>> r.statistic, r.dof, int(r.table.sum())
        (0.0, 1, 4)
    """
    a: Counter[str] = Counter()
    b: Counter[str] = Counter()
    for name, group, counter in (("original_detected", original_detected, a), ("shuffled_detected", shuffled_detected, b)):
        for i, det in enumerate(group):
            counter.update(_check_components(det, f"{name}[{i}]"))
    labels = list(dict.fromkeys([*a, *b]))
    return _two_group_chi_square(a, b, labels)


#: The least Monte Carlo resamples of :func:`order_position_test` (:func:`order_resamples` raises it
#: with the run's level).
ORDER_POSITION_RESAMPLES = 9_999

#: The stated effect the order gate reports its power against: the first-named component's inclusion
#: this much above the last-named (linear in between, on the probability scale).
ORDER_EFFECT = 0.2


def order_resamples(level: float, floor: int = ORDER_POSITION_RESAMPLES) -> int:
    """Monte Carlo resamples ``B`` with ``1 / (B + 1) <= level / 3``, rounded up to ``10,000 k - 1``.

    Example:
        >>> order_resamples(0.05 / 1435), order_resamples(0.05 / 475), order_resamples(0.05 / 6)
        (89999, 29999, 9999)
    """
    level = float(level)
    if not 0.0 < level < 1.0:
        raise ValueError(f"`level` must be in (0, 1), but got {level!r}")
    floor = _check_pos_int("floor", floor)
    return max(floor, int(math.ceil(3.0 / level / 10_000.0)) * 10_000 - 1)


@dataclass(frozen=True)
class OrderArrays:
    """The order study as arrays; component ``k`` is the original prompt's ``k``-th.

    Attributes:
        original, shuffled: ``(prompts, images, K)`` 0/1 detections.
        order: ``(prompts, K)``: ``order[i, q]`` is the original index of the component the shuffled
            prompt names at position ``q``.
        components: ``(prompts, K)`` indices into ``names``.
    """

    original: np.ndarray
    shuffled: np.ndarray
    order: np.ndarray
    components: np.ndarray
    names: tuple[str, ...]


def order_arrays(original_prompts: Sequence[Sequence[str]], shuffled_prompts: Sequence[Sequence[str]],
                 original_detected: Sequence[Sequence[Sequence[str]]],
                 shuffled_detected: Sequence[Sequence[Sequence[str]]]) -> OrderArrays:
    """The order study's prompts and detected subsets as the arrays the order tests read.

    Example:
        >>> a = order_arrays([("crab", "sock")], [("sock", "crab")], [[("crab",), ()]], [[("sock",), ("crab", "sock")]])
        >>> a.original[0].tolist(), a.shuffled[0].tolist(), a.order.tolist(), a.names
        ([[1, 0], [0, 0]], [[0, 1], [1, 1]], [[1, 0]], ('crab', 'sock'))
    """
    m = len(original_prompts)
    if not m or m != len(shuffled_prompts) or m != len(original_detected) or m != len(shuffled_detected):
        raise ValueError(f"the original and shuffled prompts and their detections must be as many and at least one, "
                         f"but got {m}, {len(shuffled_prompts)}, {len(original_detected)} and {len(shuffled_detected)}")
    ks = {len(p) for p in original_prompts}
    images = {len(d) for d in original_detected} | {len(d) for d in shuffled_detected}
    if len(ks) != 1 or len(images) != 1 or 0 in images:
        raise ValueError(f"every prompt must name the same K components and every group hold the same number of "
                         f"images, but got K in {sorted(ks)} and images in {sorted(images)}")
    k, n = ks.pop(), images.pop()
    original = np.zeros((m, n, k), np.uint8)
    shuffled = np.zeros((m, n, k), np.uint8)
    order = np.zeros((m, k), np.int64)
    index: dict[str, int] = {}
    components = np.zeros((m, k), np.int64)
    for i, (p, s) in enumerate(zip(original_prompts, shuffled_prompts)):
        p = _check_components(p, f"original_prompts[{i}]")
        s = _check_components(s, f"shuffled_prompts[{i}]")
        if sorted(p) != sorted(s):
            raise ValueError(f"shuffled_prompts[{i}] {list(s)} is not a reordering of original_prompts[{i}] {list(p)}")
        where = {c: q for q, c in enumerate(p)}
        order[i] = [where[c] for c in s]
        components[i] = [index.setdefault(c, len(index)) for c in p]
        for name, rows, out in (("original_detected", original_detected, original),
                                ("shuffled_detected", shuffled_detected, shuffled)):
            for j, det in enumerate(rows[i]):
                det = _check_components(det, f"{name}[{i}][{j}]")
                extra = sorted(set(det) - set(p))
                if extra:
                    raise ValueError(f"`{name}[{i}][{j}]` has components its prompt does not name: {extra}")
                out[i, j, [where[c] for c in det]] = 1
    return OrderArrays(original, shuffled, order, components, tuple(index))


def _check_order_arrays(original, shuffled, order) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a, b, o = np.asarray(original), np.asarray(shuffled), np.asarray(order)
    if a.ndim != 3 or a.shape != b.shape or 0 in a.shape:
        raise ValueError(f"`original` and `shuffled` must be non-empty (prompts, images, K) arrays of one shape, "
                         f"but got {a.shape} and {b.shape}")
    if not (np.isin(a, (0, 1)).all() and np.isin(b, (0, 1)).all()):
        raise ValueError("`original` and `shuffled` must hold 0/1 detections")
    m, _, k = a.shape
    if o.shape != (m, k) or o.dtype.kind not in "iu" or not (np.sort(o, axis=1) == np.arange(k)).all():
        raise ValueError(f"`order` must be a ({m}, {k}) integer array whose rows are permutations of 0..{k - 1}, "
                         f"but got shape {o.shape}")
    return a.astype(np.float64), b.astype(np.float64), o.astype(np.int64)


def _check_resamples(n_resamples: object) -> int:
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < 0:
        raise ValueError(f"`n_resamples` must be an integer >= 0, but got {n_resamples!r}")
    return int(n_resamples)


def _monte_carlo_p(exceed: int, n_resamples: int) -> float:
    """``(1 + exceed) / (1 + B)``; NaN without resamples (the statistic alone was asked for)."""
    return (1.0 + exceed) / (1.0 + n_resamples) if n_resamples else float("nan")


def _popcount(x: np.ndarray) -> np.ndarray:
    if hasattr(np, "bitwise_count"):  # numpy >= 2.0
        return np.bitwise_count(x)
    table = np.array([bin(i).count("1") for i in range(256)], np.uint8)
    return table[x.view(np.uint8)].reshape(x.shape + (x.itemsize,)).sum(axis=-1)


def _balanced_masks(rng: np.random.Generator, count: int, n: int) -> np.ndarray:
    """``count`` independent uniform ``n``-subsets of ``2n`` items as ``(count, 2n)`` 0/1 ``uint8`` rows."""
    width = 2 * n
    if width > 64:
        base = np.zeros((count, width), np.uint8)
        base[:, :n] = 1
        return rng.permuted(base, axis=1)
    size = 1 if width <= 8 else 2 if width <= 16 else 4 if width <= 32 else 8
    word = np.dtype(f"<u{size}")  # the random bytes read as little-endian words, as unpacked below
    top = None if width == 8 * size else word.type((1 << width) - 1)
    accept = math.comb(width, n) / 2.0**width
    out = np.empty(count, word)
    got = 0
    while got < count:
        x = rng.bit_generator.random_raw(int((count - got) / accept * 1.1 * size / 8) + 8).view(word)
        if top is not None:
            x &= top
        x = np.compress(_popcount(x) == n, x)[:count - got]
        out[got:got + x.size] = x
        got += x.size
    bits = np.unpackbits(out.view(np.uint8), bitorder="little").reshape(count, 8 * size)
    return bits if width == 8 * size else bits[:, :width]


def _label_permutations(rng: np.random.Generator, prompts: int, n: int, resamples: int, cells: int = 1 << 24):
    """Chunks of ``(resamples, prompts * 2n)`` 0/1 masks (one reused buffer): which ``n`` images are "shuffled"."""
    width = prompts * 2 * n
    chunk = max(1, min(resamples, cells // width))
    buffer = np.empty((chunk, width), np.float32)
    for start in range(0, resamples, chunk):
        b = min(chunk, resamples - start)
        np.copyto(buffer[:b], _balanced_masks(rng, b * prompts, n).reshape(b, width), casting="unsafe")
        yield buffer[:b]


def _observed_mask(prompts: int, n: int) -> np.ndarray:
    mask = np.zeros((1, prompts, 2 * n), np.float32)
    mask[..., n:] = 1.0  # the pooled images are the original prompt's n, then the shuffled prompt's n
    return mask.reshape(1, -1)


def _moved_contrasts(original: np.ndarray, shuffled: np.ndarray, order: np.ndarray) -> np.ndarray:
    """``(prompts, 2n, K)``: ``v[q] = y[order[q]] - y[q]`` per image."""
    pooled = np.concatenate([original, shuffled], axis=1)
    moved = np.take_along_axis(pooled, np.broadcast_to(order[:, None, :], pooled.shape), axis=2)
    return moved - pooled


def _whitening(v: np.ndarray, n: int, tol: float = 1e-10) -> tuple[np.ndarray, np.ndarray]:
    """``(W, informative)``: ``W' C W = I`` on the range of ``C``; prompts whose images differ in ``v``."""
    centred = v - v.mean(axis=1, keepdims=True)
    # Z_i = (2 sum_S v - sum_all v) / n for a uniform n-subset S of 2n: Cov = 4 / (2n - 1) * population cov
    cov = np.einsum("mjk,mjl->kl", centred, centred) * (4.0 / (2 * n - 1)) / (2 * n)
    informative = np.abs(centred).reshape(centred.shape[0], -1).max(axis=1) > 0
    values, vectors = np.linalg.eigh(cov)
    top = float(values.max())
    keep = values > tol * top if top > 0 else np.zeros(values.shape, bool)  # C's range (1 is always outside)
    return vectors[:, keep] / np.sqrt(values[keep]), informative


def _position_statistic(v: np.ndarray, n: int) -> tuple[float, int, np.ndarray]:
    """``(T, r, W)`` without resampling (the simulation of :func:`order_position_power`)."""
    w, _ = _whitening(v, n)
    if w.shape[1] == 0:
        return 0.0, 0, w
    z = ((v[:, n:] - v[:, :n]).sum(axis=(0, 1)) / n) @ w
    return float(z @ z), int(w.shape[1]), w


def _position_profile(order: np.ndarray, contrast: np.ndarray) -> np.ndarray:
    """Least-squares inclusion by position (sum zero) from the contrasts ``Z = X'D``."""
    m, k = order.shape
    moves = np.zeros((k, k))
    np.add.at(moves, (np.arange(k)[None, :].repeat(m, 0), order), 1.0)  # sum_i P_i' (original <- shuffled)
    gram = 2.0 * m * np.eye(k) - moves - moves.T
    return np.linalg.pinv(gram, rcond=1e-10) @ contrast


def _log_labelings(informative: int, n: int) -> float:
    return informative * math.log(math.comb(2 * n, n))


@dataclass(frozen=True)
class OrderPositionResult:
    """The position test's result; ``profile[q]``: inclusion at position ``q + 1`` minus the mean."""

    statistic: float
    dof: int
    pvalue: float
    resamples: int
    exceed: int
    asymptotic_pvalue: float
    profile: np.ndarray
    contrast: np.ndarray
    prompts: int
    informative: int
    images: int
    min_exact_pvalue: float
    method: str = "within-prompt label permutations (Monte Carlo), position statistic"

    @property
    def resolution(self) -> float:
        """The smallest p-value the Monte Carlo can report: ``1 / (1 + resamples)``."""
        return 1.0 / (1.0 + self.resamples)

    @property
    def floor(self) -> float:
        """The larger of ``resolution`` and the exact test's ``2 / L`` (``L`` labelings)."""
        return max(self.resolution, self.min_exact_pvalue)


def order_position_test(original, shuffled, order, *, n_resamples: int = ORDER_POSITION_RESAMPLES,
                        seed: int = 0) -> OrderPositionResult:
    """Does a component's position in the prompt change whether it is drawn?

    ``T = Z' C^+ Z``, the score test of "no position effect" on the within-prompt contrasts ``Z``;
    the p-value permutes original/shuffled labels within each prompt,
    ``p = (1 + #{T* >= T}) / (1 + B)``. docs/cis.md derives it.

    Args:
        original, shuffled: ``(prompts, images, K)`` 0/1 detections (:func:`order_arrays`).
        order: ``(prompts, K)``: ``order[i, q]`` is the original index of the component the shuffled
            prompt ``i`` names at position ``q``.
        n_resamples: B (:func:`order_resamples`); 0: the statistic alone (``pvalue`` is NaN).

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> order = np.array([rng.permutation(4) for _ in range(60)])
        >>> first = np.array([0.9, 0.6, 0.6, 0.3])  # inclusion by position: the first-named drawn most
        >>> shuffled = rng.random((60, 8, 4)) < first[np.argsort(order, axis=1)][:, None, :]
        >>> r = order_position_test(rng.random((60, 8, 4)) < first, shuffled, order, n_resamples=999)
        >>> r.pvalue == r.resolution == 0.001, [round(float(x), 1) + 0.0 for x in r.profile]
        (True, [0.3, 0.0, 0.0, -0.3])
    """
    a, b, o = _check_order_arrays(original, shuffled, order)
    n_resamples = _check_resamples(n_resamples)
    m, n, k = a.shape
    v = _moved_contrasts(a, b, o)
    w, informative = _whitening(v, n)
    contrast = (v[:, n:] - v[:, :n]).sum(axis=(0, 1)) / n
    profile = _position_profile(o, contrast)
    r = int(w.shape[1])
    min_p = min(1.0, 2.0 * math.exp(-_log_labelings(int(informative.sum()), n))) if informative.any() else 1.0
    if r == 0:
        return OrderPositionResult(0.0, 0, 1.0, n_resamples, n_resamples, 1.0, profile, contrast, m, 0, 2 * m * n, 1.0)
    mi = int(informative.sum())
    vi = v[informative]
    # S* = sum of v over the shuffled-labelled images: integer sums, exact in float32 below 2**24 images
    exact = np.float32 if mi * 2 * n < 1 << 24 else np.float64
    flat = vi.reshape(-1, k).astype(exact)
    total = vi.sum(axis=(0, 1))

    def stats(masks: np.ndarray) -> np.ndarray:  # Z* = (2 S* - sum_all v) / n, T* = |W'Z*|^2
        z = ((2.0 * (masks.astype(exact, copy=False) @ flat).astype(np.float64) - total) / n) @ w
        return np.einsum("br,br->b", z, z)

    stat = float(stats(_observed_mask(mi, n))[0])
    tol = 1e-9 * max(1.0, stat)  # float ties count as extreme (conservative)
    rng = np.random.default_rng(seed)
    exceed = sum(int(np.count_nonzero(stats(masks) >= stat - tol))
                 for masks in _label_permutations(rng, mi, n, int(n_resamples)))
    from scipy.stats import chi2

    return OrderPositionResult(stat, r, _monte_carlo_p(exceed, n_resamples), n_resamples, exceed,
                               float(chi2.sf(stat, r)), profile, contrast, m, mi, 2 * m * n, min_p)


@dataclass(frozen=True)
class OrderEffect:
    """Inclusion by position, prompt by prompt: ``values[i, q]`` estimates ``beta_q - mean(beta)``."""

    values: np.ndarray  # (prompts, K) in [-1, 1]

    @property
    def estimate(self) -> np.ndarray:
        """The position profile's estimate (``K`` values summing to 0 in expectation)."""
        return self.values.mean(axis=0)

    def limits(self, alpha: float) -> tuple[np.ndarray, np.ndarray]:
        """Per position, one-sided betting limits at ``alpha`` each."""
        from t2i_fairness.metrics.intervals import betting_limit

        unit = (self.values + 1.0) / 2.0
        low = np.array([2.0 * betting_limit(unit[:, q], alpha, "low") - 1.0 for q in range(unit.shape[1])])
        high = np.array([2.0 * betting_limit(unit[:, q], alpha, "high") - 1.0 for q in range(unit.shape[1])])
        return low, high

    def limit(self, alpha: float, side: str) -> float:
        """``"high"``: the largest ``|beta_q - mean(beta)|`` the data leave possible at ``alpha``."""
        if side != "high":
            raise ValueError(f"an order effect has an upper limit only ('high'), but got {side!r}")
        low, high = self.limits(alpha)
        return float(max(high.max(), -low.min()))


def order_effect(original, shuffled, order) -> OrderEffect:
    """The order study's per-prompt position effects.

    Example:
        >>> import numpy as np
        >>> a, b, o = simulate_order_study(np.full((400, 4), 0.5), 16, np.random.default_rng(0), effect=0.4)
        >>> [round(float(x), 1) + 0.0 for x in order_effect(a, b, o).estimate]
        [0.2, 0.1, -0.1, -0.2]
    """
    a, b, o = _check_order_arrays(original, shuffled, order)
    n = a.shape[1]
    v = _moved_contrasts(a, b, o)
    return OrderEffect((v[:, n:].mean(axis=1) - v[:, :n].mean(axis=1)) / 2.0)


def _linear_effect(k: int, effect: float) -> np.ndarray:
    """Inclusion added at each position: ``effect / 2`` at the first, ``-effect / 2`` at the last, linear."""
    return effect / 2.0 - effect * np.arange(k) / max(1, k - 1)


def simulate_order_study(rates, images: int, rng: np.random.Generator, effect: float | Sequence[float] = 0.0):
    """One order study with detection probability ``rates[i, k] + delta[position]`` (clipped).

    Args:
        rates: ``(prompts, K)`` inclusion rates with no position effect.
        images: images per prompt and group.
        effect: first-minus-last inclusion (linear in between), or ``K`` values by position.

    Returns:
        ``(original, shuffled, order)`` as :func:`order_position_test` reads them.
    """
    rates = np.asarray(rates, dtype=float)
    m, k = rates.shape
    delta = (_linear_effect(k, float(effect)) if np.ndim(effect) == 0 else np.asarray(effect, dtype=float))
    if delta.shape != (k,):
        raise ValueError(f"`effect` must be a number or {k} values by position, but got shape {delta.shape}")
    order = np.argsort(rng.random((m, k)), axis=1)
    position = np.argsort(order, axis=1)  # where the shuffled prompt names each original component
    p_original = np.clip(rates + delta[None, :], 0.0, 1.0)
    p_shuffled = np.clip(rates + delta[position], 0.0, 1.0)
    original = (rng.random((m, images, k)) < p_original[:, None, :]).astype(np.uint8)
    shuffled = (rng.random((m, images, k)) < p_shuffled[:, None, :]).astype(np.uint8)
    return original, shuffled, order


@dataclass(frozen=True)
class OrderPower:
    """Power of :func:`order_position_test` against a stated effect (:func:`order_position_power`)."""

    power: float
    runs: int
    effect: float
    level: float
    floor: float  # the smallest p-value the design can give (every prompt informative)
    prompts: int
    images: int
    k: int
    method: str = "simulated studies, T judged with its chi-square reference"

    @property
    def reachable(self) -> bool:
        """Whether the test can reject at ``level`` at all at these sizes."""
        return self.floor <= self.level


def order_position_power(rates, images: int, *, level: float, effect: float = ORDER_EFFECT, runs: int = 200,
                         seed: int = 0) -> OrderPower:
    """The rejection rate of :func:`order_position_test` at ``level`` against a first-minus-last ``effect``.

    Simulated by :func:`simulate_order_study` from ``rates``; 0 when the design cannot reach
    ``level`` (``2 / L > level``).
    """
    rates = np.asarray(rates, dtype=float)
    if rates.ndim != 2 or rates.shape[0] < 1 or rates.shape[1] < 2 or not np.all((rates >= 0) & (rates <= 1)):
        raise ValueError(f"`rates` must be a (prompts, K >= 2) array of inclusion rates in [0, 1], "
                         f"but got shape {rates.shape}")
    images, runs = _check_pos_int("images", images), _check_pos_int("runs", runs)
    level = float(level)
    if not 0.0 < level < 1.0:
        raise ValueError(f"`level` must be in (0, 1), but got {level!r}")
    from scipy.stats import chi2

    m, k = rates.shape
    floor = max(1.0 / (1.0 + order_resamples(level)), min(1.0, 2.0 * math.exp(-_log_labelings(m, images))))
    rejected = 0
    if floor <= level:
        rng = np.random.default_rng(seed)
        for _ in range(runs):
            a, b, o = simulate_order_study(rates, images, rng, effect)
            stat, r, _ = _position_statistic(_moved_contrasts(a.astype(float), b.astype(float), o), images)
            rejected += r > 0 and chi2.sf(stat, r) <= level
    return OrderPower(float(rejected / runs), runs, float(effect), level, floor, m, images, k)


def order_component_permutation_test(original, shuffled, components, *, n_resamples: int = ORDER_POSITION_RESAMPLES,
                                     seed: int = 0) -> PermutationResult:
    """The paper's order test (section 8.1) with a within-prompt permutation p-value.

    Pearson's chi-square on the ``2 x components`` table; an omnibus statistic that reads no position.

    Args:
        components: ``(prompts, K)`` non-negative integer component ids.
        n_resamples: B; 0: the statistic alone (``pvalue`` is NaN).
    """
    a, b, _ = _check_order_arrays(original, shuffled, np.tile(np.arange(np.shape(original)[-1]),
                                                             (np.shape(original)[0], 1)))
    ids = np.asarray(components)
    if ids.shape != a.shape[::2] or ids.dtype.kind not in "iu" or (ids < 0).any():
        raise ValueError(f"`components` must be a {a.shape[::2]} array of non-negative integer ids, "
                         f"but got shape {ids.shape} and dtype {ids.dtype}")
    n_resamples = _check_resamples(n_resamples)
    from scipy import sparse
    from scipy.stats import chi2

    m, n, k = a.shape
    cols = int(ids.max()) + 1
    scatter = sparse.csr_matrix((np.ones(m * k), (ids.ravel(), np.arange(m * k))), shape=(cols, m * k))
    first = scatter @ a.sum(axis=1).ravel()
    totals = first + scatter @ b.sum(axis=1).ravel()
    kept = np.flatnonzero(totals > 0)
    table = np.array([first[kept], totals[kept] - first[kept]])
    dof = max(0, kept.size - 1)
    if dof == 0 or min(table.sum(axis=1)) == 0:
        return PermutationResult(0.0, 0, 1.0, n_resamples, n_resamples, 1.0, table, tuple(kept.tolist()),
                                 "within-prompt label permutations (Monte Carlo), Pearson chi-square by component")
    scatter, tot, grand = scatter[kept], totals[kept], float(totals.sum())
    pooled = np.concatenate([a, b], axis=1).astype(np.float32)  # 0/1: integer sums, exact in float32

    def stats(masks: np.ndarray) -> np.ndarray:  # (B, M * 2n) shuffled labels -> X2 of each resample
        labels = masks.reshape(masks.shape[0], m, 2 * n).transpose(1, 0, 2)
        second = np.matmul(labels, pooled).astype(np.float64)  # (M, B, K): shuffled-labelled detections
        second = np.asarray(scatter @ second.transpose(0, 2, 1).reshape(m * k, -1)).T  # (B, kept)
        n2 = second.sum(axis=1, keepdims=True)
        n1 = grand - n2
        with np.errstate(divide="ignore", invalid="ignore"):
            x2 = grand**2 / (n1 * n2)[:, 0] * (((tot - second) - tot * n1 / grand) ** 2 / tot).sum(axis=1)
        return np.nan_to_num(x2, nan=0.0, posinf=0.0)

    stat = float(stats(_observed_mask(m, n))[0])
    tol = 1e-9 * max(1.0, stat)
    rng = np.random.default_rng(seed)
    exceed = sum(int(np.count_nonzero(stats(masks) >= stat - tol))
                 for masks in _label_permutations(rng, m, n, int(n_resamples)))
    return PermutationResult(stat, dof, _monte_carlo_p(exceed, n_resamples), n_resamples, exceed,
                             float(chi2.sf(stat, dof)), table, tuple(kept.tolist()),
                             "within-prompt label permutations (Monte Carlo), Pearson chi-square by component")
