"""The manifold metrics' inputs: validation at the public boundary and deduplication of rows."""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
import torch


Dedupe = Literal["none", "keep_one", "drop_all"]

DEDUPE_CHOICES: tuple[str, ...] = ("none", "keep_one", "drop_all")

DEFAULT_NEAREST_K = 3

# Features must stay far from float64 overflow, since squared distances are summed.
_MAX_ABS_FEATURE = 1e150


def _in(group: str | None) -> str:
    return "" if group is None else f" (group {group!r})"


def _check_nearest_k(nearest_k: Any) -> int:
    if isinstance(nearest_k, (bool, np.bool_)) or not isinstance(nearest_k, (int, np.integer)):
        raise ValueError(f"nearest_k must be an integer >= 1, got {nearest_k!r}")
    if nearest_k < 1:
        raise ValueError(f"nearest_k must be an integer >= 1, got {nearest_k!r}")
    return int(nearest_k)


def _check_dedupe(dedupe: Any) -> str:
    if dedupe not in DEDUPE_CHOICES:
        raise ValueError(f"dedupe must be one of {DEDUPE_CHOICES}, got {dedupe!r}")
    return str(dedupe)


def _as_features(x: Any, name: str, group: str | None = None) -> np.ndarray:
    """A 2-D float32 or float64 numpy view/copy of ``x`` (tensors are detached and moved to CPU)."""
    if isinstance(x, torch.Tensor):
        x = x.detach()
        if x.dtype in (torch.float16, torch.bfloat16):
            x = x.to(torch.float32)
        x = x.cpu().numpy()
    else:
        x = np.asarray(x)
    if x.ndim != 2:
        raise ValueError(
            f"{name}{_in(group)} must be a 2-D array (n_samples, n_features), got shape {x.shape}"
        )
    if x.shape[1] == 0:
        raise ValueError(f"{name}{_in(group)} has no feature columns, got shape {x.shape}")
    kind = x.dtype.kind
    if kind not in "fiub" or (kind == "f" and x.dtype.itemsize > 8):
        raise ValueError(
            f"{name}{_in(group)} must hold real numbers (float32/float64/int), got dtype {x.dtype}"
        )
    if x.dtype == np.float32 or x.dtype == np.float64:
        return x
    if x.dtype == np.float16:
        return x.astype(np.float32)
    return x.astype(np.float64)


def _check_same_dim(real: np.ndarray, fake: np.ndarray, group: str | None) -> None:
    if real.shape[1] != fake.shape[1]:
        raise ValueError(
            f"real_features and fake_features must have the same number of features{_in(group)}, "
            f"got shapes {real.shape} and {fake.shape}"
        )


def _check_finite(x: np.ndarray, name: str, group: str | None) -> None:
    if x.size == 0:
        return
    low, high = float(x.min()), float(x.max())  # nan propagates, inf shows
    if math.isfinite(low) and math.isfinite(high):
        big = max(abs(low), abs(high))
    else:
        bad = ~np.isfinite(x).all(axis=1)
        rows = np.flatnonzero(bad)
        raise ValueError(
            f"{name}{_in(group)} has {rows.size} row(s) with NaN or inf values "
            f"(of {x.shape[0]}; first at row {rows[0]})"
        )
    if big >= _MAX_ABS_FEATURE:
        raise ValueError(
            f"{name}{_in(group)} has values as large as {big:.3g}; features must satisfy "
            f"|x| < {_MAX_ABS_FEATURE:.0e} so that squared distances stay finite"
        )


def _check_group_size(
    x: np.ndarray,
    name: str,
    minimum: int,
    k: int | None,
    group: str | None,
    dedupe: str | None,
) -> None:
    n = x.shape[0]
    if n >= minimum:
        return
    after = "" if dedupe in (None, "none") else f" after dedupe={dedupe!r}"
    why = (
        f"nearest_k={k} needs at least {minimum} (k-th nearest other point, as prdc requires)"
        if k is not None
        else f"at least {minimum} is needed"
    )
    raise ValueError(f"{name}{_in(group)} has {n} row(s){after}, but {why}")


def _check_radii(radii: Any, n: int, name: str, group: str | None) -> np.ndarray:
    if isinstance(radii, torch.Tensor):
        radii = radii.detach().cpu().numpy()
    r = np.asarray(radii)
    if r.shape != (n,):
        raise ValueError(f"{name}{_in(group)} must have shape ({n},), one per real row, got {r.shape}")
    if r.dtype.kind not in "fiu":
        raise ValueError(f"{name}{_in(group)} must be real numbers, got dtype {r.dtype}")
    r = r.astype(np.float64)
    bad = ~np.isfinite(r) | (r < 0)
    if bad.any():
        raise ValueError(
            f"{name}{_in(group)} must be finite and >= 0; {int(bad.sum())} value(s) are not "
            f"(first at index {int(np.flatnonzero(bad)[0])}: {r[bad][0]})"
        )
    return r


def _readonly(x: np.ndarray) -> np.ndarray:
    view = x.view()
    view.flags.writeable = False
    return view


def _dedupe(x: np.ndarray, mode: str) -> np.ndarray:
    if mode == "none" or x.shape[0] < 2:
        return x
    key = np.ascontiguousarray(x + x.dtype.type(0.0))  # maps -0.0 to 0.0
    rows = key.view(np.dtype((np.void, key.dtype.itemsize * key.shape[1]))).ravel()
    _, first, counts = np.unique(rows, return_index=True, return_counts=True)
    keep = first if mode == "keep_one" else first[counts == 1]
    return x[np.sort(keep)]
