"""Does the procedural world let the statistics be seen? Per-region precision/coverage at two seeds.

Run: ``python bench/bench_procedural_world.py [--seeds 0 1] [--templates object_in_region object]
[--features inception pixels] [--bootstrap 200]``.

It rebuilds, outside pytest, what ``test_region_precision`` / ``test_region_coverage`` compute at the
smoke defaults: the 6 smoke objects, the synthetic reference (10 images per object-region, seed 0),
6 images per prompt with seeds ``derive_seed(prompt, index, base_seed)``, k = 3, ``drop_all``
de-duplication, and ``group_generated`` to form each region's generated set (``{object}`` prompts are
sampled to each region's object mix). Values come from the project's own
``metrics.manifold.precision_coverage``; the interval is the percentile bootstrap over generated
images of the membership matrix (``dig.membership``), as the gate fixtures compute it. Feature spaces:
the tiny-profile InceptionV3 (seeded random weights, 75 px) and raw pixels (16x16 RGB, flattened).

It prints one row per (feature space, template, region) with the value and interval at each seed,
and a summary: how many values differ between the seeds, how many are exactly 0 or 1, how many
intervals have zero width. It makes no assertion; tests/test_procedural.py does.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plugin"))

from t2i_fairness.references.grouping import PromptSpace, group_generated  # noqa: E402
from t2i_fairness.spine.generation import derive_seed  # noqa: E402
from t2i_fairness.generators.procedural import ProceduralGenerator  # noqa: E402
from t2i_fairness.metrics.manifold import ball_membership as membership, precision_coverage, real_radii  # noqa: E402
from t2i_fairness.metrics.stats import index_bootstrap  # noqa: E402
from t2i_fairness.spine.options import SMOKE_IMAGES_PER_PROMPT, SMOKE_OBJECTS  # noqa: E402
from t2i_fairness.references.sets import open_image, synthetic_reference  # noqa: E402
from t2i_fairness.references.library import SYNTHETIC_PER_GROUP  # noqa: E402


def pixel_features(images) -> np.ndarray:
    return np.stack([np.asarray(im.convert("RGB").resize((16, 16)), dtype=np.float32).ravel() / 255 for im in images])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--templates", nargs="+", default=["object_in_region", "object"])
    ap.add_argument("--features", nargs="+", default=["inception", "pixels"], choices=["inception", "pixels"])
    ap.add_argument("--images-per-prompt", type=int, default=SMOKE_IMAGES_PER_PROMPT)
    ap.add_argument("--bootstrap", type=int, default=200)
    ap.add_argument("--k", type=int, default=3)
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    ref = synthetic_reference(list(SMOKE_OBJECTS), None, per_group=SYNTHETIC_PER_GROUP, seed=0)
    ref_images = [open_image(r) for r in ref.records]
    gen = ProceduralGenerator()
    space = PromptSpace.from_reference(ref, SMOKE_OBJECTS)
    encoders = {}
    if "inception" in args.features:
        from t2i_fairness.models.inception import InceptionFeatures

        inc = InceptionFeatures.from_profile("tiny", "cpu")
        encoders["inception"] = inc.encode_images
    if "pixels" in args.features:
        encoders["pixels"] = pixel_features
    real = {name: enc(ref_images) for name, enc in encoders.items()}
    by_region = ref.groups_by_region()
    rows_of = {rec: i for i, rec in enumerate(ref.records)}

    results = {}  # (feat, template, region) -> {seed: (p, c, p_iv, c_iv)}
    for template in args.templates:
        prompts = space.prompts(template)
        for base in args.seeds:
            images, pairs = [], []
            for p in prompts:
                seeds = [derive_seed(p.text, i, base) for i in range(args.images_per_prompt)]
                start = len(images)
                images += gen.generate([p.text] * len(seeds), seeds)
                pairs.append((p, list(range(start, len(images)))))
            groups = group_generated(pairs, template, ref, "region", base)
            for feat, enc in encoders.items():
                fake_all = enc(images)
                for region, fake_rows in groups.items():
                    real_f = real[feat][[rows_of[r] for r in by_region[region]]]
                    fake_f = fake_all[fake_rows]
                    pc = precision_coverage(real_f, fake_f, args.k, dedupe="drop_all", device="cpu", group=region)
                    m = membership(real_f, real_radii(real_f, args.k), fake_f)
                    p_iv = index_bootstrap(lambda idx: m[idx].any(1).mean(), len(fake_f), n_resamples=args.bootstrap, seed=base)
                    c_iv = index_bootstrap(lambda idx: m[idx].any(0).mean(), len(fake_f), n_resamples=args.bootstrap, seed=base)
                    results.setdefault((feat, template, region), {})[base] = (pc["precision"], pc["coverage"], p_iv, c_iv)

    s0, s1 = args.seeds[0], args.seeds[1] if len(args.seeds) > 1 else args.seeds[0]
    print(f"procedural world, {len(SMOKE_OBJECTS)} objects x {args.images_per_prompt} images/prompt, reference "
          f"{SYNTHETIC_PER_GROUP}/object-region, k={args.k}, drop_all, bootstrap {args.bootstrap}")
    fmt = lambda v, iv: f"{v:.3f} [{iv[0]:.3f}, {iv[1]:.3f}]"  # noqa: E731
    print(f"{'features':9s} {'template':17s} {'region':15s} "
          + "  ".join(f"{'precision s' + str(s):>24s}  {'coverage s' + str(s):>24s}" for s in args.seeds))
    n = differ = extreme = zero_width = 0
    for (feat, template, region), by_seed in results.items():
        cells = []
        for s in args.seeds:
            p, c, p_iv, c_iv = by_seed[s]
            cells.append(f"{fmt(p, p_iv):>24s}  {fmt(c, c_iv):>24s}")
            for v, iv in ((p, p_iv), (c, c_iv)):
                n += 1
                extreme += v in (0.0, 1.0)
                zero_width += iv[0] == iv[1]
        differ += (by_seed[s0][0] != by_seed[s1][0]) + (by_seed[s0][1] != by_seed[s1][1])
        print(f"{feat:9s} {template:17s} {region:15s} " + "  ".join(cells))
    pairs_n = n // len(args.seeds)
    print(f"\n{n} values: {differ}/{pairs_n} differ between seeds {s0} and {s1}; {extreme} exactly 0 or 1; "
          f"{zero_width} zero-width intervals ({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
