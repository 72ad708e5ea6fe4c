"""Sequential gates: decide with fewer images, at the same family-wise error rate (pure arithmetic).

A fixed-N gate measures its indicator on all ``N`` images per prompt, then tests H0 "the model
meets the bound" (``theta >= bound`` for a ``min`` gate, ``<=`` for ``max``;
:mod:`t2i_fairness.metrics.decisions`). A sequential gate looks at the data in rounds
(``n_1 < n_2 < ... < N`` images per prompt) and stops a gate as soon as its verdict is settled.
Everything here is arrays in, numbers out.

The unit of observation: a sweep
    A gate over ``P`` fixed prompts averages per-image scores in [0, 1] (a precision is the share
    of generated images inside the real manifold; a CIS rate the share of images that show a
    component). Sweep ``j`` is image ``j`` of every prompt, and its score the mean over the
    prompts: ``y_j = mean_p x_{p, j}``. Images are drawn with independent seeds, so the sweeps are
    independent and identically distributed with mean ``theta`` (the gate's indicator on a
    balanced design) and values in [0, 1]: the betting tests below are exact for them, whatever
    the prompts' own means are (a test on the images in prompt order would not be: their
    conditional means differ by prompt).

Fail early: the gates use :func:`mixture_e_process`
    A sweep mean of ``P`` independent [0, 1] scores is sub-Gaussian with variance proxy ``1 / (4 P)``
    (Hoeffding's lemma), so a one-sided normal mixture of ``exp(lambda S_t - lambda^2 V_t / 2)``
    (Howard et al. 2021) is a nonnegative supermartingale under H0 (details in its docstring).

Betting on [0, 1] data (:func:`e_process`), for single streams and the confseq cross-check
    Waudby-Smith & Ramdas (JRSS-B 2024): for a ``min`` gate, the wealth
    ``K_t = prod_{i <= t} (1 + lambda_i (bound - y_i))`` with a *predictable* bet
    ``0 <= lambda_i <= c / (1 - bound)`` (a function of ``y_1 .. y_{i-1}`` only) has
    ``E[K_t | past] <= K_{t-1}`` whenever ``theta >= bound``: a nonnegative supermartingale, so by
    Ville's inequality ``P(sup_t K_t >= 1 / a) <= a`` under H0, at every stopping time, however
    many looks (``max``: ``1 + lambda_i (y_i - bound)``, ``lambda_i <= c / bound``). The bet is
    aGRAPA (their approximate growth-rate-adaptive plug-in), truncated at ``c = 1/2``. Not used for
    gates: its wealth grows at most by ``1 + c (bound - y) / (1 - bound)`` per sweep whatever the
    sweep's spread, and a CIS prompt has 16 images (16 sweeps).

Confidence sequences: :func:`mixture_cs` for gates (normal mixture on sub-Gaussian sweeps);
:func:`confidence_sequence` for [0, 1] streams:
    Waudby-Smith & Ramdas's hedged capital process with predictable plug-in empirical-Bernstein bets (PrPl-EB), over
    a grid of candidate means, running intersection: ``[L_t, U_t]`` covers ``theta`` at every
    ``t`` simultaneously with probability ``1 - delta``. This is ``confseq.betting.betting_cs``'s
    default construction (tested against it in tests/test_sequential.py when confseq is installed).

Pass early (non-binding: a pass never raises the false-alarm rate, only lowers the power)
    * *bound met*: the confidence sequence lies entirely on the passing side of the bound;
    * *futility* (:func:`conditional_power`): the probability that the full-N test would still fail,
      computed (normal approximation) at the least favourable end of a one-sided ``1 - delta / L``
      confidence bound of the mean at each of the design's ``L`` looks, is below ``gamma`` (default
      0.01). Were every look's bound to cover ``theta`` (probability about ``1 - delta``), that is an
      upper bound on the true conditional power, and the chance of stopping at a look with true
      conditional power ``< gamma`` and failing later is at most ``gamma``; so a verdict the fixed-N
      test would reach as "fail" is turned into a futility pass with probability at most about
      ``gamma + delta`` (0.06 at the defaults); tests/test_sequential.py and the bench measure it.
    * *nested coverage* (:func:`coverage_settled`): coverage is not a mean of images; it is
      non-decreasing in the generated sample (a real ball covered at ``n`` images stays covered at
      ``N``), so a ``min`` coverage gate whose coverage at ``n`` already meets the bound would pass
      at ``N`` for certain (the fixed-N verdict itself, not a probability). No valid early fail
      exists for coverage (its expectation grows with ``n``): it otherwise runs to ``N``.

Kinds (:data:`KINDS`): where no valid early stop exists, the gate runs to ``N`` and says so.
    ``share``/``bounded``: e-process fail, bound-met and futility passes (the consistency gates' low
    percentile is not a mean, so ``percentile`` runs to N; a consistency *mean* would be ``bounded``). ``coverage``: nested pass
    only. ``ratio``/``spread``/``percentile``/``hoeffding``/``test``: run to N (ratios and spreads of
    shares are not means of sweeps; a low percentile needs a quantile sequence that is not built
    here; the word-level Hoeffding bound is finite-sample but not time-uniform).

Error control across gates stopping at different times (:func:`e_closed_rejections`)
    The run's ``alpha`` (5% family-wise) is split: ``alpha_e = alpha / 2`` for early fails,
    ``alpha - alpha_e`` for the fixed-N test of the gates that reach ``N`` (Holm as today). Early
    fails: closed testing whose local test of an intersection ``H_S`` is the arithmetic mean of the
    gates' stopped e-processes, ``mean_{j in S} K_j >= 1 / alpha_e`` (Vovk & Wang 2021: the mean of
    e-values is an e-value; Hartog & Lei 2025: with a common filtration the e-Holm procedure is
    anytime-valid). Why it holds here: every gate's wealth is a supermartingale in the filtration of
    the rounds (a round's new images are fresh draws, bets are fixed before the round), a stopped
    supermartingale is one too, and so is the mean over the true nulls ``I0``; a false rejection
    at any look needs ``mean_{I0} K >= 1 / alpha_e``, which by Ville happens with probability at
    most ``alpha_e``. The union with the fixed-N route gives ``alpha_e + (alpha - alpha_e) = alpha``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import special as _special

__all__ = [
    "KINDS",
    "REASONS",
    "Look",
    "Sweeps",
    "aggregate_bets",
    "conditional_power",
    "confidence_sequence",
    "coverage_settled",
    "e_closed_rejections",
    "e_process",
    "look",
    "mixture_cs",
    "mixture_e_process",
    "predictable_bets",
    "round_sizes",
    "sweeps",
]

#: gate kind -> what the sequential design may do with it
KINDS: dict[str, str] = {
    "share": "betting",  # precision, CIS rates: shares of images
    "bounded": "betting",  # a mean of per-image scores in [0, 1]
    "coverage": "nested",  # non-decreasing in n: early pass only
    "ratio": "fixed",  # disparity ratios of shares
    "spread": "fixed",  # best minus worst, drops
    "percentile": "fixed",  # a low percentile (consistency)
    "hoeffding": "fixed",  # word-level: finite-sample, not time-uniform
    "test": "fixed",  # a hypothesis test's own statistic
    "worst": "fixed",  # the lowest (or highest) of several groups' values: not a mean of sweeps
    "score": "fixed",  # a mean of scores with no known range (cosine similarities, distances)
}

#: the reasons a gate's sequential verdict records
REASONS: dict[str, str] = {
    "fail": "fail: bound excluded",
    "met": "pass: bound met with certainty",
    "futility": "pass: futility",
    "full": "ran to N",
    "open": "open",
}

_C = 0.5  # bet truncation (Waudby-Smith & Ramdas's default 1/2)


def _unit_array(name: str, x: object) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 1:
        raise ValueError(f"`{name}` must be 1-D, but got shape {a.shape}")
    if a.size and not (np.isfinite(a).all() and (a >= 0).all() and (a <= 1).all()):
        raise ValueError(f"`{name}` must hold values in [0, 1]")
    return a


def _bound(bound: object) -> float:
    if isinstance(bound, bool) or not isinstance(bound, (int, float, np.integer, np.floating)) or not (
            0.0 <= float(bound) <= 1.0):
        raise ValueError(f"`bound` must be a number in [0, 1], but got {bound!r}")
    return float(bound)


def _direction(direction: object) -> str:
    if direction not in ("min", "max"):
        raise ValueError(f"`direction` must be 'min' or 'max', but got {direction!r}")
    return str(direction)


def _alpha(name: str, a: object) -> float:
    if isinstance(a, bool) or not isinstance(a, (int, float, np.floating)) or not 0.0 < float(a) < 1.0:
        raise ValueError(f"`{name}` must be in (0, 1), but got {a!r}")
    return float(a)


def sweeps(scores: object) -> np.ndarray:
    """Sweep means of a ``(prompts, images)`` array of per-image scores in [0, 1]: column means.

    Args:
        scores: per-image scores, one row per prompt, column ``j`` = image ``j`` (seed order).

    Raises:
        ValueError: not 2-D, empty, or values outside [0, 1].

    Example:
        >>> sweeps([[1, 0, 1], [0, 0, 1]]).tolist()
        [0.5, 0.0, 1.0]
    """
    a = np.asarray(scores, dtype=np.float64)
    if a.ndim != 2 or a.size == 0:
        raise ValueError(f"`scores` must be a non-empty (prompts, images) array, but got shape {a.shape}")
    _unit_array("scores", a.ravel())
    return a.mean(axis=0)


def _predictable_moments(y: np.ndarray, prior_mean: float = 0.5, prior_var: float = 0.25) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of ``y_1 .. y_{t-1}`` at each ``t``, regularised by one fake observation."""
    t = np.arange(1, y.size + 1)
    s = np.concatenate([[0.0], np.cumsum(y)[:-1]])
    mu = (prior_mean + s) / t  # uses y_1..y_{t-1} plus the prior point
    # running mean after each observation (for the squared deviations)
    mu_after = (prior_mean + np.cumsum(y)) / (t + 1)
    dev = np.concatenate([[0.0], np.cumsum((y - mu_after) ** 2)[:-1]])
    var = (prior_var + dev) / t
    return mu, var


def predictable_bets(y: object, bound: float, direction: str, *, truncation: float = _C) -> np.ndarray:
    """aGRAPA bets against H0 "the model meets ``bound``": ``lambda_t`` from ``y_1 .. y_{t-1}`` only.

    For a ``min`` gate the payoff is ``z = bound - y`` (mean <= 0 under H0); the bet is
    ``max(0, m_z / (v_z + m_z^2))`` with the predictable mean ``m_z`` and variance ``v_z``, truncated
    at ``truncation / (1 - bound)`` so that every factor ``1 + lambda z`` stays >= 1 - truncation > 0
    (``max``: ``z = y - bound``, truncation ``/ bound``).

    Args:
        y: sweep scores in [0, 1].
        bound: the gate's bound, in [0, 1].
        direction: ``"min"`` or ``"max"``.
        truncation: in (0, 1).

    Raises:
        ValueError: scores outside [0, 1], a bound outside [0, 1], an unknown direction.

    Example:
        >>> predictable_bets([0.1, 0.1, 0.1], 0.5, "min").round(3).tolist()   # bet on "below 0.5"
        [0.0, 1.0, 1.0]
    """
    y = _unit_array("y", y)
    b, d = _bound(bound), _direction(direction)
    if not 0.0 < truncation < 1.0:
        raise ValueError(f"`truncation` must be in (0, 1), but got {truncation!r}")
    if y.size == 0:
        return y.copy()
    mu, var = _predictable_moments(y)
    mz = (b - mu) if d == "min" else (mu - b)
    lam = np.maximum(0.0, mz / (var + mz ** 2))
    cap = truncation / (1.0 - b) if d == "min" else truncation / b if b > 0 else np.inf
    lam = np.minimum(lam, cap if math.isfinite(cap) else 1e12)
    return lam


def aggregate_bets(y: object, alpha: float = 0.05) -> np.ndarray:
    """PrPl-EB bets of Waudby-Smith & Ramdas: ``sqrt(2 log(2 / alpha) / (v_{t-1} t log(1 + t)))``.

    The sign-free bet size of the hedged confidence sequence (each side at ``alpha / 2``),
    before the per-candidate truncation of :func:`confidence_sequence`.

    Args:
        y: scores in [0, 1].
        alpha: the sequence's error level, in (0, 1).

    Example:
        >>> aggregate_bets([0.5, 0.5]).round(3).tolist()
        [6.525, 5.183]
    """
    y = _unit_array("y", y)
    alpha = _alpha("alpha", alpha)
    if y.size == 0:
        return y.copy()
    t = np.arange(1, y.size + 1)
    _, var = _predictable_moments(y)
    return np.sqrt(2.0 * math.log(2.0 / alpha) / (var * t * np.log1p(t)))


def e_process(y: object, bound: float, direction: str, *, bets: np.ndarray | None = None) -> np.ndarray:
    """The betting wealth against H0 "the model meets ``bound``" after each sweep (module docstring).

    ``min``: ``K_t = prod (1 + lambda_i (bound - y_i))``; ``max``: ``prod (1 + lambda_i (y_i - bound))``;
    ``lambda`` from :func:`predictable_bets` unless given. Under H0 it is a nonnegative
    supermartingale: rejecting when ``K_t >= 1 / a`` errs with probability at most ``a`` at any
    stopping time.

    Args:
        y: sweep scores in [0, 1] (:func:`sweeps`), in the order they were drawn.
        bound: the gate's bound in [0, 1].
        direction: ``"min"`` or ``"max"``.
        bets: predictable bets (same length); must keep every factor nonnegative.

    Returns:
        The wealth after each sweep (float64, same length as ``y``).

    Raises:
        ValueError: bad scores, bound or direction; bets of another length or making a factor negative.

    Example:
        >>> k = e_process(np.full(40, 0.2), 0.5, "min")      # far below a floor of 0.5
        >>> bool(k[-1] > 1 / 0.05)
        True
        >>> float(e_process(np.full(40, 0.8), 0.5, "min")[-1])  # above it: never bets, wealth stays 1
        1.0
    """
    y = _unit_array("y", y)
    b, d = _bound(bound), _direction(direction)
    lam = predictable_bets(y, b, d) if bets is None else np.asarray(bets, dtype=np.float64)
    if lam.shape != y.shape:
        raise ValueError(f"`bets` must have the length of `y` ({y.size}), but got shape {lam.shape}")
    z = (b - y) if d == "min" else (y - b)
    factors = 1.0 + lam * z
    if (factors < 0).any():
        raise ValueError("`bets` make a wealth factor negative: not a valid bet on [0, 1] data")
    return np.cumprod(factors)


def confidence_sequence(y: object, delta: float = 0.05, *, breaks: int = 1000,
                        running_intersection: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Betting confidence sequence for the mean of [0, 1] data: ``(lower, upper)`` after each observation.

    Hedged capital ``max(K+_t(m), K-_t(m)) / 2`` with PrPl-EB bets (:func:`aggregate_bets` at
    ``delta``, each side truncated at ``1/2`` of ``1 / m`` resp. ``1 / (1 - m)``), evaluated on the
    grid ``m = 0, 1/breaks, ..., 1``; ``m`` stays in the set while the hedged capital is below
    ``1 / delta``. The endpoints are grid points (resolution ``1 / breaks``, rounded outwards).

    Args:
        y: observations in [0, 1].
        delta: the sequence's error level, in (0, 1).
        breaks: grid intervals (>= 10).
        running_intersection: intersect with the previous set (nested intervals; still valid).

    Raises:
        ValueError: bad observations, ``delta`` outside (0, 1), ``breaks < 10``.

    Example:
        >>> lo, hi = confidence_sequence(np.tile([0.0, 1.0], 200))
        >>> round(float(lo[-1]), 2), round(float(hi[-1]), 2)
        (0.41, 0.59)
    """
    y = _unit_array("y", y)
    delta = _alpha("delta", delta)
    if isinstance(breaks, bool) or not isinstance(breaks, (int, np.integer)) or breaks < 10:
        raise ValueError(f"`breaks` must be an integer >= 10, but got {breaks!r}")
    if y.size == 0:
        return np.empty(0), np.empty(0)
    grid = np.linspace(0.0, 1.0, int(breaks) + 1)
    lam = aggregate_bets(y, delta)[:, None]
    with np.errstate(divide="ignore"):
        lam_pos = np.minimum(lam, _C / grid[None, :])
        lam_neg = np.minimum(lam, _C / (1.0 - grid[None, :]))
    diff = y[:, None] - grid[None, :]
    with np.errstate(invalid="ignore"):
        log_pos = np.cumsum(np.log1p(np.where(np.isfinite(lam_pos), lam_pos, 0.0) * diff), axis=0)
        log_neg = np.cumsum(np.log1p(-np.where(np.isfinite(lam_neg), lam_neg, 0.0) * diff), axis=0)
    log_hedged = np.maximum(log_pos, log_neg) + math.log(0.5)
    inside = log_hedged < math.log(1.0 / delta)
    # the candidate 0 (1) with its infinite bet cap: a single y > 0 (y < 1) rules it out only via the
    # bet actually taken, which is finite: the arrays above already use the finite PrPl bet
    if running_intersection:
        inside = np.logical_and.accumulate(inside, axis=0)
    lower = np.empty(y.size)
    upper = np.empty(y.size)
    for t in range(y.size):
        idx = np.flatnonzero(inside[t])
        if idx.size == 0:  # every candidate excluded (possible only by chance): keep the empirical mean
            mean = float(y[: t + 1].mean())
            lower[t] = upper[t] = mean
        else:
            lower[t] = grid[max(idx[0] - 1, 0)]
            upper[t] = grid[min(idx[-1] + 1, grid.size - 1)]
    return lower, upper


def conditional_power(n: int, N: int, mean: float, sd: float, theta: float, bound: float, direction: str,
                      z_fail: float) -> float:
    """Probability that the full-N test still fails, given ``n`` of ``N`` sweeps with mean ``mean``.

    Normal approximation: the remaining ``N - n`` sweeps average ``R ~ N(theta, sd^2 / (N - n))``;
    the full-N mean is ``(n mean + (N - n) R) / N`` and the full-N test fails a ``min`` gate when it
    is at most ``bound - z_fail sd / sqrt(N)`` (``max``: at least ``bound + ...``).

    Args:
        n, N: sweeps seen and planned (``0 < n <= N``).
        mean, sd: the sweeps' mean and standard deviation so far.
        theta: the mean assumed for the remaining sweeps.
        bound, direction: the gate.
        z_fail: the full-N test's critical value (``Phi^{-1}(1 - level)``).

    Raises:
        ValueError: ``n`` outside ``1..N``.

    Example:
        >>> round(conditional_power(10, 40, 0.50, 0.1, 0.50, 0.5, "min", 2.0), 3)
        0.01
        >>> conditional_power(40, 40, 0.40, 0.1, 0.4, 0.5, "min", 2.0)  # at N: the verdict itself
        1.0
    """
    if isinstance(n, bool) or not (isinstance(n, (int, np.integer)) and isinstance(N, (int, np.integer))) or not 0 < n <= N:
        raise ValueError(f"`n` must be in 1..N ({N}), but got {n!r}")
    sign = 1.0 if _direction(direction) == "min" else -1.0
    sd = max(float(sd), 1e-12)
    crit = bound - sign * z_fail * sd / math.sqrt(N)
    if n == N:
        return 1.0 if sign * (mean - crit) <= 0 else 0.0
    need = (N * crit - n * mean) / (N - n)  # the remaining sweeps' mean must be <= need (min)
    z = sign * (need - theta) / (sd / math.sqrt(N - n))
    return float(_special.ndtr(z))


def coverage_settled(coverage_now: float, bound: float, direction: str) -> bool:
    """Whether a coverage gate's fixed-N verdict is already certain to be a pass (nested samples).

    Coverage never falls when generated images are added, so a ``min`` gate met at ``n`` is met at
    ``N``. A ``max`` gate cannot be settled early this way (nor can any coverage fail).

    Example:
        >>> coverage_settled(0.62, 0.30, "min"), coverage_settled(0.20, 0.30, "min"), coverage_settled(0.1, 0.3, "max")
        (True, False, False)
    """
    return _direction(direction) == "min" and float(coverage_now) >= float(bound)


def e_closed_rejections(e_values: Sequence[float] | np.ndarray, alpha: float) -> np.ndarray:
    """Closed testing with mean-of-e-values local tests (e-Holm): which hypotheses are rejected.

    ``H_i`` is rejected when every intersection ``S`` containing ``i`` has
    ``mean_{j in S} e_j >= 1 / alpha``; for each size ``k`` the least favourable ``S`` is ``i`` with
    the ``k - 1`` smallest other e-values. Controls the family-wise error rate at ``alpha`` under any
    dependence (Vovk & Wang 2021), at any stopping time when the e-values are stopped e-processes of a
    common filtration (module docstring).

    Args:
        e_values: nonnegative e-values (wealths), one per gate.
        alpha: family-wise level, in (0, 1).

    Returns:
        Boolean array, True where rejected.

    Raises:
        ValueError: negative or NaN e-values (``inf`` is allowed), ``alpha`` outside (0, 1).

    Example:
        >>> e_closed_rejections([100.0, 1.0, 1.0, 1.0], 0.05).tolist()   # mean over all 4 is 25.75 >= 20
        [True, False, False, False]
        >>> e_closed_rejections([30.0, 1.0, 1.0, 1.0], 0.05).tolist()
        [False, False, False, False]
    """
    e = np.asarray(e_values, dtype=np.float64)
    alpha = _alpha("alpha", alpha)
    if e.ndim != 1 or np.isnan(e).any() or (e < 0).any():
        raise ValueError("`e_values` must be a 1-D array of nonnegative numbers")
    m = e.size
    out = np.zeros(m, dtype=bool)
    if m == 0:
        return out
    order = np.argsort(e, kind="stable")
    s = e[order]
    prefix = np.concatenate([[0.0], np.cumsum(s)])  # prefix[k] = sum of the k smallest
    target = 1.0 / alpha
    ks = np.arange(1, m + 1)
    for rank, i in enumerate(order):
        # sum of the k-1 smallest others: the k-1 smallest overall, skipping i's own slot
        k1 = ks - 1
        others = np.where(k1 <= rank, prefix[k1], prefix[np.minimum(k1 + 1, m)] - s[rank])
        out[i] = bool(np.all((e[i] + others) / ks >= target))
    return out


def round_sizes(N: int, batch: int, *, first: int | None = None, growth: float = 2.0) -> list[int]:
    """Images per prompt after each round: multiples of ``batch``, growing by ``growth``, ending at ``N``.

    A round's size is a multiple of the batch size, so a sequential run's canonical batches (and
    cached bytes) are those of the fixed-N run: images ``0 .. n_r - 1`` of every prompt are the first
    ``n_r`` images of the fixed-N run. ``first`` defaults to ``N / 16`` (at least one batch).

    Args:
        N: the preset's images per prompt (>= 1).
        batch: the generation batch size (>= 1).
        first: images per prompt in the first round (rounded up to a batch multiple, at most ``N``).
        growth: factor between rounds (> 1).

    Raises:
        ValueError: non-positive ``N``/``batch``/``first`` or ``growth <= 1``.

    Example:
        >>> round_sizes(64, 4)
        [4, 8, 16, 32, 64]
        >>> round_sizes(50, 4, first=8)     # the last round ends at N, whatever the batch
        [8, 16, 32, 50]
        >>> round_sizes(6, 2)
        [2, 4, 6]
    """
    for name, v in (("N", N), ("batch", batch)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"`{name}` must be a positive integer, but got {v!r}")
    if not growth > 1:
        raise ValueError(f"`growth` must be > 1, but got {growth!r}")
    if first is None:
        first = max(1, N // 16)
    if isinstance(first, bool) or not isinstance(first, (int, np.integer)) or first < 1:
        raise ValueError(f"`first` must be a positive integer, but got {first!r}")
    size = min(N, int(math.ceil(first / batch)) * batch)
    out = [size]
    while out[-1] < N:
        nxt = int(math.ceil(out[-1] * growth / batch)) * batch
        out.append(min(N, max(nxt, out[-1] + batch)))
    return out


@dataclass(frozen=True)
class Sweeps:
    """How a gate's value is made from images, for ``--t2i-sequential`` (a gate test passes it to ``gate``).

    ``share`` gates: the value is the mean over ``prompts`` prompts of ``images`` images each (the
    first ``images`` of the fixed-N run's ``planned``) of per-image scores in [0, 1], every image
    counted once (a balanced grid: image ``j`` of every prompt is sweep ``j``). ``coverage`` gates:
    the value is a coverage of those images; ``nested`` says the images kept at ``images`` stay kept
    at ``planned`` (no de-duplication that can drop an earlier image later), so coverage cannot fall.

    Attributes:
        prompts: prompts per sweep (>= 1).
        images: images per prompt at this look (1..planned).
        planned: images per prompt of the fixed-N run (``N``).
        nested: for coverage: the scored images at this look are a subset of those at ``N``.

    Raises:
        ValueError: a size below 1, or ``images > planned``.
    """

    prompts: int
    images: int
    planned: int
    nested: bool = True

    def __post_init__(self) -> None:
        for name in ("prompts", "images", "planned"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"Sweeps.{name} must be a positive integer, but got {v!r}")
        if self.images > self.planned:
            raise ValueError(f"Sweeps: {self.images} images per prompt is more than the {self.planned} planned")


@dataclass(frozen=True)
class Look:
    """One gate at one look: the reason it stopped (or ``open``), its wealth and sequence.

    Attributes:
        reason: a key of :data:`REASONS`.
        n: sweeps (images per prompt) seen.
        N: planned.
        wealth: the e-process's value (1 for kinds without one).
        lower, upper: the confidence sequence at this look (``nan`` when not computed).
        conditional_power: of the full-N test at the least favourable mean in the sequence.
    """

    reason: str
    n: int
    N: int
    wealth: float
    lower: float
    upper: float
    conditional_power: float

    @property
    def stopped(self) -> bool:
        return self.reason != "open"

    def record(self) -> dict:
        """Plain fields for reports (run.json, JUnit properties)."""
        return {"reason": REASONS[self.reason], "images_per_prompt": self.n, "planned_per_prompt": self.N,
                "wealth": self.wealth, "sequence": [self.lower, self.upper],
                "conditional_power": self.conditional_power}


def _rho(sigma2: float, n_target: float, alpha: float) -> float:
    """The mixture's precision making its boundary tightest after ``n_target`` sweeps (grid search)."""
    v = sigma2 * max(float(n_target), 1.0)
    rhos = v * np.geomspace(1e-3, 10.0, 400)
    width = np.sqrt((v + rhos) * np.log((v + rhos) / (rhos * alpha ** 2)))
    return float(rhos[int(np.argmin(width))])


def mixture_e_process(y: object, bound: float, direction: str, *, prompts: int, n_target: float,
                      alpha: float = 0.05) -> np.ndarray:
    """One-sided normal-mixture e-process of sub-Gaussian sweeps against H0 "the model meets ``bound``".

    A sweep mean of ``prompts`` independent [0, 1] scores is sub-Gaussian around ``theta`` with
    variance proxy ``sigma^2 = 1 / (4 prompts)`` (Hoeffding's lemma per prompt, independent seeds).
    For a ``min`` gate, ``S_t = sum_i (bound - y_i)`` and ``V_t = sigma^2 t``; for every ``lambda >= 0``,
    ``exp(lambda S_t - lambda^2 V_t / 2)`` is a supermartingale when ``theta >= bound``, and so is its
    mixture over a half-normal ``lambda`` of precision ``rho`` (Howard et al. 2021, s. 3):
    ``M_t = 2 sqrt(rho / (V_t + rho)) exp(S_t^2 / (2 (V_t + rho))) Phi(S_t / sqrt(V_t + rho))``.
    Ville: ``P(sup_t M_t >= 1 / a) <= a`` under H0. ``rho`` makes the matching boundary tightest
    after ``n_target`` sweeps at level ``alpha`` (a tuning choice: validity holds for any ``rho``).
    Unlike the [0, 1]-range betting of :func:`e_process`, whose wealth grows at most by
    ``1 + c (bound - y) / (1 - bound)`` per sweep whatever the sweep's spread, this uses the sweep's
    ``1 / prompts`` variance: with 16 images per CIS prompt (16 sweeps) the range bet cannot reach
    ``m / alpha`` for a run of hundreds of gates, this can.

    Args:
        y: sweep scores in [0, 1].
        bound, direction: the gate.
        prompts: prompts per sweep (>= 1).
        n_target: sweeps at which the mixture is tuned (e.g. ``N / 4``).
        alpha: the level the tuning aims at.

    Returns:
        ``M_t`` after each sweep.

    Raises:
        ValueError: bad scores, bound, direction or ``prompts < 1``.

    Example:
        >>> y = np.full(16, 0.45)                  # sweeps of 1,000 prompts, 5 points under 0.5
        >>> bool(mixture_e_process(y, 0.5, "min", prompts=1000, n_target=4)[-1] > 1e6)
        True
        >>> float(mixture_e_process(np.full(16, 0.55), 0.5, "min", prompts=1000, n_target=4)[-1]) < 0.1
        True
    """
    y = _unit_array("y", y)
    b, d = _bound(bound), _direction(direction)
    if isinstance(prompts, bool) or not isinstance(prompts, (int, np.integer)) or prompts < 1:
        raise ValueError(f"`prompts` must be a positive integer, but got {prompts!r}")
    sigma2 = 0.25 / int(prompts)
    rho = _rho(sigma2, n_target, _alpha("alpha", alpha))
    t = np.arange(1, y.size + 1)
    s = np.cumsum((b - y) if d == "min" else (y - b))
    v = sigma2 * t + rho
    log_m = math.log(2.0) + 0.5 * np.log(rho / v) + s ** 2 / (2 * v) + _special.log_ndtr(s / np.sqrt(v))
    return np.exp(np.minimum(log_m, 700.0))


def mixture_cs(y: object, *, prompts: int, n_target: float, delta: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided normal-mixture confidence sequence for ``theta`` from sub-Gaussian sweeps.

    ``|mean_t - theta| <= sqrt((V_t + rho) log((V_t + rho) / (rho delta^2))) / t`` for all ``t``
    simultaneously with probability ``1 - delta`` (Robbins' normal mixture; Howard et al. 2021), with
    ``V_t = t / (4 prompts)``; clipped to [0, 1].

    Args:
        y: sweep scores in [0, 1].
        prompts: prompts per sweep.
        n_target: sweeps at which the boundary is tightest.
        delta: error level.

    Example:
        >>> lo, hi = mixture_cs(np.full(16, 0.5), prompts=1000, n_target=16)
        >>> round(float(lo[-1]), 4), round(float(hi[-1]), 4)
        (0.488, 0.512)
    """
    y = _unit_array("y", y)
    delta = _alpha("delta", delta)
    if isinstance(prompts, bool) or not isinstance(prompts, (int, np.integer)) or prompts < 1:
        raise ValueError(f"`prompts` must be a positive integer, but got {prompts!r}")
    sigma2 = 0.25 / int(prompts)
    rho = _rho(sigma2, n_target, delta)
    t = np.arange(1, y.size + 1)
    v = sigma2 * t + rho
    half = np.sqrt(v * np.log(v / (rho * delta ** 2))) / t
    mean = np.cumsum(y) / t
    return np.clip(mean - half, 0.0, 1.0), np.clip(mean + half, 0.0, 1.0)


def look(y: object, N: int, bound: float, direction: str, *, prompts: int, e_threshold: float, z_fail: float,
         delta: float = 0.05, gamma: float = 0.01, looks: int = 1, rejected: bool | None = None) -> Look:
    """Decide a share / bounded-mean gate at a look, apart from the run's multiplicity step.

    Order: fail when the gate's e-process (:func:`mixture_e_process`, tuned at ``N / 4``) reaches
    ``e_threshold`` (or ``rejected`` says the run's closed e-test rejected it); at ``N`` the gate
    ran to N (the caller applies the fixed-N test); else pass when the confidence sequence
    (:func:`mixture_cs` at ``delta``) lies on the passing side of the bound ("met"), or when the
    conditional power of the full-N test at ``z_fail`` is below ``gamma`` ("futility"), computed at
    the least favourable end of a one-sided ``1 - delta / looks`` normal confidence bound of the
    sweeps' mean (Bonferroni over the design's ``looks``: all looks' bounds cover ``theta`` with
    probability about ``1 - delta``, so a fixed-N fail becomes a futility pass with probability at
    most about ``gamma + delta``; narrower than the time-uniform sequence at a first look).

    Args:
        y: sweep scores so far (``n = len(y)`` of ``N``).
        N: planned sweeps (images per prompt).
        bound, direction: the gate.
        prompts: prompts per sweep.
        e_threshold: ``1 / (per-gate level)`` (e.g. ``m / alpha_e``), unless ``rejected`` is given.
        z_fail: critical value of the full-N test.
        delta: the sequence's level (futility and "met" only: no error budget spent).
        gamma: the futility level.
        looks: the design's number of looks (the futility bound's Bonferroni split of ``delta``).
        rejected: the run's closed e-test verdict, when known.

    Raises:
        ValueError: ``len(y)`` outside ``1..N``, or as the functions it calls.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> low = rng.binomial(200, 0.3, 4) / 200        # 4 sweeps of 200 prompts, true share 0.3
        >>> look(low, 64, 0.5, "min", prompts=200, e_threshold=19000, z_fail=3.7).reason
        'fail'
        >>> high = rng.binomial(200, 0.8, 4) / 200
        >>> look(high, 64, 0.5, "min", prompts=200, e_threshold=19000, z_fail=3.7).reason
        'met'
    """
    y = _unit_array("y", y)
    b, d = _bound(bound), _direction(direction)
    n = int(y.size)
    if n < 1 or n > N:
        raise ValueError(f"a look needs 1..N ({N}) sweeps, but got {n}")
    target = max(1.0, N / 4)
    wealth = float(mixture_e_process(y, b, d, prompts=prompts, n_target=target)[-1])
    lo, hi = mixture_cs(y, prompts=prompts, n_target=target, delta=delta)
    lower, upper = float(lo[-1]), float(hi[-1])
    sign = 1.0 if d == "min" else -1.0
    worst = lower if d == "min" else upper
    # the full-N test's spread: the sweeps' own, never below a share's Hoeffding-free floor
    sd = float(np.std(y, ddof=1)) if n > 1 else 0.5 / math.sqrt(prompts)
    # never below the spread of a share at the current mean (the largest a [0, 1] score with that mean can
    # have, and a share's own without prompt effects): two or three sweeps' own spread is too noisy to trust
    m_now = min(max(float(y.mean()), 0.0), 1.0)
    sd = max(sd, math.sqrt(max(m_now * (1.0 - m_now), 0.0025) / prompts))
    z_look = float(-_special.ndtri(_alpha("delta", delta) / max(1, int(looks))))
    plausible = float(y.mean()) - sign * z_look * sd / math.sqrt(n)
    cp = conditional_power(n, int(N), float(y.mean()), sd, plausible, b, d, z_fail)
    fails = wealth >= e_threshold if rejected is None else bool(rejected)
    if fails:
        reason = "fail"
    elif n == N:
        reason = "full"
    elif sign * (worst - b) > 0:
        reason = "met"
    elif cp < gamma:
        reason = "futility"
    else:
        reason = "open"
    return Look(reason, n, int(N), wealth, lower, upper, cp)
