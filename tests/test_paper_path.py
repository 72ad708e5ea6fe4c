"""The run-level precision option and the paper path offline (sd15-random / paper-random) on CPU.

* ``--t2i-precision bfloat16 --t2i-device cpu`` runs the suite (DIG In's consistency gate on the tiny
  model and CLIP): the images and features of the float32 run are not reused (precision is in their keys).
* The README's real-model command (``-n auto --dist loadgroup``, ``--t2i-scorers paper``) with
  ``sd15-random`` and ``paper-random``: SD 1.5's full-size UNet, VAE and text encoder and the paper's
  CLIP ViT-B/32 at 224 px, seeded random weights, at reduced steps, images and resolution, in a child
  whose memory is limited (an address-space limit, ``RLIMIT_AS``): it fits, prints its peak RSS, and
  released the generator before the scorer was loaded.
* Under a limit too small for the generator, the run stops before loading it, with one line.
"""

from __future__ import annotations

import re
import shutil
import sys

import pytest

from conftest import REPO

SELECTION = "test_object_consistency and object_in_region-africa"


@pytest.fixture
def suite(pytester):
    """The repository's DIG In consistency gate file in a temporary folder (its fixtures come with the plugin)."""
    (pytester.path / "fairness_tests").mkdir()
    shutil.copy(REPO / "fairness_tests" / "test_dig_in_consistency.py", pytester.path / "fairness_tests")
    return pytester


def _args(pytester, *extra):
    return ("fairness_tests", "-p", "no:cacheprovider", "--t2i-thresholds", str(pytester.path / "t.yaml"),
            "--t2i-cache-dir", str(pytester.path / "cache"), "--t2i-artifacts", str(pytester.path / "art"),
            "--t2i-no-progress", "--t2i-device", "cpu", "-k", SELECTION, *extra)


def _run(pytester, *extra):
    return pytester.runpytest_subprocess(*_args(pytester, *extra), timeout=900)


# Starts pytest with an address-space limit (what `ulimit -v` sets): the process, and the xdist workers it
# starts, cannot hold more; a model that does not fit then fails to allocate, or is refused before loading.
LIMITED = ("import os, resource, sys; limit = int(sys.argv[1]); resource.setrlimit(resource.RLIMIT_AS, (limit, limit)); "
           "os.execv(sys.executable, [sys.executable, '-m', 'pytest', *sys.argv[2:]])")
GB = 1024 ** 3


def _run_limited(pytester, limit: int, *extra, timeout: int = 900):
    """The suite's command in a child limited to ``limit`` bytes of address space."""
    return pytester.run(sys.executable, "-c", LIMITED, str(limit), "-p", "pytester", *_args(pytester, *extra),
                        timeout=timeout)


def _memory(result) -> tuple[float, list[str]]:
    """The summary's peak RSS (GB) and the models' load and release events, in order."""
    out = result.stdout.str()
    peak = re.search(r"^memory: peak RSS ([0-9.]+) GB", out, flags=re.M)
    events = re.search(r"^models.*?: (.*)$", out, flags=re.M)
    assert peak and events, out[-3000:]
    return float(peak.group(1)), [re.sub(r" \(needs [^)]*\)", "", e) for e in events.group(1).split(", ")]


@pytest.mark.slow  # three runs: 136 s on this shared 2-core machine under load
def test_bfloat16_on_cpu_runs_the_suite_and_keeps_its_own_cache_entries(suite):
    small = ("--t2i-objects", "bag", "--t2i-images-per-prompt", "3", "--t2i-update-thresholds", "--t2i-allow-loosen")
    first = _run(suite, *small, "--t2i-precision", "float32")
    first.assert_outcomes(passed=1)
    first.stdout.fnmatch_lines(["images: 3 generated, 0 from cache", "features:open_clip: 3 computed, 0 from cache"])
    half = _run(suite, *small, "--t2i-precision", "bfloat16")
    half.assert_outcomes(passed=1)
    half.stdout.fnmatch_lines(["images: 3 generated, 0 from cache", "features:open_clip: 3 computed, 0 from cache"])
    again = _run(suite, *small, "--t2i-precision", "bfloat16")
    again.assert_outcomes(passed=1)
    again.stdout.fnmatch_lines(["images: 0 generated, 3 from cache", "features:open_clip: 0 computed, 3 from cache"])


def test_a_bad_precision_is_a_usage_error_naming_the_option(suite):
    result = _run(suite, "--t2i-precision", "fp8")
    assert result.ret == 4
    assert "--t2i-precision" in result.stderr.str() and "fp8" in result.stderr.str()


# not slow: the README's paper-path command is the users' path, and CI runs it
def test_the_readme_real_model_command_runs_offline_at_paper_size_within_a_memory_limit(suite):
    """``pytest fairness_tests -n auto --dist loadgroup --t2i-model sd15-random --t2i-scorers paper-random``
    on CPU: 2 images of one object at 128 px with 2 steps; the gate's scorer is CLIP ViT-B/32 at 224 px.

    In a child limited to 12 GB of address space: the run passes, its summary prints its peak RSS (below
    the limit), and the generator (about 4.3 GB) was released before CLIP was loaded (generation first):
    the models were never held together."""
    result = _run_limited(suite, 12 * GB, "-n", "auto", "--dist", "loadgroup", "--t2i-model", "sd15-random",
                          "--t2i-scorers", "paper-random", "--t2i-objects", "bag", "--t2i-images-per-prompt", "2",
                          "--t2i-steps", "2", "--t2i-height", "128", "--t2i-width", "128", "--t2i-update-thresholds")
    assert result.ret == 0, result.stdout.str()[-3000:] + result.stderr.str()[-2000:]
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*model sd15-random*", "images: 2 generated, 0 from cache"])
    peak, events = _memory(result)
    assert 1 < peak < 12, peak
    # the scorer check first (the update run records the scorers' golden outputs), released before generating
    assert events == ["+scorer clip", "+scorer inception", "-scorer clip", "-scorer inception", "+generator sd15-random",
                      "-generator sd15-random", "+scorer clip", "-scorer clip; loaded again after a release: scorer clip"], events
    assert (suite.path / "t.scorers.json").is_file()  # written by the controller from the worker's check
    import yaml

    written = yaml.safe_load((suite.path / "t.yaml").read_text())
    provenance = str(written)
    assert "sd15-random-" in provenance and "paper-random" in provenance


def test_a_run_that_cannot_fit_stops_before_loading_with_one_line(suite):
    """The README's paper-path command in a child whose address-space limit leaves less than SD 1.5's weights
    (about 4 GB) free above the imports: the run stops before loading the generator (no kernel kill, no
    allocation failure deep in torch) with one line naming the model, its need, what is free and what to change."""
    result = _run_limited(suite, 7 * GB, "--t2i-model", "sd15-random", "--t2i-scorers", "paper-random", "--t2i-objects",
                          "bag", "--t2i-images-per-prompt", "2", "--t2i-steps", "2", "--t2i-height", "64",
                          "--t2i-width", "64", timeout=600)
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out[-3000:]
    lines = [line for line in out.splitlines() if "not enough memory" in line and "To fit:" in line]
    assert len(lines) == 1, out[-3000:]  # the message is one line (the verdict line names it again, shortened)
    line = lines[0]
    for says in ("not enough memory to load the generator sd15-random on cpu: it needs ", "M parameters at float32",
                 "is free (the address-space limit of 7.0 GB (ulimit -v)", "--t2i-device cuda", "a narrower -k"):
        assert says in line, line
    assert "MemoryError" not in out and "Traceback" not in out, out[-3000:]
    assert not list((suite.path / "cache").rglob("*.png"))  # nothing generated


PAPER_SIZES = {
    # adapter -> what must be the paper model's size (checked below; 3-18 s each on 2 cores)
    "inception": "299 px input, 2048-d pool features",
    "vit": "ViT-B/16: 224 px, 16 px patches, 768 wide",
    "clip": "open_clip ViT-B-32: 224 px, 512-d embeddings",
    "captioner": "blip2-opt-2.7b widths: EVA ViT-g 1408, Q-Former 768 x 32 queries, OPT 2560 (2 layers each)",
    "masked_lm": "bert-base-uncased: 768 wide, 12 layers, 30522 tokens",
    "sentence": "all-mpnet-base-v2's MPNet: 768 wide, 12 layers",
}


@pytest.mark.parametrize("kind", sorted(PAPER_SIZES))
def test_paper_random_builds_the_paper_architectures_offline(kind):
    """``--t2i-scorers paper-random``: the paper scorer's classes and sizes, random weights, no download.
    (The segmenter, Grounding DINO base + SAM at 1024 px, takes minutes per image on CPU: the GPU lane builds it.)"""
    import numpy as np
    from PIL import Image

    from t2i_fairness.models import captioner, clip, inception, masked_lm, sentence, vit

    images = [Image.new("RGB", (96, 64), "red"), Image.new("RGB", (64, 64), "blue")]
    if kind == "inception":
        m = inception.InceptionFeatures.from_profile("paper-random")
        assert m.image_size == 299 and m.encode_images(images).shape == (2, 2048)
    elif kind == "vit":
        m = vit.MaskedViTFeatures.from_profile("paper-random")
        assert (m.img_size, m.patch_size, m.dim) == (224, 16, 768) and m.encode_images(images).shape == (2, 768)
    elif kind == "clip":
        m = clip.ClipModel.from_profile("paper-random")
        assert m.fingerprint.startswith("open_clip:ViT-B-32:random-") and m.model.visual.image_size == (224, 224)
        assert m.encode_images(images).shape == (2, 512) and m.encode_texts(["a bag"]).shape == (1, 512)
    elif kind == "captioner":
        m = captioner.Blip2Captioner.from_profile("paper-random", max_new_tokens=2)
        cfg = m._blip2.model.config
        assert (cfg.vision_config.hidden_size, cfg.vision_config.image_size, cfg.vision_config.patch_size) == (1408, 224, 14)
        assert (cfg.qformer_config.hidden_size, cfg.num_query_tokens, cfg.text_config.hidden_size) == (768, 32, 2560)
        assert type(m._blip2.model).__name__ == "Blip2ForConditionalGeneration"
        assert m.image_features().encode_images(images).shape == (2, 1408) and len(m.caption(images[:1])) == 1
    elif kind == "masked_lm":
        m = masked_lm.MaskedLMReplacer.from_profile("paper-random")
        cfg = m.model.config
        assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.vocab_size) == (768, 12, 30522)
        assert len(m.replacements("a doctor at the hospital".split(), 1, 3)) == 3
    else:
        m = sentence.SentenceEncoder.from_profile("paper-random")
        assert type(m.model).__name__ == "MPNetModel" and (m.model.config.hidden_size, m.model.config.num_hidden_layers) == (768, 12)
        out = m.encode_texts(["a dog", "a cat"])
        assert out.shape == (2, 768) and np.allclose(np.linalg.norm(out, axis=1), 1, atol=1e-5)
    assert "paper-random" in m.fingerprint or "random" in m.fingerprint


def readme_paper_command() -> list[str]:
    """The README's paper-size command (its ``--t2i-scorers paper-random`` block), as pytest arguments."""
    import shlex

    text = (REPO / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    (block,) = [b for b in blocks if "--t2i-scorers paper-random" in b]
    args = shlex.split(block.replace("\\\n", " "))
    assert args[:2] == [".venv/bin/pytest", "fairness_tests"], args
    return args[2:]


def test_a_fresh_clone_plans_the_readme_paper_size_command_with_the_reference_rates(tmp_path):
    """With an empty cache, ``t2i-fairness plan`` of the README's command estimates generation and every other step
    from the package's reference rates: their keys still name this selection. When this fails, an option or a model
    changed the keys: rerun the command on a fresh clone and ``python tools/reference_rates.py .t2i-cache --machine
    ...`` (docs/performance-generation.md)."""
    import subprocess
    import sys

    args = readme_paper_command()  # --t2i-update-thresholds included: it makes the run fixed N, so the plan too
    result = subprocess.run([sys.executable, "-m", "t2i_fairness.cli", "plan", "fairness_tests", *args,
                             "--t2i-cache-dir", str(tmp_path / "cache"), "--t2i-thresholds", str(tmp_path / "t.yaml")],
                            cwd=REPO, capture_output=True, text=True, timeout=600)
    out = result.stdout
    assert result.returncode == 0, out[-2000:] + result.stderr[-2000:]
    assert "s/image on cpu (reference rate of the project's" in out, out[-3000:]
    steps = re.search(r"expected time of segmentation, features and captions: up to (.+?) \(the last run", out)
    assert steps, out[-3000:]
    assert "measured on the project's" in out and "the rest (collection, loading models" in out


# every paper-size class the README's command exists to check: the summary's "+<kind> <name>" load events
PAPER_CLASSES = ("+generator sd15-random", "+scorer clip", "+scorer inception", "+scorer decomposed_vit",
                 "+scorer segmenter", "+scorer indic-blip2-captioner", "+scorer indic-sentence-encoder",
                 "+scorer masked_lm")


@pytest.mark.slow  # the README's paper-size command, cold: minutes on 2 cores (docs/gpu.md has the figures)
def test_the_readme_paper_size_command_loads_every_paper_class_and_prints_its_time(pytester):
    """The README's command as written there, from a copy of the suite with an empty cache: it passes, loads
    every paper-size class, and its time is printed beside the 15 minutes it must take on an idle 2-core machine
    (checked when the machine is idle: a load average of at most 2.5)."""
    import os
    import time

    shutil.copytree(REPO / "fairness_tests", pytester.path / "fairness_tests")
    args = [a for a in readme_paper_command() if a != "--t2i-update-thresholds"]
    start, load = time.perf_counter(), os.getloadavg()[0]
    result = pytester.runpytest_subprocess("fairness_tests", *args, "-p", "no:cacheprovider", "--t2i-update-thresholds",
                                           "--t2i-thresholds", str(pytester.path / "t.yaml"), "--t2i-cache-dir",
                                           str(pytester.path / "cache"), "--t2i-artifacts", str(pytester.path / "art"),
                                           timeout=3600)
    took, load = time.perf_counter() - start, max(load, os.getloadavg()[0])
    out = result.stdout.str()
    assert result.ret == 0, out[-3000:] + result.stderr.str()[-2000:]
    # a fresh cache: the package's reference rates (the project's machine) give the header's whole-run estimate
    expected = re.search(r"expected time in all: up to [^(]*\((\d+) s: generation and the steps above\)", out)
    assert expected, out[:3000]
    expected = float(expected.group(1))
    print(f"\nthe README's paper-size command: {took / 60:.1f} min, expected {expected / 60:.1f} min (load average "
          f"{load:.1f}; the limits on an idle machine: 15 min, the estimate within 10%)")
    _, events = _memory(result)
    assert set(PAPER_CLASSES) <= set(events), events
    if load <= 2.5:
        assert took < 15 * 60, f"{took / 60:.1f} min on an idle machine"
        assert abs(expected - took) <= 0.1 * took, f"expected {expected:.0f} s, took {took:.0f} s"
