"""Every gate's value and verdict of the whole procedural suite, to hold a refactor to "nothing changes".

Run ``python tools/suite_snapshot.py snap OUT.json`` before and after a change, then
``python tools/suite_snapshot.py compare BEFORE.json AFTER.json`` (exit 1 on any difference).

``snap`` writes bounds with the update flow at ``--bounds-seed`` (default 0) into a fresh thresholds file,
then runs ``fairness_tests`` on ``--t2i-model procedural`` at ``--seed`` (default 1) once fixed-N
(``--t2i-fixed-n``) and once ``--t2i-sequential`` (batch below N, so it has rounds), each on its own cache,
for the null model and each ``--canary`` (so failing verdicts are compared too),
and keeps per gate: value, n, status, bound, p-value, and where a sequential gate stopped.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COMMON = ("--t2i-model", "procedural", "--t2i-objects", "bag,car,stove", "--t2i-cis-k", "1,2,4,8",
          "--t2i-no-progress", "-p", "no:cacheprovider", "-p", "no:randomly", "-q", "-W", "ignore::UserWarning")
#: what must not move: the record's fields, and the round loop's stop
FIELDS = ("value", "n", "status", "bound", "p_value", "threshold")
STOP = ("round", "reason", "at")


def _pytest(work: Path, label: str, seed: int, thresholds: Path, a, *extra: str) -> dict:
    artifacts = work / f"art-{label}"
    cmd = [sys.executable, "-m", "pytest", str(REPO / "fairness_tests"), *COMMON, "--t2i-seed", str(seed),
           "--t2i-images-per-prompt", str(a.images), "--t2i-cis-images", str(a.images),
           "--t2i-batch-size", str(a.batch), "--t2i-cis-prompts", str(a.cis_prompts),
           "--t2i-thresholds", str(thresholds), "--t2i-cache-dir", str(work / f"cache-{label}"),
           "--t2i-artifacts", str(artifacts), *(("-k", a.select) if a.select else ()), *extra]
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    env.pop("PYTEST_ADDOPTS", None)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
    runs = sorted(artifacts.rglob("run.json"))
    if not runs:
        raise SystemExit(f"{label}: no run.json (rc {proc.returncode})\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    records = json.loads(runs[-1].read_text())["gates"]
    out = {}
    for r in records:
        row = {k: r.get(k) for k in FIELDS}
        seq = (r.get("details") or {}).get("sequential")
        if seq:
            row["stop"] = {k: seq.get(k) for k in STOP}
        out[r["gate"]] = row
    print(f"# {label}: {len(out)} gates, rc {proc.returncode}, {time.perf_counter() - t0:.0f} s", flush=True)
    return out


def snap(a) -> None:
    with tempfile.TemporaryDirectory(prefix="suite-snapshot-") as tmp:
        work = Path(tmp)
        thresholds = work / "thresholds.yaml"
        _pytest(work, "bounds", a.bounds_seed, thresholds, a, "--t2i-update-thresholds")
        result = {"settings": vars(a) | {"out": None}}
        for scenario in ["null", *a.canary]:
            extra = () if scenario == "null" else ("--t2i-canary", scenario)
            for design, flag in (("fixed", "--t2i-fixed-n"), ("sequential", "--t2i-sequential")):
                key = design if scenario == "null" else f"{design} {scenario}"
                result[key] = _pytest(work, key.replace(" ", "-").replace(":", "_"), a.seed, thresholds, a, flag, *extra)
    Path(a.out).write_text(json.dumps(result, indent=1, sort_keys=True))


def _same(x, y) -> bool:
    if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
        return True
    return x == y


def compare(a) -> int:
    before, after = (json.loads(Path(p).read_text()) for p in (a.before, a.after))
    differ = 0
    designs = [k for k in before if k != "settings"]
    for design in [*designs, *(k for k in after if k != "settings" and k not in designs)]:
        if design not in before or design not in after:
            print(f"# {design}: only {'after' if design in after else 'before'}")
            differ += 1
            continue
        b, c = before[design], after[design]
        for gate in sorted(set(b) | set(c)):
            if gate not in b or gate not in c:
                print(f"{design}: {gate} only in {'after' if gate in c else 'before'}")
                differ += 1
                continue
            for key in sorted(set(b[gate]) | set(c[gate])):
                if not _same(b[gate].get(key), c[gate].get(key)):
                    print(f"{design}: {gate}: {key} {b[gate].get(key)!r} -> {c[gate].get(key)!r}")
                    differ += 1
        print(f"# {design}: {len(b)} gates before, {len(c)} after")
    print(f"# {differ} difference(s)")
    return 1 if differ else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    s = sub.add_parser("snap", help="run the suite and write every gate's value and verdict")
    s.add_argument("out")
    s.add_argument("--seed", type=int, default=1)
    s.add_argument("--bounds-seed", type=int, default=0)
    s.add_argument("--images", type=int, default=16, help="N: images per prompt (DIG In and CIS)")
    s.add_argument("--batch", type=int, default=2, help="batch size (below N: the sequential run has rounds)")
    s.add_argument("--cis-prompts", type=int, default=16)
    s.add_argument("-k", dest="select", default=None, help="pytest -k: a slice of the suite (e.g. clgc)")
    s.add_argument("--canary", nargs="*", default=["collapse_region:africa"],
                   help="canaries run like the null model, so failing verdicts are compared too")
    c = sub.add_parser("compare", help="list every gate whose value or verdict differs")
    c.add_argument("before")
    c.add_argument("after")
    a = ap.parse_args(argv)
    if a.command == "snap":
        snap(a)
        return 0
    return compare(a)


if __name__ == "__main__":
    raise SystemExit(main())
