"""How often does ``t2i-fairness compare`` call a null pair of runs changed? Family-wise false flags, measured.

Run: ``python bench/bench_history.py [--pairs 20] [--objects bag,car] [-k EXPR] [--alpha 0.05] [--keep DIR]``.

Each pair is two gate runs of one model (``--t2i-model procedural``, the built-in procedural world) at two
new seeds: no change between them but the sampling. Every run is a real ``pytest fairness_tests`` subprocess
that records itself in one history store (the product's own recorder); each pair is then compared by the
product's :func:`~t2i_fairness.history.compare.compare_gates` over the gates both measured, Holm at ``--alpha``
across them, as ``t2i-fairness compare A B`` does. A pair with any gate flagged is a family-wise false flag;
the bench prints their count beside the level, with the Clopper-Pearson interval of the rate, the gates
compared per pair and the smallest adjusted p-value of each pair. It makes no assertion.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "plugin"))

from t2i_fairness.history.compare import compare_gates  # noqa: E402
from t2i_fairness.history.store import HistoryStore  # noqa: E402


def run_once(work: Path, seed: int, args) -> float:
    cmd = [sys.executable, "-m", "pytest", str(ROOT / "fairness_tests" / "test_dig_in_region.py"), "-k", args.k,
           "--t2i-model", "procedural", "--t2i-objects", args.objects, "--t2i-seed", str(seed),
           "--t2i-images-per-prompt", str(args.images), "--t2i-thresholds", str(work / "thresholds.yaml"),
           "--t2i-update-thresholds", "--t2i-allow-loosen", "--t2i-cache-dir", str(work / "cache"),
           "--t2i-artifacts", str(work / "art"), "--t2i-history", str(work / "history.sqlite"),
           "--t2i-no-progress", "-p", "no:cacheprovider", "-q"]
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise SystemExit(f"seed {seed}: pytest exited {done.returncode}\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return time.perf_counter() - start


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=20)
    ap.add_argument("--objects", default="bag,car")
    ap.add_argument("--images", type=int, default=6, help="images per prompt (the smoke preset's 6)")
    ap.add_argument("-k", default="object_in_region and not worst and not disparity",
                    help="the gates of test_dig_in_region.py each run measures")
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--keep", metavar="DIR", help="keep the runs' store and cache here (default: a temporary folder)")
    ap.add_argument("--analyse", action="store_true", help="run nothing: compare the pairs of the finished runs "
                    "already in --keep's store (consecutive runs, oldest first)")
    args = ap.parse_args(argv)
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-history-"))
    work.mkdir(parents=True, exist_ok=True)
    seconds = [] if args.analyse else [run_once(work, 1000 + i, args) for i in range(2 * args.pairs)]
    store = HistoryStore(work / "history.sqlite")
    runs = [r for r in store.runs() if r.state == "finished"][-2 * args.pairs:]
    runs = runs[:len(runs) // 2 * 2]
    flagged, compared, smallest = 0, [], []
    for a, b in zip(runs[0::2], runs[1::2]):
        changes = [c for c in compare_gates(store.gates(a.id), store.gates(b.id), args.alpha) if c.p_value is not None]
        compared.append(len(changes))
        smallest.append(min((c.p_adjusted for c in changes), default=1.0))
        flagged += any(c.changed for c in changes)
    from scipy.stats import beta

    n = len(compared)
    lo = beta.ppf(0.025, flagged, n - flagged + 1) if flagged else 0.0
    hi = beta.ppf(0.975, flagged + 1, n - flagged) if flagged < n else 1.0
    timing = f"{sum(seconds):.0f} s, {sum(seconds) / len(seconds):.1f} s a run" if seconds else "read from the store"
    print(f"procedural model, test_dig_in_region.py -k {args.k!r}, objects {args.objects}, {args.images} images per "
          f"prompt; {2 * n} runs ({timing}); store {work / 'history.sqlite'}")
    print(f"null pairs: {n}; gates compared per pair: {min(compared)}-{max(compared)}")
    print(f"family-wise false flags: {flagged} / {n} = {flagged / n:.3f} (95% CI {lo:.3f}-{hi:.3f}); level {args.alpha:g}")
    print("smallest Holm-adjusted p per pair: " + ", ".join(f"{p:.3g}" for p in smallest))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
