"""Size and power of ``t2i-fairness compare`` on two runs that drew the same prompts and seeds: the paired t
interval of the units' differences against the independent (MOVER) interval of the same stored runs.

Run: ``python bench/bench_history_paired.py [--sims 4000] [--images 6] [--shift 0.03]``.

A CIS-like share gate: ``G`` prompts, each with a true share ``p ~ Beta(2, 2)`` and ``--images`` 0/1 judgements
per prompt; the unit is the prompt's share. Run B is another model at the same seeds: each image is redrawn with
chance ``--redraw`` (what the same seed still shares is kept), from ``p`` (null: no change in the mean) or from
``p - shift`` (a small shift every prompt shares). Each simulated pair is compared by the product's
:func:`~t2i_fairness.history.compare.compare_gates` over :class:`~t2i_fairness.history.store.GateRow` records with
and without their units (the independent interval: each run's normal interval of its prompt shares). The bench
prints the rejection rate at 0.05 and at 0.05 / 24 (Holm's first step over 24 gates) beside the level, with
the Clopper-Pearson interval, for 16 and 60 prompts. It makes no assertion.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "plugin"))

from t2i_fairness.history.compare import compare_gates  # noqa: E402
from t2i_fairness.history.store import GateRow, pack_units  # noqa: E402


def _row(run: int, shares: np.ndarray, units: bool) -> GateRow:
    g, value = shares.size, float(shares.mean())
    se = float(shares.std(ddof=1) / np.sqrt(g))
    blob = pack_units({"ids": [str(i) for i in range(g)], "values": shares.tolist()}) if units else None
    return GateRow(run, "g", None, value, value - 1.96 * se, value + 1.96 * se, se, 0.95, g, 0.5, "min", "pass",
                   None, None, None, "same", blob)


def _p_values(rng, prompts: int, images: int, redraw: float, shift: float, sims: int) -> tuple[np.ndarray, np.ndarray]:
    paired, independent = np.empty(sims), np.empty(sims)
    for s in range(sims):
        p = rng.beta(2.0, 2.0, prompts)[:, None]
        u = rng.random((prompts, images))
        a = u < p
        fresh = rng.random((prompts, images)) < redraw
        b = np.where(fresh, rng.random((prompts, images)) < np.clip(p - shift, 0, 1), u < np.clip(p - shift, 0, 1)) \
            if shift else np.where(fresh, rng.random((prompts, images)) < p, a)
        sa, sb = a.mean(axis=1), b.mean(axis=1)
        for units, out in ((True, paired), (False, independent)):
            c = compare_gates([_row(1, sa, units)], [_row(2, sb, units)])[0]
            out[s] = 1.0 if c.p_value is None else c.p_value
    return paired, independent


def _rate(p: np.ndarray, level: float) -> str:
    k, n = int((p <= level).sum()), p.size
    low = stats.beta.ppf(0.025, k, n - k + 1) if k else 0.0
    high = stats.beta.ppf(0.975, k + 1, n - k) if k < n else 1.0
    return f"{k / n:.4f} ({low:.4f}-{high:.4f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", type=int, default=4000)
    ap.add_argument("--images", type=int, default=6)
    ap.add_argument("--redraw", type=float, default=0.3)
    ap.add_argument("--shift", type=float, default=0.03)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    levels = (0.05, 0.05 / 24)
    print(f"{args.sims} pairs each; {args.images} images a prompt; {args.redraw:.0%} of images redrawn in run B")
    print("| prompts | truth | interval | " + " | ".join(f"rejects at {a:.4g}" for a in levels) + " |")
    print("|---|---|---|" + "---|" * len(levels))
    for prompts in (16, 60):
        for truth, shift in (("null", 0.0), (f"shift -{args.shift}", args.shift)):
            paired, independent = _p_values(rng, prompts, args.images, args.redraw, shift, args.sims)
            for name, p in (("paired", paired), ("independent", independent)):
                print(f"| {prompts} | {truth} | {name} | " + " | ".join(_rate(p, a) for a in levels) + " |")


if __name__ == "__main__":
    main()
