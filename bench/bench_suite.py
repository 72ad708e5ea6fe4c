"""Benchmark of a cold vs a warm run of a slice of the real fairness suite.

Run: ``python bench/bench_suite.py [--quick]`` (each pytest run is a subprocess on the tiny models).

A cold run starts from an empty cache (every image generated, every feature computed); the warm
run repeats the same command on the cache the cold run filled (nothing generated: no model is
even loaded for generation). Each repetition is a (cold, warm) pair on a fresh temporary cache, so
load changes during the benchmark reach both sides alike. A ``--collect-only`` run of the same
command after each pair measures the fixed cost (interpreter start, imports, collection). Prints
wall times, the warm/cold ratio (also net of the fixed cost) and the cache lines of the plugin's summary ("images: N generated, M from cache", features).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FULL = {"repeats": 3, "objects": "bag,car", "images": 3}
QUICK = {"repeats": 1, "objects": "bag,car", "images": 3}
SELECTION = "object_in_region-africa"
SUMMARY = re.compile(r"^(\S+: \d+ (?:generated|computed), \d+ from cache)", re.M)


def run_suite(cache_dir: Path, thresholds: Path, objects: str, images: int, collect_only: bool = False) -> tuple[float, str]:
    cmd = [sys.executable, "-m", "pytest", "fairness_tests", *(["--collect-only"] if collect_only else []), "-k", SELECTION, "--t2i-objects", objects,
           "--t2i-images-per-prompt", str(images), "--t2i-cache-dir", str(cache_dir),
           "--t2i-thresholds", str(thresholds), "--t2i-update-thresholds", "-q", "--t2i-no-progress",
           "-p", "no:cacheprovider"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "plugin"), os.environ.get("PYTHONPATH")])))
    env.setdefault("HF_HUB_OFFLINE", "1")
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"pytest exited with {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
    return seconds, done.stdout


def counts(output: str) -> tuple[int, int]:
    match = re.search(r"images: (\d+) generated, (\d+) from cache", output)
    if match is None:
        sys.exit(f"no 'images: N generated, M from cache' line in the output:\n{output[-2000:]}")
    return int(match.group(1)), int(match.group(2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one (cold, warm) pair instead of three")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # progress lines show up when piped to a file
    sizes = QUICK if args.quick else FULL
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}, mode={'quick' if args.quick else 'full'}")
    print(f"pytest fairness_tests -k {SELECTION!r} --t2i-objects {sizes['objects']} "
          f"--t2i-images-per-prompt {sizes['images']} (tiny models), {sizes['repeats']} (cold, warm) pair(s)")

    cold, warm, collect, lines = [], [], [], {}
    with tempfile.TemporaryDirectory(prefix="t2i-bench-suite-") as tmp:
        for rep in range(sizes["repeats"]):
            base = Path(tmp) / f"rep{rep}"
            for label, times in (("cold", cold), ("warm", warm)):
                seconds, output = run_suite(base / "cache", base / "t.yaml", sizes["objects"], sizes["images"])
                times.append(seconds)
                generated, from_cache = counts(output)
                lines[label] = SUMMARY.findall(output)
                print(f"  rep {rep} {label}: {seconds:6.1f} s  images {generated} generated, {from_cache} from cache  "
                      f"(load {os.getloadavg()[0]:.2f})")
            seconds, _ = run_suite(base / "cache", base / "t.yaml", sizes["objects"], sizes["images"], collect_only=True)
            collect.append(seconds)
            print(f"  rep {rep} collect only: {seconds:6.1f} s  (interpreter, imports, collection; load {os.getloadavg()[0]:.2f})")

    med_cold, med_warm = statistics.median(cold), statistics.median(warm)
    print(f"\n[suite] wall time of the whole pytest process, median of {len(cold)}")
    print(f"    cold (empty cache)   {med_cold:7.1f} s")
    print(f"    warm (same cache)    {med_warm:7.1f} s")
    med_collect = statistics.median(collect)
    print(f"    collect only         {med_collect:7.1f} s  (fixed cost: start-up, imports, collection)")
    print(f"    warm/cold {med_warm / med_cold:.2f} (cold is {med_cold / med_warm:.1f}x slower); "
          f"per pair: {', '.join(f'{w / c:.2f}' for c, w in zip(cold, warm))}")
    print(f"    beyond the fixed cost: cold {med_cold - med_collect:.1f} s, warm {med_warm - med_collect:.1f} s "
          f"(warm/cold {(med_warm - med_collect) / (med_cold - med_collect):.2f})")
    for label in ("cold", "warm"):
        print(f"    {label} summary: " + "; ".join(lines[label]))
    print(f"    load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())} (1, 5, 15 min)")


if __name__ == "__main__":
    main()
