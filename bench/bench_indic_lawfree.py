"""IndicTTI over a team's prompt file: size and power of its tests over prompts, law-free (the product's betting
tests, ``metrics.evidence.unit_mean`` / ``unit_ratio``) next to the t test they replace (the jackknife-t of a mean
over prompts and Fieller's ratio: the product's ``normal_tail`` on the prompts' values or contrasts, floored at
``2^-G``; ``tests/test_gate_sizes.py`` checks that Fieller's test is that t).

A study is one prompt file of ``G`` prompts. A prompt's score is ``0.3 + 0.05 u + 0.01 e`` (a cosine, CLGC-like;
``u`` the prompt effect from a law of mean 0 and sd 1, ``e`` its images' mean noise); the ratio's prompt has
``CLGC(eng) = 0.6 + 0.05 z + 0.01 e'`` and ``CLGC(l) = 0.8 CLGC(eng) + 0.05 u + 0.01 e''`` (its contrast at
``r = 0.8`` is ``0.05 u + ...``). The bound sits on the truth (0.3; 0.8). Prompt laws, skewed upward (the ``min``
gate's bad side: most prompts a little low, a few far high): ``normal``; ``gamma`` (shape 2); ``far10`` (10% of
prompts 3 sd away); ``lognormal``; ``outliers`` (1% of prompts 10 sd away).

Sizes are plain simulation (``--runs`` studies a row; with no failing run the upper 95% bound is Clopper-Pearson's
``3 / runs``). The betting test is called only for studies that pass a screen no betting test can beat: with bets
``0 <= lambda <= 1 / m`` a capital is at most ``prod max(1, y_i / m)`` (``y`` the values mirrored into [0, 1], ``m``
the bound there), so a study whose product stays below ``1 / (2 level)`` cannot fail; the screen is checked on the
screened-out studies nearest to passing it (the product's test must not fail any of them).

Run from the repository root::

    .venv/bin/python bench/bench_indic_lawfree.py               # 100,000 studies a row: a few minutes
    .venv/bin/python bench/bench_indic_lawfree.py --runs 1000000
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass

import numpy as np
from scipy import stats

from t2i_fairness.metrics.evidence import law_free_reach, unit_mean, unit_ratio
from t2i_fairness.metrics.intervals import normal_tail

LEVELS = {"smoke": 0.05 / 486, "paper": 0.05 / 1431}  # docs/calibration.md: 0.05 / m
SIZES = (16, 27, 60, 200)
POWER_SIZES = SIZES + (400, 1000)  # where a law-free test starts to see the meaningful miss
SKEWED = ("gamma", "far10", "lognormal", "outliers")
SCORE, SPREAD, NOISE = 0.3, 0.05, 0.01
DEN, RATIO = 0.6, 0.8
RANGE = (-1.0, 1.0)
CHUNK = 20_000
SCREEN_CHECK = 50  # screened-out studies nearest the screen, per row, run through the product's test


def prompt_effects(law: str, rng: np.random.Generator, size) -> np.ndarray:
    """Prompt effects of mean 0 and sd 1, skewed upward."""
    if law == "normal":
        return rng.standard_normal(size)
    if law == "gamma":
        return (rng.gamma(2.0, 1.0, size) - 2.0) / math.sqrt(2.0)
    if law == "lognormal":
        return (rng.lognormal(0.0, 1.0, size) - math.exp(0.5)) / math.sqrt((math.e - 1.0) * math.e)
    if law in ("far10", "outliers"):
        share, shift = (0.1, 3.0) if law == "far10" else (0.01, 10.0)
        x = rng.standard_normal(size) + shift * (rng.random(size) < share)
        return (x - share * shift) / math.sqrt(1.0 + shift**2 * share * (1.0 - share))
    raise ValueError(f"unknown prompt law {law!r}; choose normal, {', '.join(SKEWED)}")


@dataclass(frozen=True)
class Study:
    """``runs`` prompt files of ``g`` prompts: the score's values, or the ratio's pairs."""

    kind: str  # "score" or "ratio"
    num: np.ndarray  # (runs, g): the scores, or CLGC(l)
    den: np.ndarray | None  # (runs, g): CLGC(eng), for the ratio
    bound: float

    def units(self, i: int) -> tuple:
        return (self.num[i],) if self.den is None else (self.num[i], self.den[i])

    @property
    def contrasts(self) -> np.ndarray:
        return self.num if self.den is None else self.num - self.bound * self.den


def draw(kind: str, law: str, g: int, runs: int, rng, miss: float = 0.0) -> Study:
    """``runs`` studies whose truth misses the bound by ``miss`` (in the gate's own units)."""
    effects = SPREAD * prompt_effects(law, rng, (runs, g)) + NOISE * rng.standard_normal((runs, g))
    if kind == "score":
        return Study(kind, np.clip(SCORE - miss + effects, *RANGE), None, SCORE)
    den = np.clip(DEN + SPREAD * rng.standard_normal((runs, g)) + NOISE * rng.standard_normal((runs, g)), *RANGE)
    return Study(kind, np.clip((RATIO - miss) * den + effects, *RANGE), den, RATIO)


def t_fails(study: Study, level: float) -> np.ndarray:
    """Today's rule over the runs: the t test of the prompts' values (contrasts) at ``level``, no p below 2^-G."""
    c = study.contrasts
    g = c.shape[1]
    mean, sd = c.mean(axis=1), c.std(axis=1, ddof=1)
    zero = 0.0 if study.den is not None else study.bound
    p = normal_tail(mean, sd / math.sqrt(g), zero, "min", g - 1, p_floor=0.5**g)
    return (mean < zero) & (p <= level)


def product_fails(study: Study, i: int, level: float) -> bool:
    """The product's law-free gate on study ``i``."""
    if study.den is None:
        return unit_mean(study.num[i], RANGE, limits=False).fails(study.bound, "min", level)
    return unit_ratio(study.num[i], study.den[i], RANGE, RANGE, limits=False).fails(study.bound, "min", level)


def screen(study: Study) -> np.ndarray:
    """``log prod max(1, y / m)`` per run: no betting capital on the mirrored values exceeds its exponential."""
    if study.den is None:
        lo, hi, c, b = RANGE[0], RANGE[1], study.num, study.bound
    else:
        lo, hi, c, b = -1.0 - study.bound, 1.0 + study.bound, study.contrasts, 0.0
    y, m = (hi - c) / (hi - lo), (hi - b) / (hi - lo)
    return np.log(np.maximum(1.0, y / m)).sum(axis=1)


@dataclass
class Count:
    hits: int = 0
    runs: int = 0
    called: int = 0  # product calls (screen passed or checked)

    @property
    def value(self) -> float:
        return self.hits / self.runs if self.runs else math.nan

    @property
    def upper(self) -> float:
        """Clopper-Pearson's one-sided upper 95% bound."""
        return float(stats.beta.ppf(0.95, self.hits + 1, self.runs - self.hits)) if self.hits < self.runs else 1.0


def sizes(kind: str, law: str, g: int, runs: int, rng) -> dict:
    """Per level: the t's and the law-free test's false alarms over ``runs`` studies on the bound."""
    out = {(name, test): Count() for name in LEVELS for test in ("t", "betting")}
    done = 0
    while done < runs:
        n = min(CHUNK, runs - done)
        study = draw(kind, law, g, n, rng)
        s = screen(study)
        for name, level in LEVELS.items():
            t, b = out[(name, "t")], out[(name, "betting")]
            t.hits += int(t_fails(study, level).sum())
            t.runs += n
            need = math.log(1.0 / level) - math.log(2.0)
            cand = np.flatnonzero(s >= need)
            near = np.argsort(np.where(s >= need, -np.inf, s))[-SCREEN_CHECK:]
            for i in near:  # the screen is a bound: the product must not fail a study it screens out
                if product_fails(study, int(i), level):
                    raise AssertionError(f"the screen missed a failing study ({kind}, {law}, G={g}, {name})")
            b.hits += sum(product_fails(study, int(i), level) for i in cand)
            b.runs += n
            b.called += cand.size + near.size
        done += n
    return out


def power(kind: str, g: int, miss: float, level: float, runs: int, rng) -> tuple[float, float, float]:
    """Against ``miss`` under the normal law: the t's measured power, the law-free test's measured power and the
    power its report states (``Interval.power``, averaged over the runs' own statements)."""
    study = draw(kind, "normal", g, runs, rng, miss)
    t = float(t_fails(study, level).mean())
    fails, stated = [], []
    for i in range(runs):
        if study.den is None:
            ev = unit_mean(study.num[i], RANGE, limits=False)
        else:
            ev = unit_ratio(study.num[i], study.den[i], RANGE, RANGE, limits=False)
        fails.append(ev.fails(study.bound, "min", level))
        stated.append(ev.power(study.bound, "min", miss, level))
    return t, float(np.mean(fails)), float(np.mean(stated))


def size_table(runs: int, rng) -> list[str]:
    lines = [f"{'kind':6} {'G':>4} {'law':10} {'preset':6} {'level':>9}   {'t size':>9} {'x lvl':>6}   "
             f"{'betting':>8} {'up95':>9} {'x lvl':>5}  runs (product calls)", "-" * 104]
    for kind in ("score", "ratio"):
        for g in SIZES:
            for law in ("normal",) + SKEWED:
                out = sizes(kind, law, g, runs, rng)
                for name, level in LEVELS.items():
                    t, b = out[(name, "t")], out[(name, "betting")]
                    lines.append(f"{kind:6} {g:>4} {law:10} {name:6} {level:9.3g}   {t.value:9.2e} "
                                 f"{t.value / level:6.1f}   {b.value:8.1e} {b.upper:9.2e} {b.upper / level:5.2f}  "
                                 f"{b.runs:,} ({b.called:,})")
    return lines


def power_table(runs: int, rng) -> list[str]:
    lines = [f"{'kind':6} {'G':>4} {'preset':6} {'miss':>5}   {'t':>6} {'betting':>8} {'stated':>7} "
             f"{'reach':>7}", "-" * 60]
    for kind, misses in (("score", (0.05,)), ("ratio", (0.10, 0.05))):
        for g in POWER_SIZES:
            for name, level in LEVELS.items():
                for miss in misses:
                    t, b, st = power(kind, g, miss, level, runs, rng)
                    # the nearest miss any law-free test can fail with every prompt at the mean (gate units)
                    edge = 1.0 - SCORE if kind == "score" else (1.0 + RATIO) / DEN
                    reach = law_free_reach(edge, g, level)
                    lines.append(f"{kind:6} {g:>4} {name:6} {miss:5.2f}   {t:6.3f} {b:8.3f} {st:7.3f} {reach:7.3f}")
    return lines


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100_000, help="studies per size row (default 100,000)")
    ap.add_argument("--power-runs", type=int, default=200, help="studies per power row (default 200)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    start = time.time()
    print(f"size on the bound, {args.runs:,} studies a row (t: the jackknife-t / Fieller rule; betting: the product's"
          f" law-free test)")
    print("\n".join(size_table(args.runs, rng)))
    print(f"\npower under normal prompt effects (sd {SPREAD}, image noise {NOISE}), {args.power_runs} studies a row; "
          "reach: law_free_reach")
    print("\n".join(power_table(args.power_runs, rng)))
    print(f"\n({time.time() - start:.0f} s)")


if __name__ == "__main__":
    main()
