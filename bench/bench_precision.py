"""How much half precision moves each adapter's outputs, against float32, on CPU.

Run: ``python bench/bench_precision.py [--images N]`` (about a minute on 2 cores at the default 48).

For each adapter of ``--t2i-scorers tiny`` built at float32, float16 and bfloat16 (the same code the
CUDA path runs: :mod:`t2i_fairness.models.precision`), on the same images or texts:

* the largest absolute difference of a feature value against float32, and of the features' scale
  (the largest float32 value), and the smallest cosine between a row and its float32 row;
* for the image feature spaces of DIG In (Inception, CLIP): precision and coverage (k = 3) of one
  set of images against another, at each precision: how much a gate value moves;
* the segmenter: the share of mask pixels that differ; the captioner: captions that differ;
  the masked LM: top-5 replacement lists that differ.

Weights are the tiny profile's (seeded random, except the sentence encoder, which is the real
all-MiniLM-L6-v2): rounding moves random features about as much as trained ones, but the gate values
are those of meaningless models. The figures are in docs/precision.md.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from PIL import Image, ImageDraw

HALF = ("float16", "bfloat16")


def scenes(n: int, seed: int) -> list[Image.Image]:
    """Coloured rectangles on plain backgrounds, 64 px (the tiny generator's size)."""
    r = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        image = Image.new("RGB", (64, 64), tuple(int(c) for c in r.integers(0, 255, 3)))
        x0, y0 = (int(v) for v in r.integers(0, 32, 2))
        ImageDraw.Draw(image).rectangle([x0, y0, x0 + 24, y0 + 24], fill=tuple(int(c) for c in r.integers(0, 255, 3)))
        noise = r.normal(0, 12, (64, 64, 3))
        out.append(Image.fromarray(np.clip(np.asarray(image) + noise, 0, 255).astype(np.uint8)))
    return out


def feature_change(ref: np.ndarray, got: np.ndarray) -> tuple[float, float, float]:
    """(max |diff|, max |ref|, min cosine of a row with its reference row)."""
    ok = ~np.isnan(ref).any(1)
    ref, got = ref[ok].astype(np.float64), got[ok].astype(np.float64)
    cos = (ref * got).sum(1) / (np.linalg.norm(ref, axis=1) * np.linalg.norm(got, axis=1))
    return float(np.abs(ref - got).max()), float(np.abs(ref).max()), float(cos.min())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=48, help="images per set (two sets)")
    args = parser.parse_args(argv)

    import torch

    from t2i_fairness.metrics.manifold import precision_coverage
    from t2i_fairness.models.captioner import Blip2Captioner
    from t2i_fairness.models.clip import ClipModel
    from t2i_fairness.models.inception import InceptionFeatures
    from t2i_fairness.models.masked_lm import MaskedLMReplacer
    from t2i_fairness.models.segmenter import LangSAMSegmenter
    from t2i_fairness.models.sentence import SentenceEncoder
    from t2i_fairness.models.vit import MaskedViTFeatures

    torch.set_num_threads(2)
    real, fake = scenes(args.images, 1), scenes(args.images, 2)
    texts = ["a photo of a dog", "a respected doctor at the hospital", "a car in Africa", "a cooking pot on a stove",
             "a tree in a field at dusk", "a bag on a table"]
    print(f"torch {torch.__version__}, CPU, {args.images} + {args.images} images of 64 px")
    print(f"{'adapter':<22}{'precision':<10}{'max|diff|':>11}{'max|f32|':>10}{'min cos':>10}  gate values")

    def image_space(name: str, build) -> None:
        out = {}
        for p in ("float32",) + HALF:
            enc = build(p)
            r, f = enc.encode_images(real), enc.encode_images(fake)
            pc = precision_coverage(r, f, 3)
            out[p] = (r, f, pc)
            if p == "float32":
                print(f"{name:<22}{p:<10}{'':>11}{np.abs(r).max():>10.3g}{'':>10}  "
                      f"precision {pc['precision']:.4f} coverage {pc['coverage']:.4f}")
                continue
            d, scale, cos = feature_change(np.vstack(out['float32'][:2]), np.vstack([r, f]))
            ref = out["float32"][2]
            print(f"{name:<22}{p:<10}{d:>11.3g}{scale:>10.3g}{cos:>10.6f}  precision {pc['precision']:.4f} "
                  f"({pc['precision'] - ref['precision']:+.4f}) coverage {pc['coverage']:.4f} "
                  f"({pc['coverage'] - ref['coverage']:+.4f})")

    t0 = time.perf_counter()
    image_space("inception (tiny)", lambda p: InceptionFeatures.from_profile("tiny", precision=p))
    image_space("clip image (tiny)", lambda p: ClipModel.from_profile("tiny", precision=p))

    def rows(name: str, build, run) -> None:
        ref = None
        for p in ("float32",) + HALF:
            got = run(build(p))
            if ref is None:
                ref = got
                print(f"{name:<22}{p:<10}{'':>11}{np.nanmax(np.abs(got)):>10.3g}")
                continue
            d, scale, cos = feature_change(ref, got)
            print(f"{name:<22}{p:<10}{d:>11.3g}{scale:>10.3g}{cos:>10.6f}")

    mask = np.zeros((64, 64), bool)
    mask[8:40, 8:40] = True
    rows("vit obj (tiny)", lambda p: MaskedViTFeatures.from_profile("tiny", precision=p),
         lambda m: m.encode(real, [mask] * len(real), "obj"))
    rows("clip text (tiny)", lambda p: ClipModel.from_profile("tiny", precision=p), lambda m: m.encode_texts(texts))
    rows("sentence (MiniLM)", lambda p: SentenceEncoder.from_profile("tiny", precision=p), lambda m: m.encode_texts(texts))
    blip = {p: Blip2Captioner.from_profile("tiny", precision=p) for p in ("float32",) + HALF}
    rows("blip-2 vision (tiny)", lambda p: blip[p].image_features(), lambda m: m.encode_images(real))
    caps = {p: blip[p].caption(real[:8]) for p in blip}
    seg = {p: LangSAMSegmenter.from_profile("tiny", precision=p, box_threshold=0.3) for p in ("float32",) + HALF}
    masks = {p: np.stack([seg[p].segment(im, "bag") for im in real[:8]]) for p in seg}
    mlm = {p: MaskedLMReplacer.from_profile("tiny", precision=p) for p in ("float32",) + HALF}
    words = texts[1].split()
    repl = {p: [tuple(mlm[p].replacements(words, i, 5)) for i in range(len(words))] for p in mlm}
    for p in HALF:
        print(f"{'segmenter (tiny)':<22}{p:<10} mask pixels differing: {np.mean(masks[p] != masks['float32']):.4f} "
              f"(of {masks[p].size}; float32 masks cover {masks['float32'].mean():.3f})")
        print(f"{'captioner (tiny)':<22}{p:<10} captions differing: {sum(a != b for a, b in zip(caps[p], caps['float32']))}/8")
        print(f"{'masked LM (tiny)':<22}{p:<10} top-5 lists differing: "
              f"{sum(a != b for a, b in zip(repl[p], repl['float32']))}/{len(words)}")
    print(f"({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
