"""Benchmark of t2i_fairness.metrics.manifold against the ``prdc`` package.

Run: ``python bench/bench_manifold.py [--quick]`` (uses all threads; takes minutes in full mode).

Prints, measured in one run:
  1. [speed] our ``prdc`` vs ``prdc.compute_prdc`` on the same float32 features (time ratio; whether the
     four numbers are identical, also against ``prdc`` on the float64 cast, our documented reference);
  2. [memory] peak RSS of a subprocess running our ``prdc`` on the large size (VmHWM and RUSAGE_CHILDREN);
  3. [throughput] our distance throughput as a fraction of this machine's float32 GEMM throughput: prdc's
     definition needs three distance matrices (real-real, fake-fake, real-fake), each one
     GEMM of the same shape, so fraction = 3 * t_gemm / t_ours.
Note: ``prdc`` hard-codes ``n_jobs=8`` for sklearn's pairwise distances.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plugin"))

FULL = {"compare": (10_000, 10_000, 2048), "memory": (30_000, 30_000, 2048), "k": 5}
QUICK = {"compare": (2_000, 2_000, 512), "memory": (5_000, 5_000, 512), "k": 5}
MEMORY_LIMIT_GB = 3.0
TARGET_SPEEDUP = 1.5


def features(n_real: int, n_fake: int, dim: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Inception-like features: non-negative, low-rank structure plus noise, float32."""
    rng = np.random.default_rng(seed)
    basis = rng.normal(size=(64, dim)).astype(np.float32) / 8.0

    def draw(n: int, shift: float) -> np.ndarray:
        out = np.empty((n, dim), dtype=np.float32)
        for start in range(0, n, 4096):
            m = min(n, start + 4096) - start
            z = rng.normal(size=(m, 64)).astype(np.float32) + shift
            noise = rng.normal(scale=0.3, size=(m, dim)).astype(np.float32)
            out[start : start + m] = np.maximum(z @ basis + noise, 0.0)
        return out

    return draw(n_real, 0.0), draw(n_fake, 0.15)


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - start


def package_prdc(real: np.ndarray, fake: np.ndarray, k: int) -> dict[str, float]:
    import prdc

    with contextlib.redirect_stdout(io.StringIO()):
        out = prdc.compute_prdc(real, fake, k)
    return {key: float(value) for key, value in out.items()}


def gemm_seconds(n_real: int, n_fake: int, dim: int, repeats: int = 3) -> float:
    import torch

    a = torch.randn(n_fake, dim)
    b = torch.randn(n_real, dim)
    torch.mm(a[:256], b.T)  # warm up
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(a, b.T)
        best = min(best, time.perf_counter() - start)
    return best


def child_memory(n_real: int, n_fake: int, dim: int, k: int) -> None:
    """Runs in a subprocess: our prdc on the large size; prints JSON with time and VmHWM."""
    from t2i_fairness.metrics.manifold import prdc

    real, fake = features(n_real, n_fake, dim, seed=1)
    inputs_gb = (real.nbytes + fake.nbytes) / 1e9
    before = _vm_hwm_gb()
    scores, seconds = timed(prdc, real, fake, k)
    print(json.dumps({"seconds": seconds, "vm_hwm_gb": _vm_hwm_gb(), "hwm_before_gb": before,
                      "inputs_gb": inputs_gb, "scores": scores}))


def _vm_hwm_gb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024 / 1e9
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--child-memory", nargs=4, type=int, metavar=("N_REAL", "N_FAKE", "DIM", "K"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_memory:
        child_memory(*args.child_memory)
        return

    import torch

    from t2i_fairness.metrics import manifold

    sizes = QUICK if args.quick else FULL
    k = sizes["k"]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} CPUs, "
          f"mode={'quick' if args.quick else 'full'}, k={k}")

    # 2. peak memory in a subprocess, first: a child's RUSAGE_CHILDREN peak also counts the
    # parent's memory at spawn time (vfork/exec keep the high-water mark), so spawn it while small
    big_real, big_fake, big_dim = sizes["memory"]
    cmd = [sys.executable, __file__, "--child-memory", str(big_real), str(big_fake), str(big_dim), str(k)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    child = json.loads(done.stdout.strip().splitlines()[-1])
    rusage_gb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024 / 1e9
    print(f"\n[memory] our prdc at {big_real} x {big_fake} x {big_dim} in a subprocess: {child['seconds']:.1f} s")
    print(f"    peak RSS {child['vm_hwm_gb']:.2f} GB (child's VmHWM; RUSAGE_CHILDREN {rusage_gb:.2f} GB), "
          f"of which {child['hwm_before_gb']:.2f} GB before the call (interpreter, torch, "
          f"{child['inputs_gb']:.2f} GB of input features); limit {MEMORY_LIMIT_GB} GB: "
          f"{'OK' if max(child['vm_hwm_gb'], rusage_gb) < MEMORY_LIMIT_GB else 'EXCEEDED'}")
    print(f"    scores {child['scores']}")

    # 1. speed and identity against the prdc package; GEMM timed right before and after ours
    n_real, n_fake, dim = sizes["compare"]
    real, fake = features(n_real, n_fake, dim)
    t_gemm_before = gemm_seconds(n_real, n_fake, dim)
    ours, t_ours = timed(manifold.prdc, real, fake, k, device="cpu")
    t_gemm_after = gemm_seconds(n_real, n_fake, dim)
    theirs, t_theirs = timed(package_prdc, real, fake, k)
    theirs64, t_theirs64 = timed(package_prdc, real.astype(np.float64), fake.astype(np.float64), k)
    pc, t_pc = timed(manifold.precision_coverage, real, fake, k, device="cpu")
    ref, t_build = timed(manifold.ReferenceManifold.build, real, k, device="cpu")
    pc_reuse, t_reuse = timed(manifold.precision_coverage, ref, fake, device="cpu")
    print(f"\n[speed] prdc at {n_real} real x {n_fake} fake x {dim} dims (float32 features)")
    print(f"    ours (t2i_fairness prdc)        {t_ours:8.2f} s  {ours}")
    print(f"    prdc.compute_prdc (float32)     {t_theirs:8.2f} s  {theirs}")
    print(f"    prdc.compute_prdc (float64 cast){t_theirs64:8.2f} s  {theirs64}")
    print(f"    speed-up vs prdc float32: {t_theirs / t_ours:.2f}x, vs prdc float64: {t_theirs64 / t_ours:.2f}x "
          f"(target >= {TARGET_SPEEDUP}x)")
    print(f"    identical to prdc(float64 cast): {ours == theirs64}; identical to prdc(float32): {ours == theirs}")
    print(f"    precision_coverage {t_pc:.2f} s; ReferenceManifold.build {t_build:.2f} s + reuse {t_reuse:.2f} s; "
          f"same numbers: {pc == pc_reuse == {m: ours[m] for m in ('precision', 'coverage')}}")

    # 3. throughput against this machine's GEMM
    t_gemm = (t_gemm_before + t_gemm_after) / 2
    flops = 2.0 * n_real * n_fake * dim
    print(f"\n[throughput] float32 GEMM {n_fake}x{dim} @ {dim}x{n_real}: {t_gemm:.2f} s "
          f"({flops / t_gemm / 1e9:.0f} GFLOP/s; {t_gemm_before:.2f} s before and {t_gemm_after:.2f} s after ours)")
    print(f"    ours: 3 distance matrices in {t_ours:.2f} s = {3 * t_gemm / t_ours:.0%} of GEMM throughput "
          f"({3 * flops / t_ours / 1e9:.0f} GFLOP/s effective)")


if __name__ == "__main__":
    main()
