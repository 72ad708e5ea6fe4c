"""The Ray path (issue #16's "Done means"): a small tiny-model plan made on a local Ray instance (2 CPUs).

* the images are byte-identical to those a ``pytest`` run of the same selection generates;
* ``pytest`` on the same selection, on the cache the Ray path filled (``--stage features``), reports
  ``images: 0 generated`` and computes no feature;
* a worker that dies is restarted and its job retried by Ray; a prompt the model fails on names
  itself and every finished image stays.

Skipped (with the reason) only where Ray cannot be imported; ``make install`` installs the
``ray`` extra, so CI runs it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray.data", reason="Ray is not installed: pip install 't2i-fairness[ray]' (make install does)")

from test_generate import SLOWGEN  # noqa: E402  (the logging stand-in generator)

SELECTION = ["-k", "test_object_consistency and object_in_region-africa", "--t2i-objects", "bag,car",
             "--t2i-images-per-prompt", "3", "--t2i-batch-size", "2", "--t2i-no-progress"]


def _generate(root: Path, env: dict, cache: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "t2i_fairness.cli", "generate", "--engine", "ray", "--num-cpus", "2",
                           "--workers", "2", *SELECTION, *extra, "--t2i-cache-dir", str(cache),
                           "--t2i-thresholds", str(root / "t.yaml")],
                          cwd=root, env=env, capture_output=True, text=True, timeout=600)


def _pytest(root: Path, env: dict, cache: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "--pyargs", "t2i_fairness.fairness_tests", "-q",
                           "-p", "no:cacheprovider", *SELECTION, "--t2i-cache-dir", str(cache),
                           "--t2i-thresholds", str(root / "t.yaml"), "--t2i-artifacts", str(root / "art")],
                          cwd=root, env=env, capture_output=True, text=True, timeout=600)


def _images(cache: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (cache / "images").rglob("*.png")}


@pytest.mark.slow  # 107 s (Ray starts, actors generate, then a pytest child); Ray is the optional [ray] extra: CI runs the dead-worker test below
def test_ray_path_makes_the_pytest_paths_bytes_and_features_and_pytest_then_computes_nothing(tmp_path, subprocess_env):
    """``generate --engine ray --stage features``: the actors make the selection's images (the bytes a pytest
    run makes) and its CLIP features; pytest on that cache then generates no image and computes no feature.
    (One Ray run for both stages: each run starts Ray and loads the model on every actor.)"""
    ray_run = _generate(tmp_path, subprocess_env, tmp_path / "ray-cache", "--stage", "features")
    assert ray_run.returncode == 0, ray_run.stdout + ray_run.stderr[-3000:]
    assert "images: 6 generated, 0 already cached (ray" in ray_run.stdout, ray_run.stdout
    assert "6 image(s) to make in 4 batch(es)" in ray_run.stdout  # [0, 1] and [2] of each prompt
    assert re.search(r"features: (\d+) slice\(s\) of \1 ", ray_run.stdout), ray_run.stdout

    pytest_run = _pytest(tmp_path, subprocess_env, tmp_path / "pytest-cache")
    assert "images: 6 generated" in pytest_run.stdout, pytest_run.stdout[-3000:]
    made_by_ray, made_by_pytest = _images(tmp_path / "ray-cache"), _images(tmp_path / "pytest-cache")
    assert len(made_by_ray) == 6 and made_by_ray == made_by_pytest  # same keys, same bytes

    warm = _pytest(tmp_path, subprocess_env, tmp_path / "ray-cache")
    assert "images: 0 generated, 6 from cache" in warm.stdout, warm.stdout[-3000:]
    computed = re.findall(r"^(\S+): (\d+) computed, (\d+) from cache$", warm.stdout, re.M)
    assert computed and all(int(n) == 0 for _, n, _ in computed), computed


def test_a_dead_worker_is_retried_and_a_failing_prompt_names_itself(tmp_path, subprocess_env):
    (tmp_path / "slowgen.py").write_text(SLOWGEN)
    log = tmp_path / "made.log"
    env = dict(subprocess_env, SLOWGEN_LOG=str(log), SLOWGEN_DIE_ON="bag in Africa", SLOWGEN_FAIL="car")
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    done = _generate(tmp_path, env, tmp_path / "cache", "--t2i-model", "python:slowgen:make")
    assert done.returncode == 1, done.stdout + done.stderr[-3000:]
    assert (tmp_path / "made.log.died").exists()  # a worker died on 'bag in Africa' ...
    made = [tuple(line.split("\t")[1:]) for line in log.read_text().splitlines()]
    assert sorted(p for p, _ in made) == ["bag in Africa"] * 3 and len(set(made)) == 3  # ... its job retried, each image once
    assert re.search(r"'car in Africa' images 0\.\.1 \(candidate\): ValueError: the model cannot draw", done.stdout)
    assert "images: 3 generated" in done.stdout, done.stdout
    assert len(_images(tmp_path / "cache")) == 3  # the bag images are kept
