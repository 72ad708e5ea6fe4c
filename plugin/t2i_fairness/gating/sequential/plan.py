"""Planning a sequential run: each look's spending share and futility level, and a plan's images (``docs/sequential.md``)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
from scipy import special as _special

from t2i_fairness.gating.indicator import KINDS
from t2i_fairness.metrics.intervals import upper_quantile
from t2i_fairness.metrics.sequential import round_sizes

__all__ = ["NullShares", "PromptUse", "futility_levels", "image_range", "null_share", "round_sizes",
           "sequential_images", "spending_shares"]

#: the chance a model missing by the futility miss is passed early (spread evenly over the looks before N)
FUTILITY_BETA = 0.005


def spending_shares(fractions: Sequence[float], level: float) -> np.ndarray:
    """The share of ``level`` each look may spend (O'Brien-Fleming-type, Lan & DeMets 1983): ``F(t) = 2 - 2 Phi(z_{level/2}
    / sqrt(t))``, ``s_k = (F(t_k) - F(t_{k-1})) / level``, summing to 1. ``fractions``: ``n_k / N``, increasing, the last 1.

    Example:
        >>> s = spending_shares([0.25, 0.5, 1.0], 0.05 / 475)
        >>> f"{s[0]:.1e}", f"{s[1]:.1e}", round(float(s[2]), 6), round(float(s.sum()), 12)
        ('8.3e-11', '3.9e-04', 0.999606, 1.0)
    """
    t = np.asarray(fractions, dtype=np.float64)
    if t.ndim != 1 or t.size == 0 or not (np.all(np.diff(t) > 0) and t[0] > 0 and abs(t[-1] - 1.0) < 1e-12):
        raise ValueError(f"`fractions` must increase in (0, 1] and end at 1, but got {list(fractions)}")
    if not 0 < level < 1:
        raise ValueError(f"`level` must be in (0, 1), but got {level!r}")
    z = upper_quantile(level / 2)
    cumulative = np.array([2.0 * float(_special.ndtr(-z / math.sqrt(x))) for x in t[:-1]] + [level])
    return np.diff(np.r_[0.0, cumulative]) / level


def futility_levels(looks: int) -> list[float]:
    """``beta_k`` of each look before ``N``: ``FUTILITY_BETA`` spread evenly (``futility_levels(4)``: three of 0.005 / 3)."""
    early = max(0, int(looks) - 1)
    return [FUTILITY_BETA / early] * early if early else []



def image_range(requests, batch: int, *, images_per_hour: float | None = None) -> dict:
    """Best (one batch per prompt) and worst (the fixed-N plan) case images of a sequential run over a plan's requests,
    with GPU hours at ``images_per_hour``; a prompt asked twice counts at its largest ``n``.

    Example:
        >>> from t2i_fairness.spine.plan import ImageRequest
        >>> image_range([ImageRequest("a", 16), ImageRequest("b", 16), ImageRequest("a", 8)], 4)
        {'best_images': 8, 'worst_images': 32}
    """
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"`batch` must be a positive integer, but got {batch!r}")
    per_prompt: dict[str, int] = {}
    for r in requests:
        per_prompt[r.prompt] = max(per_prompt.get(r.prompt, 0), int(r.n))
    out = {"best_images": sum(min(batch, n) for n in per_prompt.values()), "worst_images": sum(per_prompt.values())}
    if images_per_hour is not None:
        if not images_per_hour > 0:
            raise ValueError(f"`images_per_hour` must be > 0, but got {images_per_hour!r}")
        out["best_hours"] = round(out["best_images"] / images_per_hour, 4)
        out["worst_hours"] = round(out["worst_images"] / images_per_hour, 4)
    return out



@dataclass(frozen=True)
class NullShares:
    """A family's null-model image shares: ``table``: kind -> ``{(N, batch): share}`` (the images a gate used, as a share
    of its fixed ``N`` in the family's look unit, for a model that did not regress); ``source``: the bench behind them.
    """

    table: Mapping[str, Mapping[tuple[int, int], float]]
    source: str = ""

    @classmethod
    def load(cls, path: str | Path) -> "NullShares":
        """Read ``{"source": ..., "null_shares": {kind: {"N,batch": share}}}``."""
        data = json.loads(Path(path).read_text())
        table = {kind: {tuple(int(x) for x in key.split(",")): float(v) for key, v in rows.items()}
                 for kind, rows in data["null_shares"].items()}
        return cls(table, str(data.get("source", "")))

    def dump(self) -> str:
        """The data file's text (:meth:`load` reads it back)."""
        rows = {kind: {f"{n},{b}": v for (n, b), v in sorted(t.items())} for kind, t in sorted(self.table.items())}
        return json.dumps({"source": self.source, "null_shares": rows}, indent=1) + "\n"


def null_share(table: NullShares | None, kind: str, batch: int,
               size: int | None = None) -> tuple[float, tuple[int, int] | None]:
    """The null-model share of one gate's images and the bench's ``(N, batch)`` it was measured at (``(1.0, None)``
    where ``table`` lacks the kind: counted at ``N``): the measured ``N`` nearest ``size`` on a log scale (the smaller on a
    tie; ``None``: the smallest), then the batch nearest ``batch`` (the larger on a tie).

    Example:
        >>> t = NullShares({"share": {(500, 8): 0.6, (10000, 16): 0.1}})
        >>> null_share(t, "share", 16, 9000), null_share(t, "share", 4), null_share(t, "spread", 8)
        ((0.1, (10000, 16)), (0.6, (500, 8)), (1.0, None))
    """
    if kind not in KINDS:
        raise ValueError(f"unknown sequential kind {kind!r}; one of {sorted(KINDS)}")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"`batch` must be a positive integer, but got {batch!r}")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
        raise ValueError(f"`size` must be a positive integer or None, but got {size!r}")
    rows = None if table is None else table.table.get(kind)
    if not rows:
        return 1.0, None
    sizes = sorted({n for n, _ in rows})
    n = sizes[0] if size is None else min(sizes, key=lambda s: (abs(math.log(s / size)), s))
    b = min((b for s, b in rows if s == n), key=lambda b: (abs(b - batch), -b))
    return float(rows[(n, b)]), (n, b)


@dataclass(frozen=True)
class PromptUse:
    """One gate's use of one prompt: ``planned`` images in the fixed-N plan, ``first`` after its first look (``planned``
    where it runs to ``N``), ``share``: its expected images over ``planned`` (the null-model figure).
    """

    prompt: str
    planned: int
    first: int
    share: float = 1.0

    def __post_init__(self) -> None:
        if not 0 <= self.first <= self.planned:
            raise ValueError(f"PromptUse {self.prompt!r}: first round {self.first} not in 0..{self.planned}")
        if not 0.0 <= self.share <= 1.0:
            raise ValueError(f"PromptUse {self.prompt!r}: share {self.share!r} not in [0, 1]")


def sequential_images(uses, cached=None) -> dict:
    """Worst, expected and best case images of a sequential run over a plan, and those still to make given ``cached``
    (prompt -> cached image indices). Per prompt the gate needing the most counts: worst ``planned``, best ``first``,
    expected ``share * planned`` between the two.

    Example:
        >>> uses = [PromptUse("a", 16, 4, 0.33), PromptUse("a", 16, 4, 0.8), PromptUse("b", 16, 4, 0.33),
        ...         PromptUse("c", 16, 16, 1.0)]
        >>> r = sequential_images(uses)
        >>> r["worst"], r["expected"], r["best"]         # a: 12.8, b: 5.28, c: 16
        (48, 34, 24)
    """
    cached = cached or {}
    worst: dict[str, int] = {}
    best: dict[str, int] = {}
    expected: dict[str, float] = {}
    for u in uses:
        worst[u.prompt] = max(worst.get(u.prompt, 0), int(u.planned))
        best[u.prompt] = max(best.get(u.prompt, 0), int(u.first))
        e = max(float(u.first), min(float(u.planned), u.share * u.planned))
        expected[u.prompt] = max(expected.get(u.prompt, 0.0), e)

    def to_make(prompt: str, n: float) -> float:
        have = cached.get(prompt, ())
        whole = int(math.floor(n))
        missing = whole - sum(1 for i in have if 0 <= i < whole)  # per cached image, not per image asked for
        return missing + ((n - whole) if n > whole and whole not in have else 0.0)

    return {"prompts": len(worst), "early_prompts": sum(1 for p in worst if best[p] < worst[p]),
            "worst": sum(worst.values()), "expected": int(round(sum(expected.values()))),
            "best": sum(best.values()),
            "worst_to_make": sum(int(to_make(p, n)) for p, n in worst.items()),
            "expected_to_make": int(round(sum(to_make(p, n) for p, n in expected.items()))),
            "best_to_make": sum(int(to_make(p, n)) for p, n in best.items())}



