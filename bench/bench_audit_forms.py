"""The audited rate floor and word-level representation gate at a run's per-gate level: false alarms and power.

Each run builds the gate's judgements as the product does (``audit.JudgedShare``, form ``worst`` or ``distance``),
draws the audit's sample with ``audit.draw_sample`` (one unit per prompt), answers it from the simulated truth and
decides on ``audit.audited``'s evidence with the product's ``metrics.decisions.fails`` (its one-sided limit at the level
beyond the bound: what its p-value <= level means). Null: the bound at the truth (the model meets it exactly, the hardest null);
power: the truth 0.10 beyond the bound (the kind's meaningful miss, ``gating.power.MEANINGFUL_MISS``).

* **Rate floor** (``worst``): 8 components, each named by ``P`` prompts (16, 64 or 200), 4 images each; a prompt's
  true rate drawn from a prompt law (Beta sd 0.2 about 0.7, bimodal 10% at 0.2 / 90% at 0.8, heavy-tailed
  ``logit = 1 + t_2``, rare outliers: 5% of prompts at 0.05); the scorer misses 30% of one component's true yes and
  5% elsewhere, with 3% false yes. Power: one component's prompts all 0.10 lower.
* **Representation** (``distance``): one prompt text, ``N`` images (16, 64, 200), the group's true share 0.5 + 0.15;
  the scorer misses 20% of the group's images. Power: the gap 0.10 beyond the bound.

    python bench/bench_audit_forms.py [--runs 100] [--level 3.49e-5]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from t2i_fairness.audit import JudgedShare, JudgedUnit, audited, draw_sample
from t2i_fairness.audit.labels import Label, Labels
from t2i_fairness.metrics.decisions import fails

LAWS = {
    "beta": lambda rng, n: rng.beta(0.7 * 3.5, 0.3 * 3.5, n),
    "bimodal": lambda rng, n: np.where(rng.random(n) < 0.1, 0.2, 0.8),
    "heavy": lambda rng, n: 1 / (1 + np.exp(-np.clip(1 + rng.standard_t(2, n), -50, 50))),
    "outliers": lambda rng, n: np.where(rng.random(n) < 0.05, 0.05, 0.75),
}
LAW_MEAN = {"beta": 0.7, "bimodal": 0.74, "outliers": 0.05 * 0.05 + 0.95 * 0.75}


def law_mean(law: str) -> float:
    if law == "heavy":  # E[expit(1 + t_2)] by a large fixed draw
        t = np.random.default_rng(99).standard_t(2, 2_000_000)
        return float(np.mean(1 / (1 + np.exp(-np.clip(1 + t, -50, 50)))))
    return LAW_MEAN[law]


def _labels(drawn, truth: dict, path: str = "sim") -> Labels:
    rows = {(d.gate, d.unit.unit): Label(d.gate, d.unit.unit, d.unit.question, int(truth[d.unit.unit]), i)
            for i, d in enumerate(drawn)}
    return Labels(path, 0, rows)


def floor_run(rng, law: str, prompts: int, shift: float) -> tuple[JudgedShare, dict]:
    units, truth, cluster = [], {}, 0
    for c in range(8):
        rates = np.clip(LAWS[law](rng, prompts) - (shift if c == 0 else 0.0), 0, 1)
        for j, p in enumerate(rates):
            for i in range(4):
                y = rng.random() < p
                miss = 0.3 if c == 1 else 0.05
                f = (rng.random() >= miss) if y else (rng.random() < 0.03)
                uid = f"c{c}-{j}-{i}"
                truth[uid] = y
                units.append(JudgedUnit(uid, "", f"p{c}-{j}", f"c{c}?", "", int(f), f"c{c}", cluster))
            cluster += 1
    return JudgedShare("sim", tuple(units), form="worst"), truth


def distance_run(rng, n: int, gap: float) -> tuple[JudgedShare, dict]:
    units, truth = [], {}
    for i in range(n):
        y = rng.random() < 0.5 + gap
        f = (rng.random() >= 0.2) if y else (rng.random() < 0.03)
        truth[f"i{i}"] = y
        units.append(JudgedUnit(f"i{i}", "", "t", "g?", "", int(f), "t", i))
    return JudgedShare("sim", tuple(units), form="distance", weights=(("t", 1.0),), centre=0.5), truth


def audited_fails(share: JudgedShare, truth: dict, bound: float, direction: str, level: float, seed: int) -> bool:
    """The audited gate's verdict at ``level`` (the product's ``decisions.fails`` on the audited evidence's limit)."""
    drawn = draw_sample({"g": share}, 10_000, seed)
    ev = audited("g", share, _labels(drawn, truth)).evidence
    return bool(fails(ev.estimate, bound, direction, limit=ev.limit(level, "high" if direction == "min" else "low")))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--level", type=float, default=3.49e-5, help="the per-gate level (default the paper preset's)")
    a = ap.parse_args(argv)
    start = time.perf_counter()
    print(f"# audited gates at level {a.level:g}, {a.runs} runs a cell; failures (null: false alarms; miss: power)")
    print(f"{'gate':15} {'law':9} {'units':>5} {'null':>9} {'miss 0.10':>9}")
    for law in LAWS:
        floor = law_mean(law)
        for prompts in (16, 64, 200):
            rng = np.random.default_rng([len(law), prompts])
            null = sum(audited_fails(*floor_run(rng, law, prompts, 0.0), floor, "min", a.level, r) for r in range(a.runs))
            miss = sum(audited_fails(*floor_run(rng, law, prompts, 0.10), floor, "min", a.level, r) for r in range(a.runs))
            print(f"{'rate floor':15} {law:9} {prompts:>5} {null:>5}/{a.runs} {miss:>5}/{a.runs}", flush=True)
    for n in (16, 64, 200):
        rng = np.random.default_rng([7, n])
        null = sum(audited_fails(*distance_run(rng, n, 0.15), 0.15, "max", a.level, r) for r in range(a.runs))
        miss = sum(audited_fails(*distance_run(rng, n, 0.25), 0.15, "max", a.level, r) for r in range(a.runs))
        print(f"{'representation':15} {'-':9} {n:>5} {null:>5}/{a.runs} {miss:>5}/{a.runs}", flush=True)
    print(f"# {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
