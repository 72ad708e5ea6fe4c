"""Calibration of the gate's decisions: false alarms under a null change, interval coverage, canary power.

Runs a reduced suite on the procedural smoke world (``--t2i-model procedural``: a seeded simulator of
the synthetic reference's world whose values move with the seed, unlike the tiny diffusion model's),
through pytest itself, one subprocess per run, and reads each run's ``run.json``:

1. **Bounds**: one run at a reference seed with ``--t2i-update-thresholds`` (bounds from the
   measurement's uncertainty, ``--t2i-bound-level``) into a fresh thresholds file.
2. **Null re-runs**: the same model at ``--nulls`` other seeds against those bounds. A gate that fails
   is a false alarm; the family-wise false-alarm rate is the share of runs with any failed gate
   (Holm across the run's gates keeps it at most ``alpha``), the per-gate rate is failures / runs.
3. **Interval coverage**: for every gate, the truth is the expected value at the run's sample size,
   estimated by the mean of the other null runs' estimates (leave-one-out, so the check is slightly
   conservative: the truth carries its own noise); coverage is the share of runs whose interval holds
   it, pooled per paper family.
4. **Canaries** (``t2i_fairness.canaries``): ``--canary-runs`` runs per canary at fresh seeds against
   the same bounds; detection = a gate of the canary's slice failed; false alarm = a gate of another
   slice failed (pooled gates, such as the worst region, are counted apart).
5. **Simulated scores** for what the tiny random-weight scorers cannot see (a dropped CIS component: a
   random CLIP cannot tell which components an image shows): per-image CIS scores drawn from a
   binomial model, null and with one component dropped, fed through the very interval and decision
   code the gate uses (:func:`t2i_fairness.families.cis.study.cis_interval`, :func:`t2i_fairness.gating.gate.judge`).

Prints one table (and ``--json`` writes the numbers). ``--quick`` uses fewer runs for a smoke check of
the script itself; the README's table comes from a full run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "plugin"))

SELECTION = (
    "(test_region_precision or test_region_coverage or test_worst_region or test_region_disparity) and object_in_region"
    " or test_object_consistency and object_in_region"
    " or test_cis and not test_cis_order"
    " or (test_lgc or test_scwl or test_dwl or test_scal_with_english or test_clgc) and (eng_latn or hin_deva or tam_taml)"
)
BASE_ARGS = ["--t2i-model", "procedural", "--t2i-objects", "bag,car,stove", "--t2i-cis-k", "1,2,4",
             "--t2i-cis-prompts", "8", "--t2i-languages", "hin_Deva,tam_Taml", "--t2i-no-progress", "-p", "no:cacheprovider",
             "-p", "no:randomly", "-q", "-W", "ignore::UserWarning"]
CANARIES = ("collapse_region:africa", "degrade_region:africa:0.6", "answer_language:hin_Deva",
            "drop_component:macaw")
FAMILY_OF = {"region": "dig_in", "worst": "dig_in", "object_consistency": "dig_in", "cis": "cis", "lgc": "indic_tti",
             "scwl": "indic_tti", "dwl": "indic_tti", "scal": "indic_tti", "clgc": "indic_tti"}


def family(gate: str) -> str:
    name = gate.split("[", 1)[0].removeprefix("test_")
    for prefix, fam in FAMILY_OF.items():
        if name.startswith(prefix):
            return fam
    return "other"


def run(work: Path, seed: int, *extra: str, thresholds: Path, label: str) -> dict:
    artifacts = work / f"art-{label}"
    cmd = [sys.executable, "-m", "pytest", str(REPO / "fairness_tests"), "-k", SELECTION, *BASE_ARGS,
           "--t2i-seed", str(seed), "--t2i-thresholds", str(thresholds), "--t2i-cache-dir", str(work / "cache"),
           "--t2i-artifacts", str(artifacts), *extra]
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    env.pop("PYTEST_ADDOPTS", None)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=3600)
    data = json.loads((artifacts / "run.json").read_text())
    data["records"] = data["gates"]
    data["seconds"] = time.perf_counter() - t0
    data["returncode"] = proc.returncode
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"run {label} ended with {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return data


def failed(record: dict) -> bool:
    return record["status"] in ("fail", "missing", "refused") or (record["status"] == "inconclusive" and record.get("blocking"))


def coverage_table(nulls: list[dict]) -> dict[str, tuple[int, int]]:
    """family -> (intervals holding the leave-one-out mean, intervals checked)."""
    by_gate: dict[str, list[tuple[float, list]]] = defaultdict(list)
    for run_ in nulls:
        for r in run_["records"]:
            if r.get("interval") and r["status"] in ("pass", "fail", "inconclusive"):
                by_gate[r["gate"]].append((float(r["value"]), r["interval"]))
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for gate, rows in by_gate.items():
        if len(rows) < 3:
            continue
        values = np.array([v for v, _ in rows])
        for i, (_, (lo, hi)) in enumerate(rows):
            truth = float(np.delete(values, i).mean())
            out[family(gate)][0] += int(lo - 1e-12 <= truth <= hi + 1e-12)
            out[family(gate)][1] += 1
    return {k: tuple(v) for k, v in out.items()}


def simulated_drop_component(runs: int, seed: int = 0, prompts: int = 40, images: int = 4) -> dict:
    """CIS_K gates on simulated per-image scores: null vs one component dropped from every K-prompt naming it.

    Each image of a K-component prompt shows each requested component with probability q (0.8); the
    dropped component never shows. Gates are decided by the suite's own code (cis_interval + judge).
    """
    from t2i_fairness.families.cis.study import Scored, cis_interval
    from t2i_fairness.gating.gate import judge
    from t2i_fairness.gating.thresholds import Bound, ThresholdFile
    from t2i_fairness.gating.verdicts import Measurement, bound_for
    from t2i_fairness.spine.options import T2IOptions

    rng = np.random.default_rng(seed)
    k, q, share = 2, 0.8, 0.25  # share of prompts naming the dropped component

    def scores(drop: bool) -> Scored:
        s = rng.binomial(k, q, size=(prompts, images)).astype(float)
        if drop:
            named = rng.random(prompts) < share
            s[named] = rng.binomial(k - 1, q, size=(int(named.sum()), images))
        return Scored(k, [("x",) * k] * prompts, s / k, [], 0)

    options = T2IOptions()
    ref = scores(False)
    iv = cis_interval(ref)
    bound, _, _ = bound_for(Measurement("test_cis[k2]", ref.cis, ref.n_images, uncertainty=iv, interval=iv.as_tuple()),
                            "min", options.bound_level)
    thresholds = ThresholdFile(Path("sim.yaml"), {"test_cis[k2]": Bound("min", bound)})
    out = {}
    for label, drop in (("null", False), ("drop_component (simulated)", True)):
        fails = 0
        for _ in range(runs):
            r = scores(drop)
            civ = cis_interval(r)
            m = Measurement("test_cis[k2]", r.cis, r.n_images, interval=civ.as_tuple(), uncertainty=civ)
            record, _ = judge(m, thresholds, {}, options, family_size=10)
            fails += record.status == "fail"
        out[label] = (fails, runs)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="4 null runs and 2 runs per canary (checks the script)")
    ap.add_argument("--nulls", type=int, default=20)
    ap.add_argument("--canary-runs", type=int, default=10)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--json", default=None, help="write the numbers to this file")
    args = ap.parse_args(argv)
    nulls_n, canary_n = (4, 2) if args.quick else (args.nulls, args.canary_runs)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="t2i-calibration-"))
    work.mkdir(parents=True, exist_ok=True)
    thresholds = work / "thresholds.yaml"
    thresholds.unlink(missing_ok=True)
    print(f"work folder {work}; load average {os.getloadavg()[0]:.1f}; {os.cpu_count()} CPUs", flush=True)

    ref = run(work, 1000, "--t2i-update-thresholds", thresholds=thresholds, label="bounds")
    n_gates = sum(r["status"] == "written" for r in ref["records"])
    print(f"bounds: {n_gates} gates written at seed 1000 ({ref['seconds']:.0f} s)", flush=True)

    nulls = []
    for i in range(nulls_n):
        nulls.append(run(work, i, thresholds=thresholds, label=f"null{i}"))
        print(f"  null seed {i}: {sum(map(failed, nulls[-1]['records']))} failed, "
              f"{sum(r['status'] == 'inconclusive' for r in nulls[-1]['records'])} inconclusive "
              f"({nulls[-1]['seconds']:.0f} s)", flush=True)
    # a run raises an alarm when a gate fails, or the step-down across the run fails an inconclusive one
    runs_with_alarm = sum(any(map(failed, r["records"])) or bool(r["decisions"]["escalated"]) for r in nulls)
    gate_runs = sum(len(r["records"]) for r in nulls)
    gate_alarms = sum(sum(map(failed, r["records"])) for r in nulls)
    inconclusive = sum(sum(x["status"] == "inconclusive" for x in r["records"]) for r in nulls)

    from t2i_fairness.canaries import catch_report

    canaries = {}
    for spec in CANARIES:
        detected = alarms = 0
        shares = []
        for j in range(canary_n):
            data = run(work, 2000 + j, "--t2i-canary", spec, thresholds=thresholds, label=f"{spec.replace(':', '_')}{j}")
            _, counts = catch_report(spec, data["records"])
            detected += counts["slice_caught"] > 0
            alarms += counts["false_alarms"] > 0
            shares.append(counts["slice_caught"] / max(1, counts["slice_gates"]))
            print(f"  {spec} seed {2000 + j}: {counts['slice_caught']}/{counts['slice_gates']} slice gates failed, "
                  f"{counts['false_alarms']} false alarm(s) ({data['seconds']:.0f} s)", flush=True)
        canaries[spec] = {"detected": detected, "runs": canary_n, "false_alarm_runs": alarms,
                          "mean_share_of_slice_gates": statistics.mean(shares) if shares else 0.0}
    sim = {}  # the smoke suite's CIS size, and a tenth of the paper's (10,000 prompts per K, 16 images)
    for prompts, images in ((40, 4), (1000, 16)):
        for label, counts in simulated_drop_component(200 if not args.quick else 40, prompts=prompts,
                                                      images=images).items():
            sim[f"{label}, {prompts} prompts x {images} images"] = counts

    cov = coverage_table(nulls)
    print()
    print(f"== gate calibration: procedural world, {n_gates} gates, Holm at alpha 0.05, bound level 0.99 ==")
    print(f"null re-runs (seed changes): {nulls_n}")
    print(f"  family-wise false alarms: {runs_with_alarm}/{nulls_n} = {runs_with_alarm / nulls_n:.3f}")
    print(f"  per-gate false alarms: {gate_alarms}/{gate_runs} = {gate_alarms / max(1, gate_runs):.4f}; "
          f"inconclusive {inconclusive}/{gate_runs} = {inconclusive / max(1, gate_runs):.4f}")
    print("interval coverage (95% intervals, truth = leave-one-out mean of the null runs):")
    for fam, (hit, total) in sorted(cov.items()):
        print(f"  {fam:<10} {hit}/{total} = {hit / total:.3f}")
    print(f"canaries ({canary_n} runs each): detected = a gate of its slice failed; false alarm = a gate of another slice")
    for spec, c in canaries.items():
        print(f"  {spec:<28} detected {c['detected']}/{c['runs']} = {c['detected'] / c['runs']:.2f}; "
              f"false alarms {c['false_alarm_runs']}/{c['runs']}; slice gates failed per run {c['mean_share_of_slice_gates']:.2f}")
    print("simulated scores (what the random-weight tiny scorers cannot see):")
    for label, (f, n) in sim.items():
        print(f"  CIS_2 gate, {label:<52} failed {f}/{n} = {f / n:.3f}")
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; {time.strftime('%Y-%m-%d')}")
    if args.json:
        Path(args.json).write_text(json.dumps({"nulls": nulls_n, "fwer": runs_with_alarm / nulls_n,
                                               "per_gate": gate_alarms / max(1, gate_runs), "coverage": cov,
                                               "canaries": canaries, "simulated": sim}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
