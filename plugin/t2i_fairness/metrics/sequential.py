"""Planned looks of a sequential gate (``--t2i-sequential``; the decisions: :mod:`t2i_fairness.gating.sequential`).

A sequential run looks at the data at sizes planned before any image is made: images per prompt where
the prompts are a fixed grid (DIG In, Decomposed-DIG, IndicTTI, word-level), prompts drawn where they
are a sample (CIS: a prefix of the drawn prompt list, each prompt with all its images). Sizes are
multiples of the batch size, so the images of look ``k`` are the first ``n_k`` of the fixed-N run,
byte for byte, and the cache serves both designs.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["conditional_power", "round_sizes"]


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


def conditional_power(margin: float, miss: float, critical: float, se_final: float, fraction: float) -> float:
    """The chance that a test at ``N`` fails a gate, given a look at ``fraction = n / N`` of the data, were the
    truth a miss of ``miss`` (stochastic curtailment: Lan, Simon & Halperin 1982; Jennison & Turnbull 2000, ch. 10).

    Brownian-motion form of a mean: the estimate at ``N`` is ``t x_n + (1 - t) F`` with ``F`` the mean of the
    ``(1 - t) N`` units to come, normal around the missed value with variance ``se_final^2 / (1 - t)``; the test at
    ``N`` fails the gate when that estimate misses the bound by more than ``critical`` (its critical distance at
    ``N``: ``z_a se_final`` for a normal test). ``margin``: the look's estimate beyond the bound on the passing
    side (``x_n - bound`` for a ``min`` gate, ``bound - x_n`` for ``max``). Returns
    ``Phi((miss - (critical + t margin) / (1 - t)) / (se_final / sqrt(1 - t)))``.

    A gate stopped when this is below ``gamma`` loses at most ``gamma`` of its power at ``N`` against that miss
    (the runs it loses are those the test at ``N`` would have failed: ``E[1{stop} CP] <= gamma``), and less
    against a smaller one (the chance grows with the miss).

    Example:
        >>> round(conditional_power(0.0, 0.1, 0.0, 0.05, 0.5), 4)       # at the bound, half the data, no critical
        0.9214
        >>> round(conditional_power(0.2, 0.1, 0.15, 0.05, 0.25), 4)     # well clear, a wide test at N
        0.0019
    """
    t = float(fraction)
    if not 0.0 < t < 1.0:
        raise ValueError(f"`fraction` must be in (0, 1), but got {fraction!r}")
    if not (se_final > 0 and math.isfinite(se_final)):
        raise ValueError(f"`se_final` must be positive and finite, but got {se_final!r}")
    from scipy import special

    need = (float(critical) + t * float(margin)) / (1.0 - t)  # how far the coming units' mean must miss the bound
    return float(special.ndtr((float(miss) - need) / (float(se_final) / math.sqrt(1.0 - t))))
