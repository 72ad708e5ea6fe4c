"""``t2i-fairness generate --engine local``: each image made once, whatever happens to the runs.

A slow stand-in generator (``slowgen``, written per test) logs every image it draws, so the tests
count what was made: two runs at once, a run killed and resumed, a prompt the model fails on. The
Ray engine's own checks (same bytes as pytest, a dead worker retried) are in ``tests/test_ray_path.py``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SLOWGEN = '''
import os, time
from PIL import Image

class Gen:
    fingerprint = "slowgen:v1"
    batch_size = 2

    def generate(self, prompts, seeds):
        die_on = os.environ.get("SLOWGEN_DIE_ON")
        if die_on and prompts[0] == die_on and not os.path.exists(os.environ["SLOWGEN_LOG"] + ".died"):
            open(os.environ["SLOWGEN_LOG"] + ".died", "w").close()
            os._exit(1)  # a worker that dies mid-job (killed, out of memory)
        fail = os.environ.get("SLOWGEN_FAIL")
        if fail and fail in prompts[0]:
            raise ValueError(f"the model cannot draw {prompts[0]!r}")
        time.sleep(float(os.environ.get("SLOWGEN_SLEEP", "0")))
        with open(os.environ["SLOWGEN_LOG"], "a") as f:
            f.write("".join(f"{os.getpid()}\\t{p}\\t{s}\\n" for p, s in zip(prompts, seeds)))
        return [Image.new("RGB", (8, 8), (s % 256, (s >> 8) % 256, (s >> 16) % 256)) for s in seeds]

def make():
    return Gen()
'''

SELECTION = ["-k", "test_object_consistency and object_in_region-africa", "--t2i-model", "python:slowgen:make",
             "--t2i-objects", "bag,car,dog", "--t2i-images-per-prompt", "4", "--t2i-no-progress"]
TOTAL = 3 * 4  # bag, car, dog in Africa x 4 images, in batches of 2


@pytest.fixture
def project(tmp_path, subprocess_env):
    (tmp_path / "slowgen.py").write_text(SLOWGEN)
    env = dict(subprocess_env, SLOWGEN_LOG=str(tmp_path / "made.log"))
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    return tmp_path, env


def _cli_args(root: Path, *extra: str) -> list[str]:
    return ["generate", "--engine", "local", *SELECTION, "--t2i-cache-dir", str(root / "cache"),
            "--t2i-thresholds", str(root / "t.yaml"), *extra]


def _args(root: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "t2i_fairness.cli", *_cli_args(root, *extra)]


def _made(root: Path) -> list[tuple[str, str]]:
    log = root / "made.log"
    return [tuple(line.split("\t")[1:]) for line in log.read_text().splitlines()] if log.exists() else []


def _generated(out: str) -> int:
    return int(re.search(r"images: (\d+) generated", out).group(1))


def test_two_runs_at_once_make_each_image_once(project):
    root, env = project
    env = dict(env, SLOWGEN_SLEEP="0.5")
    runs = [subprocess.Popen(_args(root), cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)]
    outs = [r.communicate(timeout=600) for r in runs]
    assert all(r.returncode == 0 for r in runs), outs
    made = _made(root)
    assert len(made) == len(set(made)) == TOTAL  # no image drawn twice
    assert sum(_generated(out) for out, _ in outs) == TOTAL
    assert len(list((root / "cache" / "images").rglob("*.png"))) == TOTAL


def test_generate_says_it_makes_the_fixed_n_plan_where_the_run_would_decide_in_rounds(project):
    root, env = project
    said = "generate makes the fixed-N plan's images: a run in rounds (--t2i-sequential, the paper preset's default)"
    default = subprocess.run(_args(root), cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert default.returncode == 0 and said in default.stdout, default.stdout + default.stderr  # python: -> paper
    fixed = subprocess.run(_args(root, "--t2i-fixed-n"), cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert fixed.returncode == 0 and said not in fixed.stdout, fixed.stdout + fixed.stderr


def test_a_killed_run_resumes_and_makes_only_what_it_had_not_written(project):
    root, env = project
    env = dict(env, SLOWGEN_SLEEP="1.0")
    run = subprocess.Popen(_args(root), cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while len(list((root / "cache" / "images").rglob("*.png"))) < 4 and time.time() < deadline:
        time.sleep(0.2)
    run.send_signal(signal.SIGKILL)
    run.wait()
    kept = {p: (p.stat().st_ino, p.read_bytes()) for p in (root / "cache" / "images").rglob("*.png")}
    assert 4 <= len(kept) < TOTAL
    again = subprocess.run(_args(root), cwd=root, env=dict(env, SLOWGEN_SLEEP="0"), capture_output=True, text=True,
                           timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    assert _generated(again.stdout) == TOTAL - len(kept)
    assert f"{len(kept)} already cached" in again.stdout
    assert {p: (p.stat().st_ino, p.read_bytes()) for p in kept} == kept  # nothing written before was rewritten
    assert len(list((root / "cache" / "images").rglob("*.png"))) == TOTAL


def test_a_failing_prompt_names_itself_and_the_finished_images_stay(project, in_process):
    root, env = project
    done = in_process.cli(_cli_args(root), cwd=root, env=dict(env, SLOWGEN_FAIL="car"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "'car in Africa' images 0..1 (candidate): ValueError: the model cannot draw 'car in Africa'" in done.stdout
    assert "'car in Africa' images 2..3" in done.stdout
    assert _generated(done.stdout) == 8 and len(list((root / "cache" / "images").rglob("*.png"))) == 8
    again = in_process.cli(_cli_args(root), cwd=root, env=env)
    assert again.returncode == 0 and "images: 4 generated, 8 already cached" in again.stdout, again.stdout


def test_a_model_that_cannot_be_loaded_is_named_once(project, in_process):
    root, env = project
    args = _cli_args(root)
    args[args.index("python:slowgen:make")] = "python:slowgen:nope"  # fails when the spec is resolved
    done = in_process.cli(args, cwd=root, env=env)
    assert done.returncode == 2 and "python:slowgen:nope" in done.stderr, done.stdout + done.stderr
    # a hub id is resolved to the commit of its cached snapshot before any job (#14): offline and not in the
    # Hugging Face cache, it is named once, up front, with what to do, and nothing is generated
    args[args.index("python:slowgen:nope")] = "nobody/no-such-model"
    done = in_process.cli(args, cwd=root, env=env)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("'nobody/no-such-model' could not be loaded") == 1, done.stderr
    assert "images:" not in done.stdout, done.stdout


def test_without_ray_the_ray_engine_says_how_to_install_it(project):
    root, env = project
    fake = root / "no_ray"
    (fake / "ray").mkdir(parents=True)
    (fake / "ray" / "__init__.py").write_text("raise ImportError('No module named ray')\n")
    env = dict(env, PYTHONPATH=os.pathsep.join([str(fake), env["PYTHONPATH"]]))
    args = _args(root)
    args[args.index("local")] = "ray"
    done = subprocess.run(args, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--engine ray needs Ray Data" in done.stderr and "pip install 't2i-fairness[ray]'" in done.stderr
