"""The exact k-NN engine: fast float32 distances with a rigorous error bound, float64 rechecks of the
pairs inside that margin, so every decision is the one exact float64 distances make.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np
import torch

# Rows per block when chunk_size is None: about 2**25 float32 distances (128 MB) per block.
_BLOCK_ELEMENTS = 2**25

# Values per block when converting features (float64: 64 MB).
_PAIR_BATCH_VALUES = 2**23

_U64 = 2.0**-53

# A float32 cross block leaving more undecided pairs than this (and than 1/256 of the block)
# is redone in float64 rather than resolved pair by pair.
_FALLBACK_MIN_PAIRS = 4096

# Boolean masks are turned into index lists this many entries at a time (bounded memory).
_SLICE_ELEMENTS = 2**22


@dataclass(frozen=True)
class _Options:
    device: torch.device
    chunk_size: int | None

    @classmethod
    def make(cls, device: Any, chunk_size: Any) -> "_Options":
        if chunk_size is not None and (
            isinstance(chunk_size, (bool, np.bool_))
            or not isinstance(chunk_size, (int, np.integer))
            or chunk_size < 1
        ):
            raise ValueError(f"chunk_size must be a positive integer or None, got {chunk_size!r}")
        if device is None:
            dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        else:
            try:
                dev = torch.device(device)
            except (RuntimeError, TypeError) as err:
                raise ValueError(f"device must be a torch device such as 'cpu' or 'cuda', got {device!r}") from err
            if dev.type == "cuda" and not torch.cuda.is_available():
                raise ValueError(f"device={device!r} was requested but CUDA is not available; use 'cpu' or None")
        return cls(dev, None if chunk_size is None else int(chunk_size))

    def rows_per_block(self, n_cols: int) -> int:
        if self.chunk_size is not None:
            return self.chunk_size
        return max(1, _BLOCK_ELEMENTS // max(1, n_cols))


@contextlib.contextmanager
def _ieee_matmul() -> Iterator[None]:
    """Force full-precision float32 matmuls (no TF32/bf16), which the error bound assumes."""
    backends = [
        b
        for b in (getattr(torch.backends.cuda, "matmul", None), getattr(torch.backends.mkldnn, "matmul", None))
        if b is not None and hasattr(b, "fp32_precision")
    ]
    saved = [b.fp32_precision for b in backends]
    try:
        for b in backends:
            b.fp32_precision = "ieee"
        yield
    finally:
        for b, value in zip(backends, saved):
            b.fp32_precision = value


def _row_blocks(n: int, size: int) -> Iterator[tuple[int, int]]:
    for start in range(0, n, size):
        yield start, min(n, start + size)


def _gamma(n: int, u: float) -> float:
    """Higham's gamma_n = n u / (1 - n u): relative error bound of an n-term float sum/dot."""
    if n * u >= 0.5:
        return math.inf
    return n * u / (1.0 - n * u)


@dataclass(frozen=True)
class _Tier:
    dtype: torch.dtype
    u: float  # unit roundoff
    tiny: float  # largest absolute error of rounding a value into the subnormal range


_F32 = _Tier(torch.float32, 2.0**-24, 2.0**-150)

_F64 = _Tier(torch.float64, 2.0**-53, 2.0**-1074)


@dataclass(frozen=True)
class _Frame:
    """Common centre and power-of-two scale of the sets compared: ``y = (x - centre) * scale`` for all."""

    center: np.ndarray
    scale: float
    dim: int
    center_is_float32: bool

    @classmethod
    def make(cls, *sets: np.ndarray) -> "_Frame":
        total = sum(x.sum(axis=0, dtype=np.float64) for x in sets)
        center = total / sum(x.shape[0] for x in sets)
        as_float32 = all(x.dtype == np.float32 for x in sets)
        if as_float32:
            center = center.astype(np.float32).astype(np.float64)
        biggest = 0.0
        for x in sets:  # |x - centre| is largest at a column's extremes
            for extreme in (x.max(axis=0), x.min(axis=0)):
                biggest = max(biggest, float(np.abs(extreme.astype(np.float64) - center).max()))
        scale = 1.0 if biggest == 0.0 else math.ldexp(1.0, -math.frexp(biggest)[1])
        return cls(center, scale, sets[0].shape[1], as_float32)


@dataclass(frozen=True)
class _Work:
    """One feature set in a frame, in a tier's dtype, on the compute device."""

    x: torch.Tensor  # (n, dim) rounded (features - centre) * scale
    sq: torch.Tensor  # (n,) rounded squared norms of x, same dtype
    norm: np.ndarray  # (n,) float64 upper bounds of the exact norms of x
    max_exact_norm: float  # upper bound of ||(features - centre) * scale|| (unrounded)


def _prepare(x: np.ndarray, frame: _Frame, tier: _Tier, device: torch.device) -> _Work:
    n, dim = x.shape
    # subtract in float32 only when x, the centre and the result are float32 (one rounding)
    in_float32 = x.dtype == np.float32 and tier.dtype == torch.float32 and frame.center_is_float32
    exact_dtype = torch.float32 if in_float32 else torch.float64
    center = torch.from_numpy(frame.center).to(exact_dtype)  # exact: see _Frame
    out = torch.empty((n, dim), dtype=tier.dtype)
    sq = torch.empty(n, dtype=tier.dtype)
    for start, stop in _row_blocks(n, max(1, _PAIR_BATCH_VALUES // dim)):
        # torch.sub makes a new tensor: x itself (whose memory from_numpy shares) is never written
        block = x[start:stop] if x.flags.writeable else x[start:stop].copy()  # torch wants writable
        y = torch.sub(torch.from_numpy(block).to(exact_dtype), center).mul_(frame.scale)
        out[start:stop] = y
        sq[start:stop] = out[start:stop].square().sum(dim=1)
    # |sq - |x|^2| <= gamma_dim |x|^2 + dim * tiny (any summation order), so this bounds |x|:
    sq64 = sq.double().numpy()
    norm = np.sqrt((sq64 + dim * tier.tiny) / (1.0 - _gamma(dim, tier.u))) * (1.0 + 4 * _U64)
    # per-component rounding into the tier: relative u (plus float64 centring) or absolute tiny
    u1 = tier.u + 2 * _U64
    alpha = tier.tiny + 2.0**-1074
    max_exact = (float(norm.max(initial=0.0)) + alpha * math.sqrt(dim)) / (1.0 - u1)
    return _Work(out.to(device), sq.to(device), norm, max_exact)


@dataclass(frozen=True)
class _Bounds:
    """Rigorous error bounds linking the tier's identity distances ``q`` to the float64 distances.

    ``|q - dhat^2| <= 2c (|a|^2 + |b|^2) + qabs``, ``|dhat - d * scale| <= e1`` and
    ``|d64 - d| <= s64 d + eps64`` (``dhat``: the rounded rows' exact distance).
    """

    c: float
    qabs: float
    e1: float
    s64: float
    eps64: float
    scale: float

    @classmethod
    def make(cls, frame: _Frame, tier: _Tier, a: _Work, b: _Work) -> "_Bounds":
        dim = frame.dim
        c = 1.0625 * _gamma(2 * dim + 16, tier.u)
        u1 = tier.u + 2 * _U64
        alpha = tier.tiny + 2.0**-1074
        e1 = (u1 * (a.max_exact_norm + b.max_exact_norm) + 2 * alpha * math.sqrt(dim)) * (1 + 2.0**-40)
        return cls(
            c=c,
            qabs=4.0 * (dim + 4) * tier.tiny,
            e1=e1,
            s64=1.0625 * _gamma(dim + 4, _U64),
            eps64=2.0 * math.sqrt(dim * 2.0**-1074),
            scale=frame.scale,
        )

    def in_radius(self, r: np.ndarray) -> np.ndarray:
        """rho with: sqrt(q + E) < rho  implies  d64 < r  (nan where nothing can be sure)."""
        rho = (r - self.eps64) * self.scale / (1.0 + self.s64) - self.e1
        return np.where(rho > 0, rho * (1 - 2.0**-44), np.nan)

    def out_radius(self, r: np.ndarray) -> np.ndarray:
        """rho with: sqrt(max(q - E, 0)) >= rho  implies  d64 >= r."""
        return ((r + self.eps64) * self.scale / (1.0 - self.s64) + self.e1) * (1 + 2.0**-44)

    def upper_distance(self, q: np.ndarray, e: np.ndarray) -> np.ndarray:
        """Upper bound of d64 for a pair with identity value q and bound E = e."""
        hi = (np.sqrt(np.maximum(q, 0.0) + e) + self.e1) * (1.0 + self.s64) / self.scale + self.eps64
        return hi * (1 + 2.0**-44)

    def lower_distance(self, q: np.ndarray, e: np.ndarray) -> np.ndarray:
        """Lower bound of d64 for a pair with identity value q and bound E = e."""
        lo = (np.sqrt(np.maximum(q - e, 0.0)) - self.e1) * (1.0 - self.s64) / self.scale - self.eps64
        return lo - np.abs(lo) * 2.0**-44

    def lower_distance_threshold(self, d: np.ndarray, e: np.ndarray) -> np.ndarray:
        """t with: q > t  implies  d64 > d."""
        rho = ((d + self.eps64) * self.scale / (1.0 - self.s64) + self.e1) * (1 + 2.0**-44)
        return (rho * rho + e) * (1 + 2.0**-44)


def _to_tier(values: np.ndarray, tier: _Tier, device: torch.device, direction: str) -> torch.Tensor:
    """float64 thresholds rounded into the tier dtype toward -inf ('down') or +inf ('up')."""
    values = np.asarray(values, dtype=np.float64)
    if tier.dtype == torch.float64:
        out = values.copy()
    else:
        with np.errstate(over="ignore"):
            out = values.astype(np.float32)
        wide = out.astype(np.float64)
        if direction == "down":
            fix = wide > values
            out[fix] = np.nextafter(out[fix], np.float32(-np.inf))
        else:
            fix = wide < values
            out[fix] = np.nextafter(out[fix], np.float32(np.inf))
    out = np.where(np.isnan(values), -np.inf if direction == "down" else np.inf, out)
    return torch.from_numpy(np.ascontiguousarray(out)).to(device)


def _round_tier(values: np.ndarray, tier: _Tier, direction: str) -> np.ndarray:
    """float64 values rounded to the tier's precision toward -inf ('down') or +inf ('up'); nan
    becomes -inf ('down') or +inf ('up'). Returned as float64 holding tier-representable values."""
    return _to_tier(values, tier, torch.device("cpu"), direction).double().numpy()


def _exact_distances(a: np.ndarray, ia: np.ndarray, b: np.ndarray, ib: np.ndarray) -> np.ndarray:
    """float64 ``sqrt(sum((a[ia] - b[ib]) ** 2))`` per pair: the reference semantics."""
    out = np.empty(ia.size, dtype=np.float64)
    step = max(1, min(512, ia.size, _PAIR_BATCH_VALUES // a.shape[1]))
    buf_a = np.empty((step, a.shape[1]), dtype=a.dtype)
    buf_b = np.empty((step, b.shape[1]), dtype=b.dtype)
    diff = np.empty((step, a.shape[1]), dtype=np.float64)
    for start, stop in _row_blocks(ia.size, step):
        m = stop - start
        np.take(a, ia[start:stop], axis=0, out=buf_a[:m])
        np.take(b, ib[start:stop], axis=0, out=buf_b[:m])
        np.subtract(buf_a[:m], buf_b[:m], out=diff[:m], dtype=np.float64)
        np.square(diff[:m], out=diff[:m])
        diff[:m].sum(axis=1, out=out[start:stop])
    return np.sqrt(out, out=out)


def _identity_block(a: _Work, rows: slice | torch.Tensor, b: _Work) -> torch.Tensor:
    """q = |a|^2 + |b|^2 - 2 a.b for a[rows] x b, in the tier dtype."""
    q = torch.addmm(b.sq.unsqueeze(0), a.x[rows], b.x.T, beta=1.0, alpha=-2.0)
    return q.add_(a.sq[rows].unsqueeze(1))


class _Space:
    """Feature sets sharing one frame, with their working copies made on demand per tier."""

    def __init__(self, frame: _Frame, opts: _Options, **sets: np.ndarray) -> None:
        self.frame, self.opts, self.sets = frame, opts, sets
        self._works: dict[tuple[str, torch.dtype], _Work] = {}

    def work(self, name: str, tier: _Tier) -> _Work:
        key = (name, tier.dtype)
        if key not in self._works:
            self._works[key] = _prepare(self.sets[name], self.frame, tier, self.opts.device)
        return self._works[key]

    def release(self, tier: _Tier) -> None:
        for key in [key for key in self._works if key[1] == tier.dtype]:
            del self._works[key]


def _tiers(dim: int) -> tuple[_Tier, ...]:
    """Float32 filtering pays off only while its error bound stays small (dim up to about 7800)."""
    return (_F32, _F64) if 1.0625 * _gamma(2 * dim + 16, _F32.u) < 1e-3 else (_F64,)


def _radii(x: np.ndarray, k: int, opts: _Options, space: _Space | None = None, name: str = "x") -> np.ndarray:
    """k-th smallest float64 exact distance from each row of ``x`` to its other rows."""
    space = _Space(_Frame.make(x), opts, x=x) if space is None else space
    n = x.shape[0]
    radii = np.full(n, np.nan)
    tiers = _tiers(x.shape[1])
    # top-k pass in the fast tier; rows with many near-equal neighbours get the mask passes
    todo = _radii_topk_pass(x, k, space.work(name, tiers[0]), tiers[0], space, radii)
    for tier in tiers:
        if todo.size:
            limit = 4 * k + 32 if tier is _F32 else n
            todo = _radii_mask_pass(x, k, space.work(name, tier), tier, space, todo, radii, limit)
    space.release(_F64)
    for row in todo:  # unreachable unless the bounds are wrong: every distance of the row
        others = np.delete(np.arange(n), row)
        d = _exact_distances(x, np.full(others.size, row), x, others)
        radii[row] = np.partition(d, k - 1)[k - 1]
    return radii


def _radii_topk_pass(
    x: np.ndarray, k: int, work: _Work, tier: _Tier, space: _Space, radii: np.ndarray
) -> np.ndarray:
    """Radii from the ``k + 8`` smallest identity values per row; return rows needing more candidates."""
    n = x.shape[0]
    keep = min(n - 1, k + 8)
    device = work.x.device
    best_v = torch.full((n, keep), math.inf, dtype=tier.dtype, device=device)
    best_i = torch.zeros((n, keep), dtype=torch.long, device=device)

    def merge(start: int, stop: int, values: torch.Tensor, cols: torch.Tensor) -> None:
        v = torch.cat([best_v[start:stop], values], dim=1)
        i = torch.cat([best_i[start:stop], cols], dim=1)
        v, pos = torch.topk(v, keep, dim=1, largest=False)
        best_v[start:stop] = v
        best_i[start:stop] = torch.gather(i, 1, pos)

    blocks = list(_row_blocks(n, space.opts.rows_per_block(n)))
    for b, (r0, r1) in enumerate(blocks):
        for c0, c1 in blocks[b:]:
            q = torch.addmm(work.sq[c0:c1].unsqueeze(0), work.x[r0:r1], work.x[c0:c1].T, beta=1.0, alpha=-2.0)
            q.add_(work.sq[r0:r1].unsqueeze(1))
            if c0 == r0:
                local = torch.arange(r1 - r0, device=device)
                q[local, local] = math.inf  # a row is not its own neighbour
            values, cols = torch.topk(q, min(keep, c1 - c0), dim=1, largest=False)
            merge(r0, r1, values, cols + c0)
            if c0 != r0:  # the same distances seen from the column rows (row-wise top-k is faster)
                values, rows = torch.topk(q.T.contiguous(), min(keep, r1 - r0), dim=1, largest=False)
                merge(c0, c1, values, rows + r0)
            del q

    bounds = _Bounds.make(space.frame, tier, work, work)
    max_sq = float(work.norm.max()) ** 2
    row_e = 2 * bounds.c * (work.norm**2 + max_sq) + bounds.qabs
    values = best_v.double().cpu().numpy()
    cols = best_i.cpu().numpy()
    limit = bounds.lower_distance_threshold(bounds.upper_distance(values[:, k - 1], row_e), row_e)
    cand = values <= limit[:, None]
    full = cand[:, -1].copy() if keep < n - 1 else np.zeros(n, dtype=bool)  # copy: cand changes
    cand[full] = False
    ri, pos = np.nonzero(cand)
    _radii_from_candidates(x, k, bounds, ri, cols[ri, pos], values[ri, pos], row_e, radii)
    return np.flatnonzero(full)


def _radii_mask_pass(
    x: np.ndarray,
    k: int,
    work: _Work,
    tier: _Tier,
    space: _Space,
    rows: np.ndarray,
    radii: np.ndarray,
    limit: int,
) -> np.ndarray:
    """Radii of ``rows`` from all their candidates; return rows with a count outside [k, limit]."""
    n = x.shape[0]
    bounds = _Bounds.make(space.frame, tier, work, work)
    max_sq = float(work.norm.max()) ** 2
    row_e = 2 * bounds.c * (work.norm**2 + max_sq) + bounds.qabs
    redo, found = [], []
    rows_t = torch.from_numpy(rows).to(work.x.device)
    for start, stop in _row_blocks(rows.size, space.opts.rows_per_block(n)):
        idx = rows_t[start:stop]
        block_rows = rows[start:stop]
        q = _identity_block(work, idx, work)
        q[torch.arange(stop - start, device=q.device), idx] = math.inf
        kth = torch.topk(q, k, dim=1, largest=False).values[:, k - 1].double().cpu().numpy()
        e = row_e[block_rows]
        t = bounds.lower_distance_threshold(bounds.upper_distance(kth, e), e)
        mask = q <= _to_tier(t, tier, q.device, "up").unsqueeze(1)
        local, cols = torch.nonzero(mask, as_tuple=True)
        qv = q[local, cols].double().cpu().numpy()
        local, cols = local.cpu().numpy(), cols.cpu().numpy()
        del q, mask
        counts = np.bincount(local, minlength=stop - start)
        bad = (counts < k) | (counts > limit)
        redo.append(block_rows[bad])
        ok = ~bad[local]
        found.append((block_rows[local[ok]], cols[ok], qv[ok]))
    if found:
        ri, ci, qv = (np.concatenate(parts) for parts in zip(*found))
        _radii_from_candidates(x, k, bounds, ri, ci, qv, row_e, radii)
    return np.concatenate(redo) if redo else np.empty(0, dtype=np.int64)


def _radii_from_candidates(
    x: np.ndarray,
    k: int,
    bounds: _Bounds,
    ri: np.ndarray,
    ci: np.ndarray,
    qv: np.ndarray,
    row_e: np.ndarray,
    radii: np.ndarray,
) -> None:
    """Set ``radii[row]`` to the k-th smallest exact distance among each row's candidates."""
    if ri.size == 0:
        return
    order = np.lexsort((qv, ri))
    ri, ci, qv = ri[order], ci[order], qv[order]
    uniq, first = np.unique(ri, return_index=True)
    kth_lo = bounds.lower_distance(qv[first + k - 1], row_e[uniq])
    slot = np.searchsorted(uniq, ri)
    below = bounds.upper_distance(qv, row_e[ri]) < kth_lo[slot]
    below_count = np.bincount(slot, weights=below, minlength=uniq.size).astype(np.int64)
    ri, ci, slot = ri[~below], ci[~below], slot[~below]
    d = _exact_distances(x, ri, x, ci)
    order = np.lexsort((d, slot))
    d, slot = d[order], slot[order]
    rest_first = np.searchsorted(slot, np.arange(uniq.size))
    radii[uniq] = d[rest_first + k - 1 - below_count]


@dataclass
class _CrossStats:
    fake_counts: np.ndarray  # real balls holding each fake point (only > 0 is exact unless counting)
    real_covered: np.ndarray  # the real ball holds some fake point
    real_recalled: np.ndarray  # the real point lies in some fake ball (with fake radii only)


@dataclass
class _BlockResult:
    sure_f: np.ndarray  # (fake, real) pairs surely inside the real ball
    sure_r: np.ndarray
    recalled: np.ndarray  # real columns surely inside some fake ball of this block
    open_f: np.ndarray  # undecided pairs, with what they are undecided for
    open_r: np.ndarray
    open_precision: np.ndarray  # bool: undecided for the real ball (precision/density/coverage)
    open_recall: np.ndarray  # bool: undecided for the fake ball (recall)


def _cross(space: _Space, real_r: np.ndarray, fake_r: np.ndarray | None, want_counts: bool) -> _CrossStats:
    """Membership of fake points in real balls (and of real points in fake balls)."""
    fake, real = space.sets["fake"], space.sets["real"]
    n_fake, n_real = fake.shape[0], real.shape[0]
    stats = _CrossStats(
        fake_counts=np.zeros(n_fake, dtype=np.int64),
        real_covered=np.zeros(n_real, dtype=bool),
        real_recalled=np.zeros(n_real, dtype=bool),
    )
    tiers = _tiers(real.shape[1])
    for start, stop in _row_blocks(n_fake, space.opts.rows_per_block(n_real)):
        for tier in tiers:  # float64 only for a block float32 leaves too undecided
            fw, rw = space.work("fake", tier), space.work("real", tier)
            bounds = _Bounds.make(space.frame, tier, fw, rw)
            block = _cross_block(fw, rw, bounds, tier, start, stop, real_r, fake_r, stats, want_counts)
            if block is not None:
                break
        np.add.at(stats.fake_counts, block.sure_f, 1)
        stats.real_covered[block.sure_r] = True
        stats.real_recalled[block.recalled] = True
        if block.open_f.size:
            pf, pr = block.open_f, block.open_r
            d = _exact_distances(fake, pf, real, pr)
            inside = block.open_precision & (d < real_r[pr])
            np.add.at(stats.fake_counts, pf[inside], 1)
            stats.real_covered[pr[inside]] = True
            if fake_r is not None:
                stats.real_recalled[pr[block.open_recall & (d < fake_r[pf])]] = True
    space.release(_F64)
    return stats


def _nonzero_slices(mask: torch.Tensor, *values: torch.Tensor) -> tuple[np.ndarray, ...]:
    """Row/column indices of ``mask`` (and the matching entries of ``values``), by row slices."""
    n_rows, n_cols = mask.shape
    step = max(1, _SLICE_ELEMENTS // max(1, n_cols))
    on_cpu = mask.device.type == "cpu"
    parts = []
    for start, stop in _row_blocks(n_rows, step):
        if on_cpu:  # numpy's flatnonzero is several times faster than torch.nonzero on CPU
            flat = np.flatnonzero(mask[start:stop].numpy())
            picked = [v[start:stop].numpy().reshape(-1)[flat].astype(np.float64) for v in values]
        else:
            flat_t = torch.nonzero(mask[start:stop].reshape(-1)).squeeze(1)
            picked = [v[start:stop].reshape(-1)[flat_t].double().cpu().numpy() for v in values]
            flat = flat_t.cpu().numpy()
        li, cj = np.divmod(flat, n_cols)
        parts.append((li + start, cj, *picked))
    return tuple(np.concatenate(p) for p in zip(*parts))


def _cross_block(
    fw: _Work,
    rw: _Work,
    bounds: _Bounds,
    tier: _Tier,
    start: int,
    stop: int,
    real_r: np.ndarray,
    fake_r: np.ndarray | None,
    stats: _CrossStats,
    want_counts: bool,
) -> _BlockResult | None:
    """Classify fake rows ``start:stop`` x all real rows as inside, outside or open; None if float32 leaves too many open."""
    device = fw.x.device
    c = bounds.c
    n_rows, n_real = stop - start, rw.x.shape[0]
    fake_sq = fw.norm[start:stop] ** 2
    real_sq = rw.norm**2
    e_col = 2 * c * (real_sq + float(fake_sq.max())) + bounds.qabs  # >= E_ij in this block
    x = bounds.in_radius(real_r) ** 2 - e_col
    offset = np.where(np.isnan(x), -2.0 * e_col, x - 1.02 * c * np.abs(x))  # A_j
    width = _round_tier(
        (bounds.out_radius(real_r) ** 2 - offset + e_col + c * np.abs(offset)) * (1 + 2.0**-40), tier, "up"
    )
    bias = (rw.sq.double().cpu().numpy() - offset).astype(np.float32 if tier is _F32 else np.float64)
    w = torch.addmm(torch.from_numpy(bias).to(device).unsqueeze(0), fw.x[start:stop], rw.x.T, beta=1.0, alpha=-2.0)
    w.add_(fw.sq[start:stop].unsqueeze(1))

    # one scalar threshold for all columns but the widest 1%, which are scanned separately
    cap = float(np.partition(width, (99 * (n_real - 1)) // 100)[(99 * (n_real - 1)) // 100])
    wf, wr, wv = _nonzero_slices(w < cap, w)
    wide = np.flatnonzero(width > cap)
    if wide.size:
        wide_t = torch.from_numpy(wide).to(device)
        sub = w[:, wide_t]
        lim = torch.from_numpy(width[wide]).to(device=device, dtype=w.dtype)
        xf, xr, xv = _nonzero_slices((sub >= cap) & (sub < lim.unsqueeze(0)), sub)
        wf, wr, wv = np.concatenate([wf, xf]), np.concatenate([wr, wide[xr]]), np.concatenate([wv, xv])
    sure = wv < 0
    sure_f, sure_r = wf[sure] + start, wr[sure]
    open_f, open_r = wf[~sure & (wv < width[wr])] + start, wr[~sure & (wv < width[wr])]
    if not want_counts:
        # precision and coverage only: a pair matters if its fake row or its real column is open
        row_done = np.zeros(n_rows, dtype=bool)
        row_done[sure_f - start] = True
        col_done = stats.real_covered.copy()
        col_done[sure_r] = True
        keep = ~row_done[open_f - start] | ~col_done[open_r]
        open_f, open_r = open_f[keep], open_r[keep]
    open_p = np.ones(open_f.size, dtype=bool)
    open_rc = np.zeros(open_f.size, dtype=bool)
    recalled = np.empty(0, dtype=np.int64)

    if fake_r is not None:
        # recall: q' = w + A_j estimates dhat^2 within E_ij + 3c|A_j|; row thresholds
        a32 = torch.from_numpy(offset.astype(bias.dtype)).to(device)
        q = w.add_(a32.unsqueeze(0))
        col_terms = 2 * c * float(real_sq.max()) + bounds.qabs + 3 * c * float(np.abs(offset).max())
        r_in = _round_tier(bounds.in_radius(fake_r[start:stop]) ** 2 - 2 * c * fake_sq - col_terms, tier, "down")
        r_out = _round_tier(bounds.out_radius(fake_r[start:stop]) ** 2 + 2 * c * fake_sq + col_terms, tier, "up")
        r_out_t = torch.from_numpy(r_out).to(device=device, dtype=w.dtype)
        rf, rr, rv = _nonzero_slices(q < r_out_t.unsqueeze(1), q)
        sure_rec = rv < r_in[rf]
        recalled = np.unique(rr[sure_rec])
        col_done = stats.real_recalled.copy()
        col_done[recalled] = True
        keep = ~sure_rec & ~col_done[rr]
        rec_f, rec_r = rf[keep] + start, rr[keep]
        # merge the two open lists into unique pairs with flags
        key_p = open_f.astype(np.int64) * n_real + open_r
        key_r = rec_f.astype(np.int64) * n_real + rec_r
        keys, inverse = np.unique(np.concatenate([key_p, key_r]), return_inverse=True)
        open_p = np.zeros(keys.size, dtype=bool)
        open_p[inverse[: key_p.size]] = True
        open_rc = np.zeros(keys.size, dtype=bool)
        open_rc[inverse[key_p.size :]] = True
        open_f, open_r = keys // n_real, keys % n_real
    del w

    if tier is _F32 and open_f.size > max(_FALLBACK_MIN_PAIRS, n_rows * n_real // 256):
        return None
    return _BlockResult(sure_f, sure_r, recalled, open_f, open_r, open_p, open_rc)
