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

__all__ = ["round_sizes"]


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
