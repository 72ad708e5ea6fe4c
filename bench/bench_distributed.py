"""Benchmark of the Ray path against the pytest path, and of feature storage before and after the row store.

Run: ``python bench/bench_distributed.py [--quick]`` (needs ``pip install 't2i-fairness[ray]'``; about
4 minutes with ``--quick`` on the project's 2-core machine, more in full mode).

Generation, the same plan both ways (the tiny model, CPU, one torch setting):

  * **plan**: ``t2i-fairness plan``'s selection (``fairness_tests/test_dig_in_consistency.py``, the
    ``{object} in {region}`` gates of every region) over a few objects; its image requests and jobs;
  * **pytest path**: what the ``t2i`` fixture does when a gate asks: ``Workbench.images(prompts, n)``
    per request, in the plan's order, on a fresh cache (the generator built once, first, untimed);
  * **Ray path**: ``generate_ray`` on a local Ray instance with one actor (the same canonical
    batches, the same cache code), on another fresh cache; its time includes starting the actor and
    building the model in it (what a cluster run pays once per worker), so the overhead shown is
    the whole price of going through Ray; ``ray.init`` itself is timed apart;
  * both caches are then compared byte for byte.

Repetitions alternate the order (pytest path first, then Ray first) and the table prints medians and
the overhead ``ray / pytest - 1``.

Feature rows, the one cache loop (``Memo.get_many``) with its two backends, rows of a 512-d CLIP
feature computed by an encoder that costs nothing (so only storage is timed), in batches of 32 as
``Workbench.features`` writes them:

  * **before**: ``FileEntries``: one ``.npy`` per row (temporary file, fsync, rename), the path
    ``Workbench.features`` took before the row store;
  * **after**: ``FeatureRows.entries``: the row store (one ``write()`` per batch, fsync at most once
    a second, and at ``close()``, which is timed).

Both sides run with ``OMP_NUM_THREADS=1`` (set before torch is imported, inherited by the Ray workers):
Ray sets it to 1 in a one-CPU actor when it is unset, and on a loaded 2-core machine that alone made
the actor's generation up to 40% faster than the driver's (a first run without it measured the Ray
path 37% faster), which is the thread setting, not Ray. The tiny model still runs its kernels on 2
torch threads on both sides (its bytes do not depend on it).

Load average is printed at the start and the end: the machine is shared; compare ratios measured
in the same run.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # the same on both sides (see the docstring); before torch

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "plugin"))

FULL = {"objects": "bag,car,dog,tree", "images": 6, "batch": 4, "repeats": 3, "rows": 10000, "row_repeats": 5}
QUICK = {"objects": "bag,car", "images": 3, "batch": 2, "repeats": 2, "rows": 2000, "row_repeats": 3}


def _plan(cfg: dict, cache: Path):
    from t2i_fairness.distributed.planner import build_plan
    from t2i_fairness.distributed.selection import collect

    os.chdir(REPO)
    selection = collect(["fairness_tests/test_dig_in_consistency.py", "-k", "object_in_region-",
                         "--t2i-objects", cfg["objects"], "--t2i-images-per-prompt", str(cfg["images"]),
                         "--t2i-batch-size", str(cfg["batch"]), "--t2i-cache-dir", str(cache),
                         "--t2i-device", "cpu", "--t2i-no-progress"])
    return selection


def _pytest_path(selection, cache: Path) -> float:
    """The generation a gate run does: Workbench.images per request, in the plan's order."""
    from t2i_fairness.distributed.planner import build_plan
    from t2i_fairness.spine.workbench import Workbench

    options = dataclasses.replace(selection.options, cache_dir=cache)
    plan = build_plan(dataclasses.replace(selection, options=options), check_cache=False)
    bench = Workbench(plan.roles[0].options)
    bench.source.get()  # the model is built before the clock starts (a gate run builds it once too)
    start = time.perf_counter()
    for r in plan.roles[0].requests:
        bench.images([r.prompt], r.n)
    return time.perf_counter() - start


def _ray_path(selection, cache: Path) -> tuple[float, int]:
    from t2i_fairness.distributed.engines import generate_ray
    from t2i_fairness.distributed.planner import build_plan

    options = dataclasses.replace(selection.options, cache_dir=cache)
    plan = build_plan(dataclasses.replace(selection, options=options), generate_on="cpu")
    start = time.perf_counter()
    outcome = generate_ray(plan, workers=1, progress=False)
    if outcome.failures:
        raise SystemExit(f"Ray path failed: {outcome.failures[:3]}")
    return time.perf_counter() - start, len(plan.roles[0].jobs)


def _files(root: Path) -> dict:
    return {p.relative_to(root): p.read_bytes() for p in (root / "images").rglob("*.png")}


def bench_generation(cfg: dict, tmp: Path) -> list[str]:
    from t2i_fairness.distributed.engines import init_ray

    selection = _plan(cfg, tmp / "plan-cache")
    t0 = time.perf_counter()
    ray = init_ray(None, num_cpus=2)
    init = time.perf_counter() - t0
    py, rs, jobs = [], [], 0
    for rep in range(cfg["repeats"]):
        order = ("pytest", "ray") if rep % 2 == 0 else ("ray", "pytest")
        caches = {side: tmp / f"{side}-{rep}" for side in order}
        for side in order:
            if side == "pytest":
                py.append(_pytest_path(selection, caches[side]))
            else:
                seconds, jobs = _ray_path(selection, caches[side])
                rs.append(seconds)
        a, b = _files(caches["pytest"]), _files(caches["ray"])
        if a != b or not a:
            raise SystemExit(f"repetition {rep}: the Ray path's images differ from the pytest path's "
                             f"({len(a)} vs {len(b)} files)")
        n_images = len(a)
    ray.shutdown()
    mp, mr = statistics.median(py), statistics.median(rs)
    per_rep = ", ".join(f"{r / p - 1:+.0%}" for p, r in zip(py, rs))
    return [
        f"generation: {n_images} tiny images (64 px, 4 steps) in {jobs} canonical batches, {cfg['repeats']} repetitions",
        f"  pytest path (Workbench.images)        median {mp:7.2f} s  ({n_images / mp:5.2f} images/s)",
        f"  Ray path (1 actor, local instance)    median {mr:7.2f} s  ({n_images / mr:5.2f} images/s)",
        f"  overhead ray / pytest - 1: {mr / mp - 1:+.0%} (per repetition: {per_rep}); ray.init once: {init:.1f} s",
        "  images byte-identical: yes (every repetition)",
    ]


def bench_rows(cfg: dict, tmp: Path) -> list[str]:
    from t2i_fairness.base.cache import Cache, decode_array, encode_array
    from t2i_fairness.base.memo import FileEntries, Memo
    from t2i_fairness.base.rowstore import FeatureRows

    n = cfg["rows"]
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((n, 512)).astype(np.float32)
    keys = [f"{i:040x}" for i in range(n)]
    compute = lambda idx: [rows[i] for i in idx]  # noqa: E731 - an encoder that costs nothing
    times: dict[str, list[float]] = {"before": [], "after": []}
    reads: dict[str, list[float]] = {"before": [], "after": []}
    for rep in range(cfg["row_repeats"]):
        for side in (("before", "after") if rep % 2 == 0 else ("after", "before")):
            root = tmp / f"rows-{side}-{rep}"
            cache = Cache(root)
            store = FeatureRows(cache, legacy=False)
            entries = (FileEntries(cache, "features", "ns", ".npy", encode_array, decode_array) if side == "before"
                       else store.entries("ns"))
            memo = Memo(cache, "features", "ns", label="features:x", entries=entries)
            start = time.perf_counter()
            memo.get_many(keys, compute, batch_size=32)
            store.close()
            times[side].append(time.perf_counter() - start)
            cache2 = Cache(root)
            store2 = FeatureRows(cache2, legacy=False)
            entries2 = (FileEntries(cache2, "features", "ns", ".npy", encode_array, decode_array) if side == "before"
                        else store2.entries("ns"))
            start = time.perf_counter()
            got = Memo(cache2, "features", "ns", label="features:x", entries=entries2).get_many(keys, lambda idx: 1 / 0)
            reads[side].append(time.perf_counter() - start)
            store2.close()
            assert all(np.array_equal(g, r) for g, r in zip(got[:50], rows[:50]))
            shutil.rmtree(root)
    wb, wa = statistics.median(times["before"]), statistics.median(times["after"])
    rb, ra = statistics.median(reads["before"]), statistics.median(reads["after"])
    return [
        f"feature rows: {n} rows of 512 float32 through Memo.get_many (batches of 32), {cfg['row_repeats']} repetitions",
        f"  written  before (a .npy per row) {n / wb:9.0f} rows/s   after (row store) {n / wa:9.0f} rows/s   "
        f"x{wb / wa:.1f}",
        f"  read     before                  {n / rb:9.0f} rows/s   after             {n / ra:9.0f} rows/s   "
        f"x{rb / ra:.1f}",
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer images, rows and repetitions")
    ap.add_argument("--skip-ray", action="store_true", help="feature rows only (no Ray installed)")
    args = ap.parse_args()
    cfg = QUICK if args.quick else FULL
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    print(f"bench_distributed ({'quick' if args.quick else 'full'}); load average {os.getloadavg()[0]:.1f}; "
          f"{os.cpu_count()} CPUs; OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}", flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="bench-distributed-"))
    try:
        lines = bench_rows(cfg, tmp)
        if not args.skip_ray:
            lines = bench_generation(cfg, tmp) + lines
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for line in lines:
        print(line)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
