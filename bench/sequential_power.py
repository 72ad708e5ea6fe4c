"""The power curve of ``--t2i-sequential`` against fixed N, side by side, for ``bench/bench_sequential.py --power-curve``.

A CIS_K gate at the paper preset's size (``M`` = 10,000 prompts x 16 images, level ``0.05 / 1,435``), run through
the product's own ``gating.sequential.loop.Rounds`` over the product's looks (``families.cis.study.cis_looks``) and
judged by ``gating.gate.decide`` (the gate fixture's decision), against the same data judged at ``N``. Each prompt's
inclusion rate ``r_p`` is drawn from a prompt law with the population mean ``bound - miss``:

* ``logit-t2``: ``logit r = c + t_2`` (heavy tails on the logit scale; ``c`` solved for the mean by quadrature);
* ``beta-0.3``: Beta with standard deviation 0.3;
* ``bimodal``: 10% of the prompts at ``mu - 0.36``, 90% at ``mu + 0.04`` (two modes 0.4 apart).

An image of a K-component prompt shows each component with probability ``r_p``, independently (its score: the
share shown). ``miss`` runs over 0 (on the bound: the false alarms) and 0.01 .. 0.10; ``null`` is a model at the
world's mean against the bound the update flow writes from a reference run at another seed (the images a model
that did not regress needs). Every figure: runs failed (or images used) of the runs at that row.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
from scipy import integrate, optimize, special, stats

from sequential_worlds import CIS_MEANS, CIS_N, SimCis  # noqa: E402  (bench/ on sys.path: bench_sequential.py)

LAWS = ("logit-t2", "beta-0.3", "bimodal")
MISSES = (0.0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.09, 0.10)


def _logit_shift(mean: float) -> float:
    """``c`` with ``E[expit(c + T)] = mean``, ``T ~ t_2`` (quadrature)."""
    def gap(c: float) -> float:
        value, _ = integrate.quad(lambda t: special.expit(c + t) * stats.t.pdf(t, 2), -np.inf, np.inf, limit=200)
        return value - mean

    return float(optimize.brentq(gap, -30.0, 30.0, xtol=1e-10))


def prompt_rates(law: str, mean: float, m: int, rng: np.random.Generator) -> np.ndarray:
    """``m`` prompts' inclusion rates from ``law`` with population mean ``mean`` (module docstring)."""
    if law == "logit-t2":
        return special.expit(_logit_shift(mean) + rng.standard_t(2, m))
    if law == "beta-0.3":
        v = 0.3 ** 2
        k = mean * (1.0 - mean) / v - 1.0
        if k <= 0:
            raise ValueError(f"no Beta law with mean {mean} and sd 0.3")
        return rng.beta(mean * k, (1.0 - mean) * k, m)
    if law == "bimodal":
        lo, hi = mean - 0.36, mean + 0.04
        if lo < 0 or hi > 1:
            raise ValueError(f"no bimodal law with mean {mean}")
        return np.where(rng.random(m) < 0.1, lo, hi)
    raise ValueError(f"unknown prompt law {law!r}; one of {LAWS}")


def cis_scores(rates: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Per-image CIS scores ``(prompts, 16)``: the share of a prompt's ``k`` components an image shows."""
    return rng.binomial(k, rates[:, None], size=(rates.size, CIS_N)) / k


@dataclass
class Row:
    kind: str
    law: str
    miss: float | str
    runs: int = 0
    fixed: int = 0
    seq: int = 0
    seq_early: int = 0
    images: float = 0.0  # the sequential run's share of the fixed-N images, summed over runs
    reasons: dict | None = None


def decide_both(scores: np.ndarray, k: int, bound: float, looks: list[int], judge, sequential, fixed_of, log_of):
    """One run decided at N and sequentially: ``(fixed failed, sequential failed, its look, reason)``."""
    from pathlib import Path

    from bench_sequential import Gate
    from t2i_fairness.gating.thresholds import Bound, ThresholdFile

    gate = Gate(f"test_cis[k{k}]", "cis", "cis", (("k", k),))
    thresholds = ThresholdFile(Path("bench_power.yaml"), {gate.id: Bound("min", bound)})
    study = SimCis(SimpleNamespace(scores={k: scores}), scores.shape[0])
    at_n = fixed_of(study, [gate])[gate.id]
    f = judge(at_n, gate, thresholds)
    ind = sequential(study, lambda s, n: s.at_prompts(n), looks, "prompts", [gate], thresholds, log_of())[gate.id]
    s = judge(ind, gate, thresholds)
    look = ind.sequential
    at = look.at if look is not None and look.early else scores.shape[0]
    reason = "N" if look is None or not look.early else str(look.reason).split(": ")[-1]
    return f is not None and f.status == "fail", s is not None and s.status == "fail", at, reason


def power_curve(kinds=(1, 8), laws=LAWS, misses=MISSES, runs: int = 10, prompts: int = 10_000, seed: int = 0,
                null: bool = True, log=print) -> list[Row]:
    """Every (kind, law, miss) row: ``runs`` runs decided both ways (:func:`decide_both`)."""
    from bench_sequential import Gate, Log, fixed, judge_indicator, sequential, written_bounds
    from t2i_fairness.families.cis.study import cis_looks

    looks = cis_looks(prompts, first=max(1, prompts // 16))
    rows = []
    for k in kinds:
        mu = CIS_MEANS[k]
        for li, law in enumerate(laws):
            cases = [(m, mu, mu - m) for m in misses]
            if null:  # the bound the update flow writes from a reference run of a model at mu, another seed
                ref = np.random.default_rng([seed, 7, k, li])
                study = SimCis(SimpleNamespace(scores={k: cis_scores(prompt_rates(law, mu, prompts, ref), k, ref)}),
                               prompts)
                gate = Gate(f"test_cis[k{k}]", "cis", "cis", (("k", k),))
                cases.append(("null", written_bounds(fixed(study, [gate]), [gate])[gate.id].value, mu))
            for miss, bound, truth in cases:
                row = Row(f"CIS_{k}", law, miss, reasons={})
                t0 = time.perf_counter()
                for i in range(runs):
                    rng = np.random.default_rng([seed, k, li, int(round(1000 * miss)) if miss != "null" else 999, i])
                    scores = cis_scores(prompt_rates(law, truth, prompts, rng), k, rng)
                    f, s, at, reason = decide_both(scores, k, bound, looks, judge_indicator, sequential, fixed, Log)
                    row.runs += 1
                    row.fixed += f
                    row.seq += s
                    row.seq_early += s and at < prompts
                    row.images += at / prompts
                    row.reasons[reason] = row.reasons.get(reason, 0) + 1
                rows.append(row)
                log(f"# CIS_{k} {law} miss {miss}: {runs} runs, {time.perf_counter() - t0:.0f} s")
    return rows


def _cp(h: int, n: int) -> str:
    lo = 0.0 if h == 0 else float(stats.beta.ppf(0.025, h, n - h + 1))
    hi = 1.0 if h == n else float(stats.beta.ppf(0.975, h + 1, n - h))
    return f"{h}/{n} [{lo:.2f}, {hi:.2f}]"


def curve_table(rows: list[Row]) -> list[str]:
    """Per kind and miss: fixed N and sequential failures over the laws together and per law, the largest gap."""
    out = ["| gate | miss | runs | failed, fixed N | failed, sequential | gap (points) | per law, fixed / sequential "
           "| images, sequential / fixed N | how the sequential runs stopped |",
           "|---|---|---|---|---|---|---|---|---|"]
    for kind in dict.fromkeys(r.kind for r in rows):
        for miss in dict.fromkeys(r.miss for r in rows if r.kind == kind):
            group = [r for r in rows if r.kind == kind and r.miss == miss]
            n = sum(r.runs for r in group)
            f, s = sum(r.fixed for r in group), sum(r.seq for r in group)
            per = "; ".join(f"{r.law} {r.fixed}/{r.seq}" for r in group)
            reasons: dict = {}
            for r in group:
                for key, v in r.reasons.items():
                    reasons[key] = reasons.get(key, 0) + v
            how = ", ".join(f"{key} {v}" for key, v in sorted(reasons.items()))
            label = "null (written bound)" if miss == "null" else f"{miss:.2f}"
            out.append(f"| {kind} | {label} | {n} | {_cp(f, n)} | {_cp(s, n)} | {100 * (f - s) / n:+.1f} | {per} | "
                       f"{sum(r.images for r in group) / n:.1%} | {how} |")
    return out


def curve_goals(rows: list[Row]) -> list[str]:
    """The issue's test: at every miss from 0.01 to 0.10 the sequential run fails within 5 points as often as fixed
    N (per kind, over the laws), and on the bound it fails no more often than fixed N."""
    lines = []
    for kind in dict.fromkeys(r.kind for r in rows):
        gaps = []
        for miss in sorted({r.miss for r in rows if r.kind == kind and r.miss not in ("null", 0.0)}):
            group = [r for r in rows if r.kind == kind and r.miss == miss]
            n = sum(r.runs for r in group)
            gaps.append((100 * (sum(r.fixed for r in group) - sum(r.seq for r in group)) / n, miss))
        worst = max(gaps) if gaps else (0.0, None)
        at0 = [r for r in rows if r.kind == kind and r.miss == 0.0]
        alarms = sum(r.seq for r in at0), sum(r.runs for r in at0)
        lines.append(f"{kind}: sequential within 5 points of fixed N at every miss 0.01-0.10: "
                     f"{'met' if worst[0] <= 5.0 else 'MISSED'} (largest loss {worst[0]:+.1f} points at "
                     f"{worst[1]}); on the bound, sequential fails {alarms[0]} of {alarms[1]} runs")
    return lines


def null_images(rows: list[Row], kind: str) -> float:
    """The null model's mean images, sequential over fixed N, over the laws (``nan`` without a null row)."""
    group = [r for r in rows if r.kind == kind and r.miss == "null"]
    n = sum(r.runs for r in group)
    return sum(r.images for r in group) / n if n else math.nan
