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
   it, pooled per paper family. Each interval is checked against the variation it claims: DIG In's
   prompts are fixed and their images re-drawn with the seed; CIS's prompts are drawn with the seed;
   IndicTTI's intervals resample prompts (a prompt's images move together), so every run draws its
   ``--indic-prompts`` prompt ids from a pool of ``--indic-pool`` (:func:`indic_pool`), as a benchmark
   draws its prompts from a population. With the smoke set's four fixed prompts the prompt-level
   interval would also hold the prompt-to-prompt variation a seed change never re-draws, and over-cover.
4. **Canaries** (``t2i_fairness.canaries``): ``--canary-runs`` runs per canary at fresh seeds against
   the same bounds; detection = a gate of the canary's slice failed; false alarm = a gate of another
   slice failed (pooled gates, such as the worst region, are counted apart).
5. **Simulated scores** for what the tiny random-weight scorers cannot see (a dropped CIS component: a
   random CLIP cannot tell which components an image shows): per-image CIS scores drawn from a
   binomial model, null and with one component dropped, fed through the very interval and decision
   code the gate uses (:func:`t2i_fairness.families.cis.study.cis_interval`, :func:`t2i_fairness.gating.gate.judge`).

Prints one table (and ``--json`` writes the numbers). ``--quick`` uses fewer runs for a smoke check of
the script itself; the table of docs/decisions.md comes from a full run.
"""

from __future__ import annotations

import argparse
import json
import math
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
BASE_ARGS = ["--t2i-model", "python:calibration_world:make", "--t2i-preset", "smoke", "--t2i-objects", "bag,car,stove", "--t2i-cis-k", "1,2,4",
             "--t2i-cis-prompts", "8", "--t2i-languages", "hin_Deva,tam_Taml", "--t2i-no-progress", "-p", "no:cacheprovider",
             "-p", "no:randomly", "-q", "-W", "ignore::UserWarning"]
CANARIES = ("collapse_region:africa", "degrade_region:africa:0.6", "answer_language:hin_Deva",
            "drop_component:macaw")
FAMILY_OF = {"region": "dig_in", "worst": "dig_in", "object_consistency": "dig_in", "cis": "cis", "lgc": "indic_tti",
             "scwl": "indic_tti", "dwl": "indic_tti", "scal": "indic_tti", "clgc": "indic_tti"}


WORLD_MODULE = """\
# Written by bench/bench_gate_calibration.py: the procedural world (as --t2i-model procedural), its
# non-English texts "understood" from the calibration's prompt pool instead of the bundled smoke sample.
from pathlib import Path

from t2i_fairness.generators.procedural import ProceduralGenerator
from t2i_fairness.vocab.multilingual import load_prompts
from t2i_fairness.metrics.decisions import GateLevel


def make():
    return ProceduralGenerator(64, 1, load_prompts(Path(__file__).with_name("indic-pool.jsonl")), 16)
"""
SUBJECTS = ("dog", "cat", "horse", "bicycle", "kettle", "umbrella", "child", "boat")
SETTINGS = ("on a wooden bench", "beside a river", "in a busy market", "under a tree", "on a kitchen table",
            "in the snow", "at the beach", "in front of a temple")


def indic_pool(size: int, languages=("eng_Latn", "hin_Deva", "tam_Taml")) -> list[dict]:
    """``size`` prompt ids (``size`` <= 64), each in every language of ``languages``.

    The English texts are "a {subject} {setting}"; the other languages' texts are the English text
    tagged with the language code: stand-ins, NOT translations (the procedural world reads no words:
    it draws a text either as its English text, with its language's probability, or as itself).
    """
    pairs = [(a, b) for b in SETTINGS for a in SUBJECTS][:size]
    rows = []
    for i, (subject, setting) in enumerate(pairs):
        english = f"a {subject} {setting}"
        for lang in languages:
            text = english if lang == "eng_Latn" else f"[{lang}] {english}"
            rows.append({"prompt_id": f"pool-{i:02d}", "lang": lang, "text": text, "english": english,
                         "reference_image": ""})
    return rows


def write_prompts(path: Path, rows: list[dict], ids=None) -> Path:
    keep = None if ids is None else set(ids)
    with path.open("w", encoding="utf-8") as f:
        f.write("# calibration stand-ins: NOT translations (see bench/bench_gate_calibration.py indic_pool)\n")
        for r in rows:
            if keep is None or r["prompt_id"] in keep:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return path


def family(gate: str) -> str:
    name = gate.split("[", 1)[0].removeprefix("test_")
    for prefix, fam in FAMILY_OF.items():
        if name.startswith(prefix):
            return fam
    return "other"


def run(work: Path, seed: int, *extra: str, thresholds: Path, label: str, pool: list[dict], indic_prompts: int = 4) -> dict:
    """One pytest run of the reduced suite at ``seed``; its IndicTTI prompts drawn from ``pool`` by the seed."""
    artifacts = work / f"art-{label}"
    ids = np.random.default_rng(seed).choice(sorted({r["prompt_id"] for r in pool}), size=indic_prompts, replace=False)
    prompts = write_prompts(work / f"indic-{label}.jsonl", pool, ids)
    cmd = [sys.executable, "-m", "pytest", str(REPO / "fairness_tests"), "-k", SELECTION, *BASE_ARGS,
           "--t2i-seed", str(seed), "--t2i-thresholds", str(thresholds), "--t2i-cache-dir", str(work / "cache"),
           "--t2i-artifacts", str(artifacts), "--t2i-indic-prompts", str(prompts), *extra]
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(work), os.environ.get("PYTHONPATH")])))
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


def pairwise_bounds(nulls: list[dict], level: float = 0.99, alpha: float = 0.05) -> dict:
    """"Bounds written at one seed, gated at another", over every ordered pair of null runs.

    The single bounds run of the benchmark is one draw: a run whose few prompts happened to agree
    writes tight bounds for every null run after it. Here each null run in turn writes the bounds
    (:func:`t2i_fairness.gating.verdicts.bound_for`, from its recorded value and interval) and every
    other null run is judged against them (:func:`t2i_fairness.gating.gate.judge`, Holm's first step
    over the run's gates): the share of checks meeting the bound estimates the pass probability the
    bound level promises (0.99) over the randomness of both runs; a ``fail`` is a false alarm.

    Returns ``{"met": {family: (met, checks)}, "failed": {family: (failed, checks)}, "pairs": n,
    "pairs_with_a_failure": k}``.
    """
    from t2i_fairness.gating.gate import judge, measure
    from t2i_fairness.gating.thresholds import Bound, ThresholdFile
    from t2i_fairness.gating.verdicts import bound_for
    from t2i_fairness.metrics.intervals import Interval
    from t2i_fairness.spine.options import T2IOptions

    options = T2IOptions(alpha=alpha, bound_level=level)

    def measurement(r: dict):
        if not r.get("uncertainty") or not math.isfinite(float(r["value"])):
            return None
        return measure(r["gate"], float(r["value"]), n=int(r["n"]), higher_is_better=r["direction"] == "min",
                       interval=Interval(**r["uncertainty"]))

    runs = [{r["gate"]: m for r in run_["records"] if (m := measurement(r)) is not None} for run_ in nulls]
    met: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    fail: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    pairs = pairs_failed = 0
    for i, writer in enumerate(runs):
        bounds = {}
        for gate, m in writer.items():
            bound, _, problem = bound_for(m, m.direction, level)
            if problem is None:
                bounds[gate] = Bound(m.direction, bound)
        thresholds = ThresholdFile(Path("pairwise.yaml"), bounds)
        for j, judged in enumerate(runs):
            if i == j:
                continue
            pairs += 1
            any_fail = False
            for gate, m in judged.items():
                if gate not in bounds:
                    continue
                fam = family(gate)
                b = bounds[gate].value
                met[fam][0] += m.value >= b if m.direction == "min" else m.value <= b
                met[fam][1] += 1
                record, _ = judge(m, thresholds, {}, options, level=GateLevel.of(options, len(judged)))
                fail[fam][0] += record.status == "fail"
                fail[fam][1] += 1
                any_fail |= record.status == "fail"
            pairs_failed += any_fail
    return {"met": {k: tuple(v) for k, v in met.items()}, "failed": {k: tuple(v) for k, v in fail.items()},
            "pairs": pairs, "pairs_with_a_failure": pairs_failed}


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
            record, _ = judge(m, thresholds, {}, options, level=GateLevel.of(options, 10))
            fails += record.status == "fail"
        out[label] = (fails, runs)
    return out


def simulated_table(runs: int) -> dict[str, tuple[int, int]]:
    """Every simulated row: drop_component on CIS_2 (the smoke size and a tenth of the paper's: 10,000
    prompts per K, 16 images) and the stand-ins of :mod:`simulated_canaries` (degrade_region, answer_language)."""
    sim = {}
    for prompts, images in ((40, 4), (1000, 16)):
        for label, counts in simulated_drop_component(runs, prompts=prompts, images=images).items():
            sim[f"CIS_2 gate, {label}, {prompts} prompts x {images} images: failed"] = counts
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from simulated_canaries import simulated_rows

    sim.update(simulated_rows(runs))
    return sim


def pipeline(work: Path, nulls_n: int, canary_n: int, pool_size: int) -> dict:
    """The pytest runs: bounds, null re-runs, canaries; their counts (printed as they come)."""
    thresholds = work / "thresholds.yaml"
    thresholds.unlink(missing_ok=True)
    pool = indic_pool(pool_size)
    write_prompts(work / "indic-pool.jsonl", pool)
    (work / "calibration_world.py").write_text(WORLD_MODULE)

    ref = run(work, 1000, "--t2i-update-thresholds", thresholds=thresholds, label="bounds", pool=pool)
    n_gates = sum(r["status"] == "written" for r in ref["records"])
    print(f"bounds: {n_gates} gates written at seed 1000 ({ref['seconds']:.0f} s)", flush=True)

    nulls = []
    for i in range(nulls_n):
        nulls.append(run(work, i, thresholds=thresholds, label=f"null{i}", pool=pool))
        print(f"  null seed {i}: {sum(map(failed, nulls[-1]['records']))} failed, "
              f"{sum(r['status'] == 'inconclusive' for r in nulls[-1]['records'])} inconclusive "
              f"({nulls[-1]['seconds']:.0f} s)", flush=True)
    met: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # family -> [null checks meeting the bound, checks]
    for r in nulls:
        for x in r["records"]:
            if x["status"] in ("pass", "fail", "inconclusive"):
                met[family(x["gate"])][0] += x["status"] == "pass"
                met[family(x["gate"])][1] += 1

    from t2i_fairness.canaries import catch_report

    canaries = {}
    for spec in CANARIES:
        detected = alarms = 0
        shares = []
        for j in range(canary_n):
            data = run(work, 2000 + j, "--t2i-canary", spec, thresholds=thresholds, label=f"{spec.replace(':', '_')}{j}",
                       pool=pool)
            _, counts = catch_report(spec, data["records"])
            detected += counts["slice_caught"] > 0
            alarms += counts["false_alarms"] > 0
            shares.append(counts["slice_caught"] / max(1, counts["slice_gates"]))
            print(f"  {spec} seed {2000 + j}: {counts['slice_caught']}/{counts['slice_gates']} slice gates failed, "
                  f"{counts['false_alarms']} false alarm(s) ({data['seconds']:.0f} s)", flush=True)
        canaries[spec] = {"detected": detected, "runs": canary_n, "false_alarm_runs": alarms,
                          "mean_share_of_slice_gates": statistics.mean(shares) if shares else 0.0}
    return {
        "gates": n_gates, "nulls": nulls_n,
        # a run raises an alarm when a gate fails, or the step-down across the run fails an inconclusive one
        "runs_with_alarm": sum(any(map(failed, r["records"])) or bool(r["decisions"]["escalated"]) for r in nulls),
        "gate_checks": sum(len(r["records"]) for r in nulls),
        "gate_alarms": sum(sum(map(failed, r["records"])) for r in nulls),
        "inconclusive": sum(sum(x["status"] == "inconclusive" for x in r["records"]) for r in nulls),
        "bound_met": {k: tuple(v) for k, v in met.items()},
        "coverage": coverage_table(nulls), "pairwise": pairwise_bounds(nulls), "canaries": canaries, "canary_runs": canary_n, "indic_pool": pool_size,
    }


def print_pipeline(p: dict) -> None:
    nulls_n, checks = p["nulls"], max(1, p["gate_checks"])
    print(f"== gate calibration: procedural world, {p['gates']} gates, Holm at alpha 0.05, bound level 0.99 ==")
    print(f"null re-runs (seed changes): {nulls_n}")
    print(f"  family-wise false alarms: {p['runs_with_alarm']}/{nulls_n} = {p['runs_with_alarm'] / nulls_n:.3f}")
    print(f"  per-gate false alarms: {p['gate_alarms']}/{p['gate_checks']} = {p['gate_alarms'] / checks:.4f}; "
          f"inconclusive {p['inconclusive']}/{p['gate_checks']} = {p['inconclusive'] / checks:.4f}")
    print("  null gate checks meeting the bounds run's bound (seed 1000; bound level 0.99):")
    for fam, (hit, total) in sorted(p["bound_met"].items()):
        print(f"    {fam:<10} {hit}/{total} = {hit / total:.3f}")
    pw = p["pairwise"]
    print(f"  bounds written from each null run, every other null run judged ({pw['pairs']} ordered pairs): "
          f"pairs with a failed gate {pw['pairs_with_a_failure']}/{pw['pairs']}")
    for fam, (hit, total) in sorted(pw["met"].items()):
        f, n = pw["failed"][fam]
        print(f"    {fam:<10} bound met {hit}/{total} = {hit / total:.3f}; failed {f}/{n} = {f / n:.4f}")
    print("interval coverage (95% intervals, truth = leave-one-out mean of the null runs; IndicTTI's "
          f"4 prompt ids drawn per run from a pool of {p['indic_pool']}):")
    for fam, (hit, total) in sorted(p["coverage"].items()):
        print(f"  {fam:<10} {hit}/{total} = {hit / total:.3f}")
    print(f"canaries ({p['canary_runs']} runs each): detected = a gate of its slice failed; "
          "false alarm = a gate of another slice")
    for spec, c in p["canaries"].items():
        print(f"  {spec:<28} detected {c['detected']}/{c['runs']} = {c['detected'] / max(1, c['runs']):.2f}; "
              f"false alarms {c['false_alarm_runs']}/{c['runs']}; slice gates failed per run {c['mean_share_of_slice_gates']:.2f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="4 null runs and 2 runs per canary (checks the script)")
    ap.add_argument("--nulls", type=int, default=20)
    ap.add_argument("--canary-runs", type=int, default=10)
    ap.add_argument("--simulated-runs", type=int, default=200)
    ap.add_argument("--indic-pool", type=int, default=64, help="IndicTTI prompt ids to draw each run's 4 from (<= 64)")
    ap.add_argument("--part", choices=("all", "pipeline", "simulated"), default="all",
                    help="pipeline: the pytest runs only; simulated: the simulated scores only (a few minutes)")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--json", default=None, help="write the numbers to this file")
    args = ap.parse_args(argv)
    if not 4 <= args.indic_pool <= len(SUBJECTS) * len(SETTINGS):
        ap.error(f"--indic-pool must be between 4 (the prompts of one run) and {len(SUBJECTS) * len(SETTINGS)}, "
                 f"got {args.indic_pool}")
    nulls_n, canary_n, sim_n = (4, 2, 20) if args.quick else (args.nulls, args.canary_runs, args.simulated_runs)
    out: dict = {}
    if args.part in ("all", "pipeline"):
        work = Path(args.workdir or tempfile.mkdtemp(prefix="t2i-calibration-"))
        work.mkdir(parents=True, exist_ok=True)
        print(f"work folder {work}; load average {os.getloadavg()[0]:.1f}; {os.cpu_count()} CPUs", flush=True)
        out["pipeline"] = pipeline(work, nulls_n, canary_n, args.indic_pool)
    if args.part in ("all", "simulated"):
        out["simulated"] = simulated_table(sim_n)
    print()
    if "pipeline" in out:
        print_pipeline(out["pipeline"])
    if "simulated" in out:
        print(f"simulated scores (what the random-weight tiny scorers cannot see; {sim_n} draws each):")
        for label, (f, n) in out["simulated"].items():
            print(f"  {label:<76} {f}/{n} = {f / n:.3f}")
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; {time.strftime('%Y-%m-%d')}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
