"""The run-level precision option and the paper path offline (sd15-random / paper-random) on CPU.

* ``--t2i-precision bfloat16 --t2i-device cpu`` runs the suite (DIG In's consistency gate on the tiny
  model and CLIP): the images and features of the float32 run are not reused (precision is in their keys).
* The README's real-model command (``-n auto --dist loadgroup``, ``--t2i-scorers paper``) with
  ``sd15-random`` and ``paper-random``: SD 1.5's full-size UNet, VAE and text encoder and the paper's
  CLIP ViT-B/32 at 224 px, seeded random weights, at reduced steps, images and resolution.
"""

from __future__ import annotations

import shutil

import pytest

from conftest import REPO

SELECTION = "test_object_consistency and object_in_region-africa"


@pytest.fixture
def suite(pytester):
    """The repository's DIG In consistency gate file in a temporary folder (its fixtures come with the plugin)."""
    (pytester.path / "fairness_tests").mkdir()
    shutil.copy(REPO / "fairness_tests" / "test_dig_in_consistency.py", pytester.path / "fairness_tests")
    return pytester


def _run(pytester, *extra):
    return pytester.runpytest_subprocess(
        "fairness_tests", "-p", "no:cacheprovider", "--t2i-thresholds", str(pytester.path / "t.yaml"),
        "--t2i-cache-dir", str(pytester.path / "cache"), "--t2i-artifacts", str(pytester.path / "art"),
        "--t2i-no-progress", "--t2i-device", "cpu", "-k", SELECTION, *extra, timeout=900)


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


@pytest.mark.slow
def test_the_readme_real_model_command_runs_offline_at_paper_size(suite):
    """``pytest fairness_tests -n auto --dist loadgroup --t2i-model sd15-random --t2i-scorers paper-random``
    on CPU: 2 images of one object at 128 px with 2 steps; the gate's scorer is CLIP ViT-B/32 at 224 px."""
    result = _run(suite, "-n", "auto", "--dist", "loadgroup", "--t2i-model", "sd15-random",
                  "--t2i-scorers", "paper-random", "--t2i-objects", "bag", "--t2i-images-per-prompt", "2",
                  "--t2i-steps", "2", "--t2i-height", "128", "--t2i-width", "128", "--t2i-update-thresholds")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*model sd15-random*", "images: 2 generated, 0 from cache"])
    import yaml

    written = yaml.safe_load((suite.path / "t.yaml").read_text())
    provenance = str(written)
    assert "sd15-random-" in provenance and "paper-random" in provenance
