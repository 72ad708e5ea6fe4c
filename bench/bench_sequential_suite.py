"""Sequential gates against fixed N in the real suite: pytest runs on the procedural world, both designs, same seeds.

Run: ``python bench/bench_sequential.py --procedural 20`` (or this file: ``python bench/bench_sequential_suite.py
--runs 20``). Each run is a pytest subprocess of ``fairness_tests`` on ``--t2i-model procedural`` (a seeded
simulator of the synthetic reference's world whose values move with the seed) at a batch size below ``N``, so
``--t2i-sequential`` has rounds (batch 2, ``N = 8`` for DIG In and CIS: looks at 2, 4 and 8 images per prompt):

1. **Bounds**: one fixed-N run at ``--bounds-seed`` (default 1000) with ``--t2i-update-thresholds`` into a fresh
   thresholds file (the update flow, at ANOTHER seed than every gated run).
2. Per scenario (``null``: the unchanged model; a canary of ``t2i_fairness.canaries``, ``--t2i-canary``) and per
   seed ``1..RUNS`` (``--first-seed F``: ``F..F+RUNS-1``): the ``--t2i-sequential`` run on a cache that holds no image of that seed, so what it
   generates is what a sequential run makes; then the fixed-N run at the same seed on the same cache (it reuses
   those images, a round's images being the fixed-N run's first ones, byte for byte, and generates the rest).
   Both read ``run.json`` (``--t2i-artifacts``): verdicts, and ``details["sequential"]`` of every gate.

Per scenario it prints: runs; family-wise false alarms (a run with any failed gate outside the canary's slice;
``fail``, ``missing``, ``refused`` or a blocking ``inconclusive``; gates pooling the slice with others are counted
apart) fixed / sequential with the two-sided 95% Clopper-Pearson interval; canary caught (a gate of its slice
failed) fixed / sequential; gate verdicts that differ between the designs, on the slice and off it; images used as
the mean over each kind's gates of the share of its planned look size where it stopped (``share_of_planned`` of
``details["sequential"]``: of prompts for CIS, of images per prompt for DIG In) and
the run's distinct images from the cache's counts (``images: G generated, C from cache``): the sequential run's
``G`` against ``G`` of both runs (the fixed-N run's images: the sequential run's plus those the fixed-N run added;
checked against the fixed-N run's own ``G + C``). The cache's ``G + C`` of a sequential run counts requests, and
a look asks again for the images of earlier looks: requests are printed apart. Every run with a false alarm or a slice verdict that
differs is listed with its gates, statuses and messages.

Selection (``--select``, default :data:`SELECTION`): the CIS ``test_cis[k]`` gates and DIG In's
``{object} in {region}`` precision and coverage gates, the kinds the suite decides in rounds. The world's size
(``--objects``, ``--cis-k``, ``--images``, ``--batch``) keeps one run near 20-40 s on a 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO / "plugin") not in sys.path:
    sys.path.insert(0, str(REPO / "plugin"))

from t2i_fairness.report.sequential import record_of  # noqa: E402

SELECTION = ("test_cis and not test_cis_order and not test_cis_drop and not test_cis_component"
             " or object_in_region and (test_region_precision or test_region_coverage)")
SCENARIOS = ("null", "collapse_region:africa")
IMAGES = re.compile(r"^images: (\d+) generated, (\d+) from cache", re.M)
KINDS = (("test_cis[", "CIS"), ("test_region_precision[", "DIG In precision"),
         ("test_region_coverage[", "DIG In coverage"))


def kind_of(gate: str) -> str:
    return next((k for prefix, k in KINDS if gate.startswith(prefix)), "other")


def failed(record: dict) -> bool:
    return record["status"] in ("fail", "missing", "refused") or (
        record["status"] == "inconclusive" and bool(record.get("blocking")))


def pytest_run(work: Path, label: str, seed: int, *extra: str, a: argparse.Namespace, thresholds: Path) -> dict:
    """One pytest run of the selection; its run.json records, image counts and wall time."""
    artifacts = work / f"art-{label}"
    cmd = [sys.executable, "-m", "pytest", str(REPO / "fairness_tests"), "-k", a.select,
           "--t2i-model", "procedural", "--t2i-batch-size", str(a.batch), "--t2i-images-per-prompt", str(a.images),
           "--t2i-cis-images", str(a.images), "--t2i-objects", a.objects, "--t2i-cis-k", a.cis_k,
           "--t2i-seed", str(seed), "--t2i-thresholds", str(thresholds), "--t2i-cache-dir", str(work / "cache"),
           "--t2i-artifacts", str(artifacts), "--t2i-no-progress", "-p", "no:cacheprovider", "-p", "no:randomly",
           "-q", "-W", "ignore::UserWarning", *a.pytest_args, *extra]
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    env.pop("PYTEST_ADDOPTS", None)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=a.timeout)
    seconds = time.perf_counter() - t0
    if proc.returncode not in (0, 1) or not (artifacts / "run.json").exists():
        raise RuntimeError(f"run {label} ended with {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    data = json.loads((artifacts / "run.json").read_text())
    counts = IMAGES.search(proc.stdout)
    if counts is None:
        raise RuntimeError(f"run {label}: no 'images: N generated, M from cache' line:\n{proc.stdout[-3000:]}")
    return {"records": {r["gate"]: r for r in data["gates"]}, "generated": int(counts[1]), "cached": int(counts[2]),
            "seconds": seconds, "returncode": proc.returncode}


def roles(scenario: str, gates) -> dict:
    """gate -> "slice" / "aggregate" / "other" for a canary scenario; every gate "other" under the null."""
    if scenario == "null":
        return {g: "other" for g in gates}
    from t2i_fairness.canaries import slice_of

    s = slice_of(scenario)
    return {g: s.gate_role(g) for g in gates}


def compare(scenario: str, seed: int, fixed: dict, sequential_run: dict) -> dict:
    """One seed of one scenario, both designs: false alarms, catches, differing verdicts, images per kind."""
    if set(fixed["records"]) != set(sequential_run["records"]):
        raise RuntimeError(f"{scenario} seed {seed}: the designs gated different gates: "
                           f"{sorted(set(fixed['records']) ^ set(sequential_run['records']))}")
    role = roles(scenario, fixed["records"])
    out = {"seed": seed, "false": {}, "caught": {}, "differ": {"slice": [], "other": []}, "kinds": {},
           "images": (sequential_run["generated"], sequential_run["generated"] + fixed["generated"]),
           "requests": (sequential_run["generated"] + sequential_run["cached"], fixed["generated"] + fixed["cached"]),
           "seconds": (fixed["seconds"], sequential_run["seconds"]), "anomalies": [], "reasons": {}, "notes": []}
    for design, run_ in (("fixed", fixed), ("sequential", sequential_run)):
        recs = run_["records"]
        out["false"][design] = sorted(g for g, r in recs.items() if role[g] == "other" and failed(r))
        out["caught"][design] = sorted(g for g, r in recs.items() if role[g] == "slice" and failed(r))
    unknown = []  # gates whose sequential record has no image counts
    for g, f in fixed["records"].items():
        s = sequential_run["records"][g]
        if failed(f) != failed(s):
            where = "slice" if role[g] == "slice" else "other"
            out["differ"][where].append(g)
        detail = record_of(s)
        kind = kind_of(g)
        used, planned = out["kinds"].get(kind, (0, 0))
        if detail and detail.share_of_planned is not None:  # a look's share of N, per gate
            used, planned = used + detail.share_of_planned, planned + 1
        else:
            unknown.append((g, kind, detail))
        out["kinds"][kind] = (used, planned)
        reason = str(detail.reason) if detail else "no sequential record"
        out["reasons"].setdefault(f"{kind}: {s['status']} ({reason})", []).append(g)
    for g, kind, detail in unknown:
        # no look recorded (no look before N, or a test that stopped before its gate): it ran to N, a share of 1
        # where a gate of its kind has a record in this run (so the kind is one this run measures), else counted apart
        has_peer = any(kind_of(h) == kind and record_of(r) and record_of(r).share_of_planned is not None
                       for h, r in sequential_run["records"].items())
        s = sequential_run["records"][g]
        note = f"{g}: {s['status']}, sequential record {json.dumps(detail and detail.to_dict())}; message: {s.get('message', '')[:240]}"
        if has_peer:
            used, planned = out["kinds"][kind]
            out["kinds"][kind] = (used + 1, planned + 1)
            out["reasons"].setdefault("no sequential record: counted at N (a share of 1)", []).append(g)
        else:
            out["reasons"].setdefault("no sequential record: not counted", []).append(g)
        out["notes"].append(note)
    if out["images"][1] != out["requests"][1]:
        out["anomalies"].append(f"cache accounting seed {seed}: sequential + fixed-N generated {out['images'][1]} images, "
                                f"the fixed-N run asked for {out['requests'][1]}")
    for design in ("fixed", "sequential"):
        for g in out["false"][design]:
            out["anomalies"].append(f"false alarm ({design}) seed {seed} {g}: {_state(fixed, sequential_run, g)}")
    for g in out["differ"]["slice"]:
        out["anomalies"].append(f"slice verdict differs seed {seed} {g}: {_state(fixed, sequential_run, g)}")
    return out


def _state(fixed: dict, sequential_run: dict, gate: str) -> str:
    f, s = fixed["records"][gate], sequential_run["records"][gate]
    return f"fixed {f['status']} ({f.get('message', '')}); sequential {s['status']} ({s.get('message', '')})"


def cp(h: int, n: int) -> str:
    from scipy.stats import beta

    lo = 0.0 if h == 0 else float(beta.ppf(0.025, h, n - h + 1))
    hi = 1.0 if h == n else float(beta.ppf(0.975, h + 1, n - h))
    return f"{h}/{n} [{lo:.3f}, {hi:.3f}]"


def summarize(scenario: str, per_seed: list[dict]) -> dict:
    n = len(per_seed)
    kinds: dict[str, list[int]] = {}
    for r in per_seed:
        for k, (u, p) in r["kinds"].items():
            acc = kinds.setdefault(k, [0, 0])
            acc[0] += u
            acc[1] += p
    reasons: dict[str, int] = {}
    for r in per_seed:
        for k, gates in r["reasons"].items():
            reasons[k] = reasons.get(k, 0) + len(gates)
    return {"scenario": scenario, "runs": n,
            "false_fixed": sum(bool(r["false"]["fixed"]) for r in per_seed),
            "false_seq": sum(bool(r["false"]["sequential"]) for r in per_seed),
            "caught_fixed": sum(bool(r["caught"]["fixed"]) for r in per_seed),
            "caught_seq": sum(bool(r["caught"]["sequential"]) for r in per_seed),
            "differ_slice": sum(len(r["differ"]["slice"]) for r in per_seed),
            "differ_other": sum(len(r["differ"]["other"]) for r in per_seed),
            "kinds": kinds, "images": [sum(r["images"][0] for r in per_seed), sum(r["images"][1] for r in per_seed)],
            "requests": [sum(r["requests"][0] for r in per_seed), sum(r["requests"][1] for r in per_seed)],
            "seconds": [sum(r["seconds"][0] for r in per_seed), sum(r["seconds"][1] for r in per_seed)],
            "anomalies": [a for r in per_seed for a in r["anomalies"]], "reasons": reasons,
            # one note per gate, status and record (one run's message)
            "notes": list({n.split("; message:")[0]: n for r in per_seed for n in reversed(r["notes"])}.values())}


def table(rows: list[dict]) -> list[str]:
    kinds = [k for _, k in KINDS]
    out = ["| scenario | runs | FWER fixed N | FWER sequential | slice caught fixed / sequential | slice verdicts "
           "that differ | other verdicts that differ | " + " | ".join(f"{k}: images" for k in kinds) +
           " | run's images generated (cache) | image requests sequential / fixed | seconds fixed / sequential |",
           "|---|---|---|---|---|---|---|" + "---|" * len(kinds) + "---|---|---|"]
    for r in rows:
        canary = r["scenario"] != "null"
        share = [f"{r['kinds'][k][0] / r['kinds'][k][1]:.0%}" if r["kinds"].get(k, [0, 0])[1] else "-" for k in kinds]
        used, planned = r["images"]
        out.append(f"| {r['scenario']} | {r['runs']} | {cp(r['false_fixed'], r['runs'])} | "
                   f"{cp(r['false_seq'], r['runs'])} | "
                   f"{(str(r['caught_fixed']) + '/' + str(r['runs']) + ' / ' + str(r['caught_seq']) + '/' + str(r['runs'])) if canary else '-'} | "
                   f"{r['differ_slice'] if canary else '-'} | {r['differ_other']} | " + " | ".join(share) +
                   f" | {used}/{planned} = {used / planned:.0%} | {r['requests'][0]} / {r['requests'][1]} | "
                   f"{r['seconds'][0]:.0f} / {r['seconds'][1]:.0f} |")
    return out


def run(a: argparse.Namespace, log=print) -> list[dict]:
    """Bounds, then every scenario at seeds ``first_seed .. first_seed + runs - 1``, both designs; the summary rows."""
    from t2i_fairness.canaries import parse_canary

    for s in a.scenarios:
        if s != "null":
            parse_canary(s, option="--scenarios")
    with tempfile.TemporaryDirectory(prefix="bench-seqsuite-", dir=a.work) as tmp:
        work = Path(tmp)
        if a.keep:
            work = Path(tempfile.mkdtemp(prefix="bench-seqsuite-kept-", dir=a.work))
            log(f"# work folder (kept): {work}")
        thresholds = work / "thresholds.yaml"
        bounds = pytest_run(work, "bounds", a.bounds_seed, "--t2i-update-thresholds", a=a, thresholds=thresholds)
        log(f"# bounds: seed {a.bounds_seed}, {len(bounds['records'])} gates written to a temp thresholds file "
            f"({bounds['seconds']:.0f} s)")
        rows = []
        for scenario in a.scenarios:
            extra = [] if scenario == "null" else ["--t2i-canary", scenario]
            per_seed = []
            for seed in range(a.first_seed, a.first_seed + a.runs):
                label = f"{scenario.replace(':', '_')}-{seed}"
                sequential_run = pytest_run(work, label + "-sequential_run", seed, *extra, "--t2i-sequential", a=a, thresholds=thresholds)
                fixed = pytest_run(work, label + "-fixed", seed, *extra, a=a, thresholds=thresholds)
                per_seed.append(compare(scenario, seed, fixed, sequential_run))
                log(f"# {scenario} seed {seed}: fixed {fixed['seconds']:.0f} s, sequential {sequential_run['seconds']:.0f} s; "
                    f"false alarms {len(per_seed[-1]['false']['fixed'])} / {len(per_seed[-1]['false']['sequential'])}, "
                    f"slice fails {len(per_seed[-1]['caught']['fixed'])} / {len(per_seed[-1]['caught']['sequential'])}, "
                    f"images {per_seed[-1]['images'][0]} / {per_seed[-1]['images'][1]}")
            rows.append(summarize(scenario, per_seed))
        return rows


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20, help="seeds per scenario (>= 1)")
    ap.add_argument("--first-seed", type=int, default=1, help="the first seed (seeds first .. first + runs - 1)")
    ap.add_argument("--scenarios", nargs="+", default=list(SCENARIOS),
                    help="'null' and/or canaries NAME:SLICE[:PARAM] (t2i_fairness.canaries)")
    ap.add_argument("--select", default=SELECTION, help="pytest -k selection")
    ap.add_argument("--objects", default="bag,car,stove", help="--t2i-objects")
    ap.add_argument("--cis-k", default="1,2,4,8", help="--t2i-cis-k")
    ap.add_argument("--images", type=int, default=8, help="N: --t2i-images-per-prompt and --t2i-cis-images")
    ap.add_argument("--batch", type=int, default=2, help="--t2i-batch-size (rounds are its multiples; below N)")
    ap.add_argument("--bounds-seed", type=int, default=1000, help="seed of the update-flow run writing the bounds")
    ap.add_argument("--work", default=None, help="parent folder of the temp work folder (default: the system's)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per pytest run")
    ap.add_argument("--pytest-args", default="", type=lambda s: s.split(),
                    help="more pytest arguments for every run (bounds included), whitespace-separated, e.g. "
                         "'--t2i-fake-dedupe=none' (nested coverage: its early pass becomes possible)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (caches, thresholds, run.json files)")
    ap.add_argument("--json", default=None, help="also write the rows here")
    ap.add_argument("--reasons", action="store_true", help="also print the sequential stopping reasons per scenario")
    return ap


def main(argv=None) -> int:
    ap = parser()
    a = ap.parse_args(argv)
    if a.runs < 1:
        ap.error("--runs must be >= 1")
    if a.first_seed < 1 or a.first_seed <= a.bounds_seed < a.first_seed + a.runs:
        ap.error("--first-seed must be >= 1 and the seeds must not include --bounds-seed")
    if not 1 <= a.batch < a.images:
        ap.error(f"--batch must be in 1..{a.images - 1} (below --images): with one batch per prompt there are no rounds")
    t0 = time.time()
    rows = run(a)
    print(f"# bench_sequential_suite: {a.runs} runs per scenario (seeds {a.first_seed}..{a.first_seed + a.runs - 1}), bounds at seed {a.bounds_seed}, "
          f"procedural, objects {a.objects}, CIS K {a.cis_k}, N {a.images}, batch {a.batch}"
          f"{', pytest ' + ' '.join(a.pytest_args) if a.pytest_args else ''}; {platform.node()} "
          f"({platform.processor() or platform.machine()}, {os.cpu_count()} cores), "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {time.time() - t0:.0f} s")
    print("\n".join(table(rows)))
    for r in rows:
        for line in r["anomalies"]:
            print(f"{r['scenario']}: {line}")
        if a.reasons:
            print(r["scenario"], json.dumps(dict(sorted(r["reasons"].items()))))
            for line in r["notes"]:
                print(f"{r['scenario']}: {line}")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
