"""Measure what each model holds, and compare it with the estimate the run checks before loading it.

For each model (a scorer kind at a profile, or a generator config), in a child process of its own:
resident memory after the imports, after building the model (its weights), and the peak over that
while it runs a forward pass at batch 1 and at the batch the adapter runs (its activations); then the
estimate (:class:`~t2i_fairness.base.memory.MemoryNeed`: parameters counted on the meta device, the
activations of the config's ``_memory`` note) beside the measured peak, and the ratio.

    .venv/bin/python bench/bench_memory.py                         # every scorer at paper-random, the generators
    .venv/bin/python bench/bench_memory.py --models vit:paper-random,generator:sd15-random:128
    .venv/bin/python bench/bench_memory.py --profile tiny

The per-item and fixed activation figures it prints are what the configs' ``_memory`` notes hold
(``model_configs/<kind>-<profile>.json``; the generator's per image at a size, and the exponent fitted
between two sizes). One model at a time: never several paper-size models at once.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

SCORERS = ("inception", "vit", "clip", "segmenter", "captioner", "masked_lm", "sentence")
RUN_BATCH = {"inception": 16, "vit": 32, "clip": 32, "segmenter": 1, "captioner": 8, "masked_lm": 1, "sentence": 32}
GiB = 1024 ** 3


def _status(key: str) -> int:
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return 0


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as fh:  # resets VmHWM to the current RSS (Linux)
        fh.write("5")


def child(spec: str) -> dict:
    """Build one model and run it at batch 1 and at its run batch; the sizes in bytes."""
    import numpy as np
    import torch
    from PIL import Image

    torch.set_num_threads(2)
    parts = spec.split(":")
    kind, profile = parts[0], parts[1]
    out: dict = {"model": spec}
    images = [Image.fromarray((np.random.RandomState(i).rand(512, 512, 3) * 255).astype("uint8")) for i in range(32)]
    if kind == "generator":
        from t2i_fairness.generators import GenerationSettings, resolve_generator
        from t2i_fairness.generators.diffusers_pipe import diffusers_need
        from t2i_fairness.spine.generation import derive_seed

        px = int(parts[2]) if len(parts) > 2 else 64
        batches = (1, 2)
        settings = GenerationSettings(steps=2, height=px, width=px, batch_size=2)
        source = resolve_generator(profile, settings, "cpu", derive_seed)
        need = diffusers_need(profile, source.settings, "cpu", "float32", config_name="tiny-sd" if profile == "tiny" else profile)
        out.update(imported=_status("VmRSS"))
        _reset_peak()
        model = source.get()
        run = lambda b: model.generate(["a bag in Africa"] * b, list(range(b)))  # noqa: E731
        out["px"] = px
    else:
        from t2i_fairness.models.memory import scorer_need
        from t2i_fairness.models.registry import scorer_kind

        batches = (1, RUN_BATCH[kind]) if RUN_BATCH[kind] > 1 else (1,)
        need = scorer_need(kind, profile, "cpu", "float32")
        cls = scorer_kind(kind).adapter_class()
        out.update(imported=_status("VmRSS"))
        _reset_peak()
        model = cls.from_profile(profile, "cpu")

        def run(b):
            if kind == "segmenter":
                return model.segment(images[0].resize((64, 64)), "bag")
            if kind == "captioner":
                return model.caption(images[:b])
            if kind == "masked_lm":
                return model.replace_set("a doctor talking to a nurse at the hospital".split(), [1, 3], 3)
            if kind == "sentence":
                return model.encode_texts(["a photo of a doctor at the hospital"] * b)
            return model.encode_images(images[:b])

    out.update(built=_status("VmRSS"), build_peak=_status("VmHWM"))
    for b in batches:
        _reset_peak()
        before = _status("VmRSS")
        start = time.perf_counter()
        run(b)
        out[f"act_{b}"] = _status("VmHWM") - before
        out[f"seconds_{b}"] = round(time.perf_counter() - start, 1)
    out["batches"] = list(batches)
    out["estimate"] = need.total if need else None
    out["parameters"] = need.parameters if need else None
    out["estimate_activations"] = need.activations if need else None
    out["estimate_batch"] = need.batch if need else None
    out["peak"] = max(out["build_peak"], out["built"] + max(out[f"act_{b}"] for b in batches))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="paper-random")
    parser.add_argument("--models", help="comma-separated kind:profile, or generator:CONFIG[:PX]")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child)))
        return 0
    models = args.models.split(",") if args.models else (
        [f"{k}:{args.profile}" for k in SCORERS] + ["generator:tiny:64", "generator:sd15-random:64", "generator:sd15-random:128"])
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    print(f"{'model':34} {'params':>8} {'imports':>8} {'weights':>8} {'act@1':>7} {'act@B':>9} {'per item':>9} "
          f"{'peak':>7} {'estimate':>8} {'est/peak':>8}")
    for spec in models:
        done = subprocess.run([sys.executable, __file__, "--child", spec], capture_output=True, text=True, env=env)
        if done.returncode:
            print(f"{spec:34} failed: {done.stderr.strip().splitlines()[-1:]}")
            continue
        r = json.loads(done.stdout.strip().splitlines()[-1])
        b = r["batches"][-1]
        per_item = (r[f"act_{b}"] - r["act_1"]) / (b - 1) if b > 1 else r["act_1"]
        peak = r["peak"] - r["imported"]
        est = r["estimate"]
        mb = lambda n: f"{n / 2**20:.0f}M"  # noqa: E731
        print(f"{spec:34} {r['parameters'] / 1e6 if r['parameters'] else 0:7.1f}M {mb(r['imported']):>8} "
              f"{mb(r['built'] - r['imported']):>8} {mb(r['act_1']):>7} {mb(r[f'act_{b}']) + f'@{b}':>9} "
              f"{mb(per_item):>9} {mb(peak):>7} {mb(est) if est else '-':>8} {est / peak if est else 0:8.2f}")
    print("peak: the most this model added over the imports (building it, or its weights plus a forward pass);")
    print("estimate: the need checked before loading (weights at the precision, activations at the batch the run "
          "uses, 0.3 GB overhead)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
