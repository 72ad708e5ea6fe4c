"""Underpowered passes at N on the paper preset's simulated gate mix, decided by a checkout's own product.

``python tools/underpowered_at.py [CHECKOUT] [--runs 2] [--sd 0.3] [--cis-prompts 10000]`` imports CHECKOUT's
(default: this repository) ``bench/bench_sequential.py`` and ``t2i_fairness``, draws its null scenario's runs
(bounds written by the update flow from a reference run at another seed), decides every simulated gate at N with
that checkout's rule, and counts the passes and inconclusives whose power against their kind's meaningful miss is
under 50% (``report.power.underpowered``: what ``t2i-fairness plan`` lists from a run). Run it on two checkouts to
compare commits (docs/sequential-bench.md: 231417e against main). A checkout whose bench decides to a
``(status, p)`` pair (before 2026-11-29) has its power computed by its own ``gating.power.power_record``.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkout", nargs="?", default=str(Path(__file__).resolve().parents[1]))
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--sd", type=float, default=0.3, help="between-prompt sd of CIS's prompt rates")
    ap.add_argument("--cis-prompts", type=int, default=None, help="CIS prompts per K (default the bench's 10,000)")
    ap.add_argument("--dig-objects", type=int, default=None, help="DIG In objects (default the bench's 9)")
    a = ap.parse_args(argv)
    repo = Path(a.checkout).resolve()
    sys.path[:0] = [str(repo / "plugin"), str(repo / "bench")]
    import numpy as np

    import bench_sequential as bs
    from t2i_fairness.gating.thresholds import ThresholdFile
    from t2i_fairness.report.power import underpowered

    size, seed = bs.FULL, 0
    if a.cis_prompts or a.dig_objects:
        m = a.cis_prompts or size.cis_prompts
        size = bs.Size(m, size.components, max(1, round(m * size.order_prompts / size.cis_prompts)),
                       a.dig_objects or size.dig_objects)
    dworld = bs.DigWorld(size.dig_objects, seed)
    cg, dg = bs.cis_gates(), bs.dig_gates(size.dig_objects)
    cworld = bs.CisWorld(size.cis_prompts, size.components, a.sd, size.order_prompts, seed)
    ref = np.random.default_rng([seed, 1000, 0])
    cref, dref = bs.SimCis(bs.cis_run(cworld, ref), size.cis_prompts), bs.SimDig(bs.dig_run(dworld, ref), bs.DIG_N)
    thresholds = ThresholdFile(Path("bench_sequential.yaml"), {**bs.written_bounds(bs.fixed(cref, cg), cg),
                                                               **bs.written_bounds(bs.fixed(dref, dg), dg)})

    def record(ind, gate):
        out = bs.judge_indicator(ind, gate, thresholds)
        if out is None or not isinstance(out, tuple):  # the product's GateRecord
            return None if out is None else {"gate": out.gate, "status": out.status, "power": out.power}
        from t2i_fairness.gating.power import power_record
        from t2i_fairness.gating.verdicts import evaluate

        m = bs.measure(gate.id, ind.value, n=ind.n, higher_is_better=ind.higher_is_better, interval=ind.evidence,
                       test=ind.test)
        v = evaluate(m, thresholds, {}, alpha=bs.ALPHA, family_size=bs.PAPER_GATES, multiplicity="holm")
        power = None if v.bound is None else power_record(m.uncertainty, v.bound.value, v.bound.direction,
                                                           v.threshold, ind.kind, m.n)
        return {"gate": gate.id, "status": v.status, "power": power}

    weak, total, start = collections.Counter(), 0, time.perf_counter()
    for i in range(a.runs):
        rng = np.random.default_rng([seed, 1, 0, i])
        cfull, dfull = bs.SimCis(bs.cis_run(cworld, rng), size.cis_prompts), bs.SimDig(bs.dig_run(dworld, rng), bs.DIG_N)
        at_n = {**bs.fixed(cfull, cg), **bs.fixed(dfull, dg)}
        records = [r for g in cg + dg if (r := record(at_n[g.id], g)) is not None]
        total = len(records)
        found = underpowered(records)
        weak.update(r["gate"].split("[")[0] for r in found)
        print(f"run {i}: {len(found)} of {total} simulated gates underpowered ({time.perf_counter() - start:.0f} s)",
              flush=True)
    print(f"# {repo}: {sum(weak.values()) / a.runs:.1f} of {total} per run (CIS {size.cis_prompts} prompts per K, "
          f"sd {a.sd}): " + ", ".join(f"{g} {c / a.runs:g}" for g, c in sorted(weak.items())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
