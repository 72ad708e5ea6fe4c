"""The procedural world audited from its truth, over seeds: a scorer bias the audit must see through.

Per seed, from the command line as a user runs it (``--t2i-model procedural --t2i-scorers procedural``, CIS_2 only):
the scorer misses every component at ``--miss`` (the generator unchanged), the run is decided scorer-only, then
``t2i-fairness audit RUN --per-group LABELS --from-truth`` answers its sample from the images' truth and the same
run is decided with ``--t2i-audit``. The bound is written once, by a run without the miss at seed 0. Printed: the
scorer-only and audited verdicts per seed, and their failures over the seeds (an audited failure is a false alarm:
the generator is the one the bound was written from). ``--canary`` adds a generator regression (e.g.
``drop_position:last:1.0``): then every audited verdict should fail. ``--miss-component NAME`` makes the scorer miss
that one component always (a one-component scorer bias) instead of every component at ``--miss``;
``--components N`` draws the prompts from N names (``--t2i-cis-components``), so one component is in enough prompts
to move CIS_2; ``--alpha`` sets the gate's level (the one selected gate is otherwise decided at 0.05). The audit draws
at most one unit per prompt: ``--labels`` above ``--prompts`` gives ``--prompts`` labels.

    python bench/bench_audit_truth.py [--seeds 20] [--prompts 32] [--images 4] [--labels 200] [--miss 0.3]
    python bench/bench_audit_truth.py --components 16 --prompts 64 --miss-component wok [--canary drop_component:wok]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run(work: Path, art: str, seed: int, args, *extra) -> dict:
    cmd = [sys.executable, "-m", "pytest", "fairness_tests/test_cis.py", "-q", "-p", "no:cacheprovider",
           "--t2i-model", "procedural", "--t2i-scorers", "procedural", "--t2i-no-progress", "--t2i-thresholds",
           "t.yaml", "--t2i-cache-dir", "cache", "--t2i-artifacts", art, "--t2i-seed", str(seed), "--t2i-cis-k", "2",
           "--t2i-cis-prompts", str(args.prompts), "--t2i-cis-images", str(args.images), "-k", "test_cis and k2",
           *(["--t2i-cis-components", str(args.components)] if args.components else []),
           *(["--t2i-alpha", repr(args.alpha)] if args.alpha else []), *extra]
    subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=900)
    gates = {r["gate"]: r for r in json.loads((work / art / "run.json").read_text())["gates"]}
    return gates["test_cis[k2]"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--prompts", type=int, default=32)
    p.add_argument("--images", type=int, default=4)
    p.add_argument("--labels", type=int, default=200)
    p.add_argument("--miss", type=float, default=0.3)
    p.add_argument("--canary", default=None)
    p.add_argument("--miss-component", default=None, help="the scorer misses this component always (else every one)")
    p.add_argument("--components", type=int, default=None, help="--t2i-cis-components (default: the paper's 998)")
    p.add_argument("--alpha", type=float, default=None,
                   help="--t2i-alpha of the one selected gate (default 0.05; 1.03e-4 is the smoke preset's per-gate level)")
    args = p.parse_args(argv)
    from t2i_fairness.cli import main as cli

    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        os.chdir(work)
        (work / "fairness_tests").mkdir()
        shutil.copy(REPO / "fairness_tests" / "test_cis.py", work / "fairness_tests")
        run(work, "null", 0, args, "--t2i-update-thresholds")
        miss = f"{args.miss_component}=1" if args.miss_component else f"*={args.miss}"
        extra = ["--t2i-procedural-miss", miss] + (["--t2i-canary", args.canary] if args.canary else [])
        names = f" over {args.components} component names" if args.components else ""
        print(f"CIS_2, {args.prompts} prompts x {args.images} images{names}, scorer miss {miss}, canary "
              f"{args.canary or 'none'}, up to {args.labels} labels from the truth (one per prompt), level "
              f"{args.alpha or 0.05:g}; bound written at seed 0 without the miss")
        print(f"{'seed':>4} {'scorer-only':>22} {'audited':>22} {'labels':>6}")
        fails = {"scorer-only": 0, "audited": 0}
        for seed in range(args.seeds):
            art = f"s{seed}"
            plain = run(work, art, seed, args, *extra)
            if cli(["audit", art, "--per-group", str(args.labels), "--from-truth"]) != 0:  # cwd: the cache's paths
                raise SystemExit(f"seed {seed}: t2i-fairness audit failed")
            labels = work / art / "audit" / "labels.csv"
            audited = run(work, art + "-a", seed, args, *extra, "--t2i-audit", str(labels))
            n = len(labels.read_text().splitlines()) - 1
            fails["scorer-only"] += plain["status"] == "fail"
            fails["audited"] += audited["status"] == "fail"
            print(f"{seed:>4} {plain['status']:>9} {plain['value']:.4f} p {plain.get('p_value') or 0:.1e}"
                  f" {audited['status']:>9} {audited['value']:.4f} {n:>6}", flush=True)
            shutil.rmtree(work / "cache" / "images", ignore_errors=True)
        print(f"failed over {args.seeds} seeds: scorer-only {fails['scorer-only']}, audited {fails['audited']} "
              f"({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
