"""How long ``t2i-fairness plan`` takes at the sizes that used to hang it, and the per-image path it replaced.

Run: ``python bench/bench_plan.py [--quick]`` (about 3 minutes on the project's 2-core machine;
``--quick`` skips the paper preset).

Two parts, one run (the machine is shared: load average is printed at the start and the end):

  * **the command**: ``t2i-fairness plan`` in a fresh empty folder, as a user types it, for the
    default tiny suite, ``--t2i-images-per-prompt 100000`` and ``--t2i-preset paper``: wall seconds,
    the child's CPU seconds (user + system), the images and batches it plans, and whether the
    folder is still empty afterwards (issue #30's goal: each under 30 s on an idle 2-core machine,
    nothing written). What is left of the time is pytest's collection, model loading and the
    studies' own planning (the word-level gates' masked LM, CIS's prompt draws), not the images.
  * **jobs, side by side**: the batch jobs of the tiny suite's requests at
    ``--t2i-images-per-prompt 200`` on a cold cache, computed per image (main 1938921's
    ``batch_jobs``: one cache key and one presence check per image, kept as the reference in
    ``tests/test_plan_scale.py``) and per stretch of batches (:func:`t2i_fairness.spine.plan.batch_jobs`
    with :func:`~t2i_fairness.spine.plan.cached_indices`); the jobs are checked equal and the ratio printed.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))


def _env() -> dict:
    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1")
    return env


def run_plan(args: list[str]) -> dict:
    """``t2i-fairness plan ARGS`` in a fresh empty folder: wall and CPU seconds, what it planned, what it left."""
    with tempfile.TemporaryDirectory() as tmp:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "t2i_fairness.cli", "plan", *args, "--t2i-no-progress"], cwd=tmp,
                             env=_env(), capture_output=True, text=True, timeout=1800)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        left = sorted(p.relative_to(tmp).as_posix() for p in Path(tmp).rglob("*"))
    if out.returncode != 0:
        raise SystemExit(f"plan {' '.join(args)} failed:\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    made = re.search(r"(\d+) image\(s\) to make in (\d+) batch", out.stdout)
    return {"wall": wall, "cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "images": int(made.group(1)), "batches": int(made.group(2)), "left": left,
            "large": "large plan:" in out.stdout}


def jobs_side_by_side(images_per_prompt: int) -> dict:
    """Per-image (main's) and per-stretch jobs of the tiny suite's requests on a cold cache, timed in this process."""
    from test_plan_scale import reference_batch_jobs

    from t2i_fairness.distributed.planner import build_plan
    from t2i_fairness.distributed.selection import collect, default_paths
    from t2i_fairness.spine.plan import batch_jobs, cached_indices

    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        try:
            paths = ["--pyargs", "t2i_fairness.fairness_tests"] if default_paths()[0] == "--pyargs" else default_paths()
            selection = collect([*paths, "--t2i-images-per-prompt", str(images_per_prompt), "--t2i-no-progress"])
            rp = build_plan(selection, check_cache=False, read_only=True).roles[0]
            factory = rp.bench.factory
            start = time.perf_counter()
            old = reference_batch_jobs(rp.requests, factory.batch_size,
                                       lambda p, i: factory.sound(factory.ref(p, i)))  # main's per-image check
            t_old = time.perf_counter() - start
            start = time.perf_counter()
            new = batch_jobs(rp.requests, factory, cached=cached_indices(factory))
            t_new = time.perf_counter() - start
        finally:
            os.chdir(cwd)
    assert list(new) == old, "the per-stretch jobs differ from the per-image ones"
    return {"images": new.images, "batches": len(new), "requests": len(rp.requests), "old": t_old, "new": t_new}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="skip the paper preset")
    ns = parser.parse_args()
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)")
    cases = [("default (tiny suite)", []), ("--t2i-images-per-prompt 100000", ["--t2i-images-per-prompt", "100000"])]
    if not ns.quick:
        cases.append(("--t2i-preset paper", ["--t2i-preset", "paper"]))
    print(f"{'t2i-fairness plan':<34} {'wall s':>7} {'cpu s':>7} {'images to make':>15} {'batches':>9}  folder after")
    for label, args in cases:
        r = run_plan(args)
        left = "empty" if not r["left"] else f"{len(r['left'])} entries: {r['left'][:3]}"
        print(f"{label:<34} {r['wall']:>7.1f} {r['cpu']:>7.1f} {r['images']:>15} {r['batches']:>9}  {left}"
              + ("  (said large)" if r["large"] else ""))
    s = jobs_side_by_side(200)
    print(f"jobs of the tiny suite at 200 images per prompt ({s['requests']} requests, {s['images']} images, "
          f"{s['batches']} batches, cold cache): per image {s['old']:.2f} s, per stretch {s['new']:.3f} s "
          f"(ratio {s['old'] / max(s['new'], 1e-9):.0f}x), the same jobs")
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
