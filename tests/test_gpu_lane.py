"""The GPU lane (``make gpu`` or ``pytest tests -m gpu -rs``): what only a CUDA machine can check.

Where CUDA is present it runs every adapter at its CUDA precision (``--t2i-precision auto``:
:data:`t2i_fairness.models.precision.AUTO_ON_CUDA`) at paper size (``paper-random``), the README's
real-model command on ``sd15-random`` / ``paper-random`` at reduced counts, the generation bench, and
the tiny suite on CUDA against ``thresholds/tiny.yaml``. On a machine without CUDA every test here is
skipped with the reason (tests/conftest.py); CI stays CPU. docs/gpu.md says how to carry the project
to a GPU machine and which GPU figures are still unmeasured.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from conftest import REPO

pytestmark = pytest.mark.gpu

KINDS = ["generator", "clip", "inception", "vit", "segmenter", "captioner", "masked_lm", "sentence"]


def _images(n: int, size: int = 512) -> list[Image.Image]:
    rng = np.random.default_rng(0)
    return [Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8)) for _ in range(n)]


def _build(kind: str, precision: str):
    """(model, its weights' module, a float32 output of it) for ``kind`` on CUDA at paper size."""
    from t2i_fairness.models import captioner, clip, inception, masked_lm, segmenter, sentence, vit

    p, dev, images = "paper-random", "cuda", _images(2)
    if kind == "generator":
        from t2i_fairness.generators.base import GenerationSettings
        from t2i_fairness.generators.diffusers_pipe import DiffusersGenerator

        gen = DiffusersGenerator.random("sd15-random", GenerationSettings(steps=4), dev, precision)
        out = np.stack([np.asarray(im, np.float32).ravel() for im in gen.generate(["a bag in Africa"] * 2, [1, 2])])
        return gen, gen.pipe.unet, out
    if kind == "clip":
        m = clip.ClipModel.from_profile(p, dev, precision)
        return m, m.model.visual, np.hstack([m.encode_images(images), m.encode_texts(["a bag", "a car"])])
    if kind == "inception":
        m = inception.InceptionFeatures.from_profile(p, dev, precision)
        return m, m.model, m.encode_images(images)
    if kind == "vit":
        m = vit.MaskedViTFeatures.from_profile(p, dev, precision)
        mask = np.zeros((512, 512), bool)
        mask[:200, :300] = True
        return m, m.model, m.encode(images, [mask, mask], "obj")
    if kind == "segmenter":
        m = segmenter.LangSAMSegmenter.from_profile(p, dev, precision)
        return m, m.sam, m.segment(images[0], "bag").astype(np.float32)[None].reshape(1, -1)
    if kind == "captioner":
        m = captioner.Blip2Captioner.from_profile(p, dev, precision)
        assert all(isinstance(c, str) for c in m.caption(images))
        return m, m._blip2.model, m.image_features().encode_images(images)
    if kind == "masked_lm":
        m = masked_lm.MaskedLMReplacer.from_profile(p, dev, precision)
        assert len(m.replacements("a respected doctor at the hospital".split(), 2, 5)) == 5
        return m, m.model, None
    m = sentence.SentenceEncoder.from_profile(p, dev, precision)
    return m, m.model, m.encode_texts(["a dog", "a respected doctor at the hospital"])


@pytest.mark.parametrize("kind", KINDS)
def test_every_adapter_at_its_cuda_precision(kind):
    """``auto`` on CUDA gives the table's precision; outputs are float32 and close to float32's."""
    import torch

    from t2i_fairness.models.precision import AUTO_ON_CUDA, weights_dtype

    model, weights, out = _build(kind, "auto")
    assert weights_dtype(weights) == getattr(torch, AUTO_ON_CUDA[kind])
    if out is None:
        return
    assert out.dtype == np.float32 and np.isfinite(out).all()
    if AUTO_ON_CUDA[kind] != "float32" and kind != "segmenter":
        ref = _build(kind, "float32")[2]
        a, b = ref.astype(np.float64), out.astype(np.float64)
        cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
        assert cos.min() > 0.99, cos


def _run(args: list[str], timeout: int = 3000) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env)


def test_the_real_model_command_on_cuda_at_paper_size(tmp_path):
    """The README's real-model command, sd15-random / paper-random, 512 px, reduced steps and images."""
    done = _run([sys.executable, "-m", "pytest", "fairness_tests", "-n", "auto", "--dist", "loadgroup",
                 "-p", "no:cacheprovider", "--t2i-model", "sd15-random", "--t2i-scorers", "paper-random",
                 "--t2i-device", "cuda", "--t2i-objects", "bag,car", "--t2i-images-per-prompt", "4", "--t2i-steps", "10",
                 "-k", "africa and (region_precision or object_consistency or obj_precision)",
                 "--t2i-cache-dir", str(tmp_path / "cache"), "--t2i-thresholds", str(tmp_path / "t.yaml"),
                 "--t2i-artifacts", str(tmp_path / "art"), "--t2i-no-progress", "--t2i-update-thresholds"])
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_the_generation_bench_on_cuda():
    done = _run([sys.executable, "bench/bench_generation.py", "--quick"])
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    print(done.stdout[-3000:])


def test_the_tiny_suite_on_cuda_meets_the_tiny_bounds(tmp_path):
    """``make gate`` on CUDA: the bounds of thresholds/tiny.yaml were measured on CPU."""
    done = _run([sys.executable, "-m", "pytest", "fairness_tests", "-p", "no:cacheprovider", "--t2i-device", "cuda",
                 "--t2i-cache-dir", str(tmp_path / "cache"), "--t2i-artifacts", str(tmp_path / "art"), "--t2i-no-progress"])
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
