"""Benchmark of our generation loop (``ImageFactory``) against a bare loop on the same generator.

Run: ``python bench/bench_generation.py [--mode wait|tiny|cuda] [--quick]``.

Modes (``--mode``, default ``cuda`` when CUDA and ``--model`` are given, else ``wait``):

  * ``wait`` (CPU): a generator that holds the CPU idle for a GPU-like time per batch (it sleeps,
    as a thread waiting on a GPU does: ``--seconds-per-image``, default 0.172 s, the bare SD-1.5
    loop's 5.8 img/s on an H100 at fp16, 512 px, 20 steps) and returns 512 px images that PNG-encode
    like a diffusion model's (~500 kB, ~50 ms each). It measures what the GPU would otherwise wait
    for: our encoding, writes, locks and look-ups against the next batch's generation.
  * ``tiny`` (CPU): the tiny ``StableDiffusionPipeline`` (64 px): the per-batch costs of a real
    pipeline call; here the CPU is busy generating, so there is nothing to overlap with.
  * ``cuda``: ``--model FOLDER`` (a diffusers folder, e.g. SD-1.5 configs with random weights
    saved with ``save_pretrained``) at fp16 on CUDA, 512 px, 20 steps, batch 8.

Both sides drive the same generator object on the same prompts, with the same batch size and the
same per-image seeds (``derive_seed``):

  * bare: ``generator.generate(prompts, seeds)`` per canonical batch, images kept in memory;
  * ours (cold): ``ImageFactory.images`` on a fresh temporary cache: cache look-ups, canonical
    batches, a file lock per batch, PNG encoding and atomic (fsync + rename) writes on the writer
    threads, overlapping the next batch, stats;
  * ours (warm): the same call again on the now full cache (every image checked by decoding it).

Repetitions are interleaved (bare/ours, then ours/bare, ...) so machine load hits both sides alike;
the table prints medians and the ratio ours/bare per repetition and of the medians. It also checks
that both sides produce the same pixels.
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

SIZES = {  # (prompts, images per prompt, batch size, repetitions)
    "wait": {False: (4, 32, 8, 3), True: (2, 32, 8, 2)},
    "tiny": {False: (4, 16, 16, 5), True: (2, 8, 8, 3)},
    "cuda": {False: (4, 32, 8, 3), True: (2, 32, 8, 2)},
}
PROMPTS = ["a bag in Africa", "a car in Europe", "a house in Asia", "a stove in the Americas",
           "a toothbrush in West Asia", "a dog in Oceania"]


class WaitGenerator:
    """A stand-in for a GPU pipeline: sleeps ``seconds_per_image`` per image of a batch (the CPU
    idle, as a thread waiting on the GPU is) and returns ``size`` px images, one per seed, whose
    PNGs cost what a diffusion model's do (smooth colour plus noise: ~500 kB, ~50 ms at 512 px).

    Example:
        >>> g = WaitGenerator(0.0, size=16)
        >>> [im.size for im in g.generate(["a", "a"], [1, 2])], g.generate(["a"], [1])[0] == g.generate(["a"], [1])[0]
        ([(16, 16), (16, 16)], True)
    """

    def __init__(self, seconds_per_image: float, size: int = 512):
        self.seconds_per_image = float(seconds_per_image)
        self.size = size
        self.fingerprint = f"bench-wait:{size}px"
        y, x = np.mgrid[0:size, 0:size]
        base = np.stack([(x / 2) % 256, (y / 2) % 256, ((x + y) / 4) % 256], -1)
        noise = np.random.default_rng(0).normal(0, 6, base.shape)
        self.texture = np.clip(base + noise, 0, 255).astype(np.uint8)

    def generate(self, prompts, seeds):
        from PIL import Image

        time.sleep(self.seconds_per_image * len(prompts))
        out = [Image.fromarray(np.roll(self.texture, (int(s) % self.size, int(s) // self.size % self.size), (0, 1)))
               for s in seeds]
        self.returned = time.perf_counter()  # when the last batch came back (the bench's "tail" starts here)
        return out


def bare_loop(generator, prompts: list[str], n: int, batch_size: int) -> list:
    """What a user would write without the plugin: same canonical batches, same per-image seeds, no cache."""
    from t2i_fairness.spine.generation import derive_seed

    images = []
    for prompt in prompts:
        for start in range(0, n, batch_size):
            idx = range(start, min(n, start + batch_size))
            images.extend(generator.generate([prompt] * len(idx), [derive_seed(prompt, i) for i in idx]))
    return images


def build(mode: str, batch_size: int, args):
    """(generator, settings, description) of a mode."""
    from t2i_fairness.generators import GenerationSettings

    if mode == "wait":
        gen = WaitGenerator(args.seconds_per_image, args.size)
        settings = GenerationSettings(steps=20, guidance=7.5, height=args.size, width=args.size, batch_size=batch_size)
        return gen, settings, (f"GPU-like wait: {args.seconds_per_image * 1e3:.0f} ms/image asleep, "
                               f"{args.size} px images")
    from t2i_fairness.generators.diffusers_pipe import DiffusersGenerator

    if mode == "tiny":
        gen = DiffusersGenerator.tiny(GenerationSettings(batch_size=batch_size))
        s = gen.settings
        return gen, s, f"tiny StableDiffusionPipeline {s.height}x{s.width}, {s.steps} steps, CPU"
    if not args.model:
        raise SystemExit("--mode cuda needs --model FOLDER (a diffusers pipeline folder)")
    settings = GenerationSettings(steps=20, height=512, width=512, batch_size=batch_size)
    gen = DiffusersGenerator.from_pretrained(args.model, settings, "cuda")
    return gen, gen.settings, f"{args.model} on CUDA (fp16), {settings.height} px, {settings.steps} steps"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=("wait", "tiny", "cuda"), help="see above (default: cuda when "
                        "CUDA and --model are there, else wait)")
    parser.add_argument("--model", help="--mode cuda: a diffusers pipeline folder (SD-1.5 size)")
    parser.add_argument("--seconds-per-image", type=float, default=0.172,
                        help="--mode wait: seconds asleep per image (default 0.172: 5.8 img/s)")
    parser.add_argument("--size", type=int, default=512, help="--mode wait: image side in px (default 512)")
    parser.add_argument("--write-threads", type=int, default=None,
                        help="ImageFactory writer threads (default: its own; 0: write each batch before the next)")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # progress lines show up when piped to a file
    import torch

    mode = args.mode or ("cuda" if args.model and torch.cuda.is_available() else "wait")
    n_prompts, n, bs, repeats = SIZES[mode][args.quick]

    from t2i_fairness.generators import GeneratorSource
    from t2i_fairness.base.cache import Cache
    from t2i_fairness.spine.generation import ImageFactory
    from t2i_fairness.spine.workbench import _no_progress

    prompts = PROMPTS[:n_prompts]
    generator, settings, what = build(mode, bs, args)
    source = GeneratorSource(mode, generator.fingerprint, settings, lambda: generator, generator)
    total = len(prompts) * n
    device = torch.cuda.get_device_name(0) if mode == "cuda" else f"{os.cpu_count()} CPUs"
    print(f"torch {torch.__version__}, {device}, load average {os.getloadavg()[0]:.2f}, "
          f"mode={mode}{' (quick)' if args.quick else ''}")
    print(f"{what}; {len(prompts)} prompts x {n} images = {total} images, batch size {bs}, "
          f"{repeats} interleaved repetitions")

    # warm up kernels and the allocator at the benchmark's batch shape
    bare_loop(generator, prompts[:1], bs, bs)
    t_bare, t_cold, t_warm, t_tail = [], [], [], []
    same_pixels = True
    with tempfile.TemporaryDirectory(prefix="t2i-bench-gen-") as tmp:
        for rep in range(repeats):
            cache = Cache(Path(tmp) / f"cache{rep}")
            factory = ImageFactory(source, cache, 0, _no_progress, write_threads=args.write_threads)

            def ours():
                start = time.perf_counter()
                refs = factory.images(prompts, n)
                end = time.perf_counter()
                t_cold.append(end - start)
                if hasattr(generator, "returned"):
                    t_tail.append(end - generator.returned)
                return refs

            def bare():
                start = time.perf_counter()
                images = bare_loop(generator, prompts, n, bs)
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
                  f"ours/bare {t_cold[-1] / t_bare[-1]:6.3f}  warm {t_warm[-1] * 1e3:6.1f} ms  "
                  f"(load {os.getloadavg()[0]:.2f})")

    med_bare, med_cold, med_warm = (statistics.median(t) for t in (t_bare, t_cold, t_warm))
    ratios = [c / b for c, b in zip(t_cold, t_bare)]
    print(f"\n[generation] mode={mode}, {total} images, medians of {repeats} interleaved repetitions")
    print(f"    {'':34s}{'total':>9s}{'per image':>12s}")
    print(f"    {'bare loop':34s}{med_bare:8.3f}s{med_bare / total * 1e3:9.1f} ms")
    print(f"    {'ours, cold (generate + PNG + cache)':34s}{med_cold:8.3f}s{med_cold / total * 1e3:9.1f} ms")
    print(f"    {'ours, warm (all cached)':34s}{med_warm:8.3f}s{med_warm / total * 1e3:9.1f} ms")
    if t_tail:
        print(f"    of which the tail (last batch's PNGs and writes, after the last batch came back): "
              f"{statistics.median(t_tail) * 1e3:.0f} ms")
    print(f"    ours/bare: {med_cold / med_bare:.3f} of the medians, median per repetition "
          f"{statistics.median(ratios):.3f} (range {min(ratios):.3f} .. {max(ratios):.3f})")
    print(f"    warm run costs {med_warm / med_bare:.2%} of a bare generation; "
          f"same pixels as the bare loop: {same_pixels}")
    print(f"    load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())} (1, 5, 15 min)")


if __name__ == "__main__":
    main()
