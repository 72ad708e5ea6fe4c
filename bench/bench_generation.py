"""Benchmark of our generation loop (``ImageFactory``) against a bare diffusers loop.

Run: ``python bench/bench_generation.py [--quick]`` (a few minutes in full mode on 2 CPU cores).

Both sides drive the same tiny ``StableDiffusionPipeline`` object (built once) on the same prompts,
with the same batch size, the same per-image seeded ``torch.Generator`` (seeds from ``derive_seed``)
and the same torch thread count:

  * bare: ``pipe(prompts, generator=[...], output_type="pil")`` per batch, images kept in memory;
  * ours (cold): ``ImageFactory.images`` on a fresh temporary cache: cache look-ups, canonical
    batches, a file lock per batch, PNG encoding, atomic (fsync + rename) writes, stats;
  * ours (warm): the same call again on the now full cache (every image checked by decoding it).

Repetitions are interleaved (bare/ours, then ours/bare, ...) so machine load hits both sides alike;
the table prints medians and the overhead ``ours / bare - 1`` per repetition and of the medians.
It also checks that both sides produce the same pixels.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plugin"))

FULL = {"prompts": 4, "images": 16, "batch_size": 16, "repeats": 5}
QUICK = {"prompts": 2, "images": 8, "batch_size": 8, "repeats": 3}
PROMPTS = ["a bag in Africa", "a car in Europe", "a house in Asia", "a stove in the Americas",
           "a toothbrush in West Asia", "a dog in Oceania"]


def bare_loop(pipe, prompts: list[str], n: int, batch_size: int, settings, threads: int) -> list:
    """What a user would write without the plugin: same batches, same per-image seeds, no cache."""
    import torch

    from t2i_fairness.spine.generation import derive_seed

    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    images = []
    try:
        for prompt in prompts:
            for start in range(0, n, batch_size):
                idx = range(start, min(n, start + batch_size))
                gens = [torch.Generator("cpu").manual_seed(derive_seed(prompt, i)) for i in idx]
                with torch.inference_mode():
                    out = pipe([prompt] * len(idx), generator=gens, num_inference_steps=settings.steps,
                               guidance_scale=settings.guidance, height=settings.height, width=settings.width,
                               output_type="pil")
                images.extend(out.images)
    finally:
        torch.set_num_threads(previous)
    return images


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # progress lines show up when piped to a file
    sizes = QUICK if args.quick else FULL

    import torch

    from t2i_fairness.base.cache import Cache
    from t2i_fairness.spine.generation import ImageFactory
    from t2i_fairness.generators import GenerationSettings, GeneratorSource
    from t2i_fairness.generators.diffusers_pipe import DiffusersGenerator
    from t2i_fairness.spine.workbench import _no_progress

    n, bs, repeats = sizes["images"], sizes["batch_size"], sizes["repeats"]
    prompts = PROMPTS[: sizes["prompts"]]
    generator = DiffusersGenerator.tiny(GenerationSettings(batch_size=bs))
    settings = generator.settings
    threads = generator.num_threads or torch.get_num_threads()
    source = GeneratorSource("tiny", generator.fingerprint, settings, lambda: generator, generator)
    total = len(prompts) * n
    print(f"torch {torch.__version__}, {threads} threads while generating, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f}, mode={'quick' if args.quick else 'full'}")
    print(f"tiny StableDiffusionPipeline {settings.height}x{settings.width}, {settings.steps} steps, "
          f"{len(prompts)} prompts x {n} images = {total} images, batch size {bs}, {repeats} interleaved repetitions")

    # warm up kernels and the allocator at the benchmark's batch shape, through both code paths
    bare_loop(generator.pipe, prompts[:1], bs, bs, settings, threads)
    generator.generate(["warm-up"] * bs, list(range(bs)))
    t_bare, t_cold, t_warm = [], [], []
    same_pixels = True
    with tempfile.TemporaryDirectory(prefix="t2i-bench-gen-") as tmp:
        for rep in range(repeats):
            cache = Cache(Path(tmp) / f"cache{rep}")
            factory = ImageFactory(source, cache, 0, _no_progress)

            def ours():
                start = time.perf_counter()
                refs = factory.images(prompts, n)
                t_cold.append(time.perf_counter() - start)
                return refs

            def bare():
                start = time.perf_counter()
                images = bare_loop(generator.pipe, prompts, n, bs, settings, threads)
                t_bare.append(time.perf_counter() - start)
                return images

            if rep % 2 == 0:
                images, refs = bare(), ours()
            else:
                refs, images = ours(), bare()
            start = time.perf_counter()
            warm = factory.images(prompts, n)
            t_warm.append(time.perf_counter() - start)
            assert cache.stats.generated == total and cache.stats.from_cache == total, cache.stats
            flat = [r for row in warm for r in row]
            same_pixels &= all(np.array_equal(np.asarray(r.load()), np.asarray(im.convert("RGB")))
                               for r, im in zip(flat, images))
            print(f"  rep {rep}: bare {t_bare[-1]:6.2f} s  ours {t_cold[-1]:6.2f} s  "
                  f"overhead {t_cold[-1] / t_bare[-1] - 1:+6.1%}  warm {t_warm[-1] * 1e3:6.1f} ms  "
                  f"(load {os.getloadavg()[0]:.2f})")

    med_bare, med_cold, med_warm = (statistics.median(t) for t in (t_bare, t_cold, t_warm))
    ratios = [c / b for c, b in zip(t_cold, t_bare)]
    print(f"\n[generation] {total} images, medians of {repeats} interleaved repetitions")
    print(f"    {'':34s}{'total':>9s}{'per image':>12s}")
    print(f"    {'bare diffusers loop':34s}{med_bare:8.3f}s{med_bare / total * 1e3:9.1f} ms")
    print(f"    {'ours, cold (generate + PNG + cache)':34s}{med_cold:8.3f}s{med_cold / total * 1e3:9.1f} ms")
    print(f"    {'ours, warm (all cached)':34s}{med_warm:8.3f}s{med_warm / total * 1e3:9.1f} ms")
    print(f"    overhead ours/bare - 1: {med_cold / med_bare - 1:+.1%} of the medians, "
          f"median per-repetition {statistics.median(ratios) - 1:+.1%} "
          f"(range {min(ratios) - 1:+.1%} .. {max(ratios) - 1:+.1%})")
    print(f"    warm run costs {med_warm / med_bare:.2%} of a bare generation; "
          f"same pixels as the bare loop: {same_pixels}")
    print(f"    load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())} (1, 5, 15 min)")


if __name__ == "__main__":
    main()
