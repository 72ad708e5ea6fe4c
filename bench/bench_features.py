"""Benchmark of feature extraction throughput: ``Workbench.features`` vs a bare model forward.

Run: ``python bench/bench_features.py [--quick]`` (``--quick``: the tiny encoders only).

For each encoder, on the same cached PNG images, interleaved repetitions measure (images/s):

  * bare forward: the model alone on input tensors preprocessed beforehand, same forward batch size;
  * decode + preprocess: reading the PNGs and building the input tensors, no forward;
  * cache writes: writing one ``.npy`` per image as the cache does (atomic: fsync + rename), no forward;
  * ours, cold: ``Workbench.features`` (the library's own method) on an empty feature cache:
    PNG decode, the adapter's preprocessing, the forward pass, one ``.npy`` per image written
    atomically (fsync + rename);
  * ours, warm: the same call on the now full feature cache (reads only).

Then ``[cache reads]`` (``--reads-only`` runs only it): what checking a cached image on read costs,
per 1000 images, without a check (fetch and read), with the index check every read does now (the
bytes' SHA-256 against the entry written with the image, issue #30) and with the full PNG decode
reads did before the index; printed as ratios to the read alone.

Encoders: the tiny CLIP (open_clip ViT, 64 px) and tiny InceptionV3 (75 px) of ``--t2i-scorers tiny``
on 64x64 images (the tiny generator's size); in full mode also the paper-size architectures with
seeded random weights on 512x512 images (the paper generators' size): open_clip ViT-B-32 at 224 px
and torchvision InceptionV3 at 299 px. Random weights cost the same FLOPs as the real ones.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plugin"))

FULL = {"tiny_images": 256, "paper_images": 48, "repeats": 5, "paper_repeats": 3, "paper": True}
QUICK = {"tiny_images": 96, "paper_images": 0, "repeats": 3, "paper_repeats": 0, "paper": False}
WORKBENCH_BATCH = 32  # Workbench.features' default chunk


def make_images(root: Path, n: int, size: int, seed: int = 0) -> list:
    """PNG files of smooth random images, as ``ImageRef``s (what ``Workbench.features`` reads)."""
    from PIL import Image

    from t2i_fairness.base.cache import encode_png
    from t2i_fairness.spine.generation import ImageRef

    rng = np.random.default_rng(seed)
    refs = []
    for i in range(n):
        small = rng.integers(0, 256, size=(8, 8, 3), dtype=np.uint8)
        image = Image.fromarray(small).resize((size, size), Image.BICUBIC)
        key = f"{size:04d}{i:036d}"
        path = root / "images" / key[:2] / f"{key}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(encode_png(image))
        refs.append(ImageRef(key, path, "bench", i, i))
    return refs


class Side:
    """An encoder with the three code paths the benchmark compares."""

    def __init__(self, name: str, encoder, forward_batch: int, preprocess, forward):
        self.name, self.encoder, self.forward_batch = name, encoder, forward_batch
        self.preprocess, self.forward = preprocess, forward


def clip_side(name: str, model) -> Side:
    import torch

    def preprocess(images):
        return torch.stack([model.preprocess(im.convert("RGB")) for im in images])

    def forward(x):
        with torch.inference_mode():
            feats = model.model.encode_image(x).float()
        return (feats / feats.norm(dim=-1, keepdim=True)).numpy()

    return Side(name, model, WORKBENCH_BATCH, preprocess, forward)


def inception_side(name: str, model) -> Side:
    import torch

    def preprocess(images):
        return torch.from_numpy(model.preprocess(images))

    def forward(x):
        with torch.inference_mode():
            model._pool.clear()
            logits = model.model(x)
            pool = model._pool.pop().flatten(1)
            torch.softmax(logits.float(), dim=1)
        return pool.numpy()

    return Side(name, model, model.batch_size, preprocess, forward)


def encoders(paper: bool) -> list[tuple[Side, str]]:
    """(side, image profile) pairs; paper-size architectures get random weights."""
    from t2i_fairness.models.clip import ClipModel
    from t2i_fairness.models.inception import InceptionFeatures

    out = [(clip_side("CLIP tiny (ViT 64 px)", ClipModel.from_profile("tiny")), "tiny"),
           (inception_side("InceptionV3 tiny (75 px)", InceptionFeatures.from_profile("tiny")), "tiny")]
    if paper:
        import open_clip
        import torch

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            model, _, preprocess = open_clip.create_model_and_transforms("ViT-B-32", pretrained=None)
        clip = ClipModel(model, preprocess, None, "open_clip:ViT-B-32:random-bench")
        out.append((clip_side("CLIP ViT-B-32 (224 px, random)", clip), "paper"))
        inception = InceptionFeatures.from_profile("tiny", image_size=299)  # paper architecture and size
        out.append((inception_side("InceptionV3 (299 px, random)", inception), "paper"))
    return out


def bench_one(side: Side, refs: list, repeats: int, tmp: Path) -> dict[str, list[float]]:
    from t2i_fairness.base.cache import Cache
    from t2i_fairness.spine.workbench import Workbench, _no_progress

    tensors = [side.preprocess([r.load() for r in refs[s : s + side.forward_batch]])
               for s in range(0, len(refs), side.forward_batch)]
    side.forward(tensors[0][:2])  # warm up
    times: dict[str, list[float]] = {"bare forward": [], "decode + preprocess": [], "cache writes": [],
                                     "ours, cold": [], "ours, warm": []}
    reference = None

    def bare():
        start = time.perf_counter()
        feats = np.concatenate([side.forward(x) for x in tensors])
        times["bare forward"].append(time.perf_counter() - start)
        return feats

    def prep():
        start = time.perf_counter()
        for s in range(0, len(refs), WORKBENCH_BATCH):
            side.preprocess([r.load() for r in refs[s : s + WORKBENCH_BATCH]])
        times["decode + preprocess"].append(time.perf_counter() - start)

    def writes(rep: int, feats: np.ndarray):
        from t2i_fairness.base.cache import atomic_write_bytes, encode_array

        start = time.perf_counter()
        for r, f in zip(refs, feats):
            atomic_write_bytes(tmp / f"writes-{rep}-{id(side)}" / r.key[:2] / f"{r.key}.npy", encode_array(f))
        times["cache writes"].append(time.perf_counter() - start)

    for rep in range(repeats):
        shell = SimpleNamespace(cache=Cache(tmp / f"features-{rep}-{id(side)}"), progress=_no_progress)

        def ours():
            start = time.perf_counter()
            feats = Workbench.features(shell, side.encoder, refs, batch_size=WORKBENCH_BATCH)
            times["ours, cold"].append(time.perf_counter() - start)
            return feats

        order = [bare, prep, ours] if rep % 2 == 0 else [ours, prep, bare]
        results = {fn: fn() for fn in order}
        writes(rep, results[bare])
        start = time.perf_counter()
        warm = Workbench.features(shell, side.encoder, refs, batch_size=WORKBENCH_BATCH)
        times["ours, warm"].append(time.perf_counter() - start)
        reference = results[bare]
        if not np.array_equal(warm, results[ours]):
            print(f"    WARNING: {side.name}: warm features differ from the cold ones")
        close = np.allclose(results[ours], reference, rtol=1e-4, atol=1e-5)
        if not close:
            print(f"    WARNING: {side.name}: ours and bare features differ "
                  f"(max |diff| {np.abs(results[ours] - reference).max():.2e})")
    return times


def bench_reads(root: Path, refs: list, repeats: int) -> dict[str, list[float]]:
    """Seconds to look at cached images the way a run does before using them, interleaved repetitions:

    * no check: the file fetched and read (what reading an image costs anyway);
    * index check: :meth:`ImageFactory.states`: read, SHA-256, one row-store lookup per batch of 16
      against the entry written with the image (what a read does now);
    * decode check: read and a full PNG decode (what a read did before the index).
    """
    from t2i_fairness.base.cache import Cache, decode_png
    from t2i_fairness.base.memo import no_progress
    from t2i_fairness.base.rowstore import ImageIndex
    from t2i_fairness.spine.generation import ImageFactory

    cache = Cache(root)
    factory = ImageFactory(SimpleNamespace(settings=SimpleNamespace(batch_size=16), item_key=None), cache, 0, no_progress)
    factory.index.add(ImageIndex.entry(r.key, r.path.read_bytes()) for r in refs)  # as written by the generator
    batches = [refs[i:i + 16] for i in range(0, len(refs), 16)]

    def no_check():
        for r in refs:
            cache.fetch(r.path)
            r.path.read_bytes()

    def index_check():
        for batch in batches:
            assert all(factory.states(batch))

    def decode_check():
        for r in refs:
            cache.fetch(r.path)
            decode_png(r.path.read_bytes())

    sides = {"no check": no_check, "index check": index_check, "decode check": decode_check}
    times: dict[str, list[float]] = {k: [] for k in sides}
    index_check()  # the row store's first scan, untimed
    for rep in range(repeats):
        for name in (list(sides) if rep % 2 == 0 else list(sides)[::-1]):
            start = time.perf_counter()
            sides[name]()
            times[name].append(time.perf_counter() - start)
    factory.index.store.close()
    return times


def print_reads(images: dict, tmp: Path, repeats: int) -> None:
    print("\n[cache reads] checking cached images on read: median seconds per 1000 images (interleaved repetitions); "
          "ratio = with the check / without")
    print(f"    {'images':>12s}{'no check':>10s}{'index check':>13s}{'decode check':>14s}{'index/no':>10s}{'decode/no':>11s}")
    for profile, refs in images.items():
        t = {k: statistics.median(v) * 1000 / len(refs) for k, v in bench_reads(tmp / f"reads-{profile}", refs, repeats).items()}
        px = refs[0].load().size[0]
        print(f"    {f'{len(refs)}x{px}px':>12s}{t['no check']:10.3f}{t['index check']:13.3f}{t['decode check']:14.3f}"
              f"{t['index check'] / t['no check']:10.2f}{t['decode check'] / t['no check']:11.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny encoders only, fewer images")
    parser.add_argument("--reads-only", action="store_true", help="only the cache-read check (no encoder)")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # progress lines show up when piped to a file
    sizes = QUICK if args.quick else FULL
    if args.reads_only:
        with tempfile.TemporaryDirectory(prefix="t2i-bench-reads-") as tmp_name:
            tmp = Path(tmp_name)
            images = {"tiny": make_images(tmp, 4 * sizes["tiny_images"], 64)}
            if sizes["paper"]:
                images["paper"] = make_images(tmp, 4 * sizes["paper_images"], 512, seed=1)
            print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs")
            print_reads(images, tmp, max(5, sizes["repeats"]))
        return

    import torch

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f}, mode={'quick' if args.quick else 'full'}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="t2i-bench-feat-") as tmp_name:
        tmp = Path(tmp_name)
        images = {"tiny": make_images(tmp, sizes["tiny_images"], 64)}
        if sizes["paper"]:
            images["paper"] = make_images(tmp, sizes["paper_images"], 512, seed=1)
        for side, profile in encoders(sizes["paper"]):
            refs = images[profile]
            repeats = sizes["repeats"] if profile == "tiny" else sizes["paper_repeats"]
            times = bench_one(side, refs, repeats, tmp)
            med = {k: statistics.median(v) for k, v in times.items()}
            ratios = [o / b for o, b in zip(times["ours, cold"], times["bare forward"])]
            rows.append((side.name, len(refs), refs[0].load().size[0], repeats, med, statistics.median(ratios)))
            print(f"  {side.name}: done, {len(refs)} images x {repeats} reps (load {os.getloadavg()[0]:.2f})")

    print(f"\n[features] throughput in images/s (median of interleaved repetitions); overhead = ours cold / bare - 1")
    print(f"    {'encoder':31s}{'images':>10s}{'bare fwd':>10s}{'decode+pre':>12s}{'writes':>9s}{'ours cold':>11s}"
          f"{'ours warm':>11s}{'overhead':>10s}")
    for name, n, px, _, med, ratio in rows:
        ips = {k: n / v for k, v in med.items()}
        print(f"    {name:31s}{f'{n}x{px}px':>10s}{ips['bare forward']:10.1f}{ips['decode + preprocess']:12.1f}"
              f"{ips['cache writes']:9.0f}"
              f"{ips['ours, cold']:11.1f}{ips['ours, warm']:11.0f}{ratio - 1:+10.1%}")
    with tempfile.TemporaryDirectory(prefix="t2i-bench-reads-") as tmp_name:
        tmp = Path(tmp_name)
        images = {"tiny": make_images(tmp, sizes["tiny_images"], 64)}
        if sizes["paper"]:
            images["paper"] = make_images(tmp, sizes["paper_images"], 512, seed=1)
        print_reads(images, tmp, sizes["repeats"])
    print(f"    load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())} (1, 5, 15 min)")


if __name__ == "__main__":
    main()
