"""The suite ships in the wheel: built, installed into a target folder and run from an empty directory
outside the checkout with ``pytest --pyargs t2i_fairness``, as a model team would."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

FAKEGEN = """
from PIL import Image


class Flat:
    fingerprint = "wheelfake:v1"

    def generate(self, prompts, seeds):
        return [Image.new("RGB", (40, 40), (s % 251, (s >> 8) % 253, len(p) * 7 % 255)) for p, s in zip(prompts, seeds)]


def make():
    return Flat()
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The project's wheel, built from this checkout and installed (without dependencies) into a folder."""
    root = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(root / "dist"),
                    str(REPO)], check=True, capture_output=True, timeout=600)
    (wheel,) = (root / "dist").glob("t2i_fairness-*.whl")
    target = root / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
                   check=True, capture_output=True, timeout=600)
    return target


def test_the_wheel_holds_the_package_the_gate_tests_and_their_fixtures(installed):
    pkg = installed / "t2i_fairness"
    suite = sorted(p.name for p in (pkg / "fairness_tests").glob("test_*.py"))
    assert suite == sorted(p.name for p in (REPO / "fairness_tests").glob("test_*.py"))
    assert (pkg / "fixtures" / "core.py").is_file() and (pkg / "fixtures" / "studies.py").is_file()
    assert (pkg / "data" / "indic_smoke.jsonl").is_file() and (pkg / "model_configs" / "tiny-sd.json").is_file()
    entry = next(installed.glob("t2i_fairness-*.dist-info")) / "entry_points.txt"
    assert "t2i_fairness = t2i_fairness.plugin" in entry.read_text()


def test_pyargs_from_an_empty_directory_proposes_then_updates_then_passes(installed, tmp_path):
    work = tmp_path / "team-repo"
    work.mkdir()
    (work / "wheelfake.py").write_text(FAKEGEN)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(installed), str(work)]), HF_HUB_OFFLINE="1",
               OMP_NUM_THREADS="1")
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_XDIST_WORKER", None)
    args = [sys.executable, "-m", "pytest", "--pyargs", "t2i_fairness", "-p", "no:cacheprovider", "-q",
            "-k", "test_region_precision and object_in_region and (africa or europe)",
            "--t2i-model", "python:wheelfake:make", "--t2i-objects", "bag", "--t2i-images-per-prompt", "2",
            "--t2i-no-progress"]

    def run(*extra):
        return subprocess.run(args + list(extra), cwd=work, env=env, capture_output=True, text=True, timeout=900)

    first = run()
    out = first.stdout + first.stderr
    assert first.returncode == 1, out
    assert "2 failed" in out and "2 gates, 2 failed" in out, out
    where = subprocess.run([sys.executable, "-c", "import t2i_fairness.fairness_tests as s, t2i_fairness.plugin as p; "
                            "print(s.__file__); print(p.__file__)"], cwd=work, env=env, capture_output=True, text=True)
    assert all(line.startswith(str(installed)) for line in where.stdout.split()), where.stdout  # the wheel's, not the checkout's
    proposed = work / "thresholds" / "python-wheelfake-make.proposed.yaml"
    assert proposed.is_file() and "test_region_precision[synthetic-object_in_region-africa]" in proposed.read_text()
    assert not (work / "thresholds" / "python-wheelfake-make.yaml").exists()  # a proposal is never applied silently

    update = run("--t2i-update-thresholds")
    assert update.returncode == 0, update.stdout + update.stderr
    written = work / "thresholds" / "python-wheelfake-make.yaml"
    assert "test_region_precision[synthetic-object_in_region-europe]" in written.read_text()

    again = run()
    assert again.returncode == 0, again.stdout + again.stderr
    assert "2 passed" in again.stdout and "2 gates, 0 failed" in again.stdout
    assert "images: 0 generated" in again.stdout  # the cache sits in the team's directory too
    assert (work / ".t2i-cache").is_dir() and not (REPO / "thresholds" / "python-wheelfake-make.yaml").exists()


def test_the_wheel_contains_no_second_copy_of_a_test(installed):
    names = [p.relative_to(installed).as_posix() for p in (installed / "t2i_fairness").rglob("test_*.py")]
    assert names and all(n.startswith("t2i_fairness/fairness_tests/") for n in names), names
    with zipfile.ZipFile(next((installed.parent / "dist").glob("*.whl"))) as whl:
        listed = [n for n in whl.namelist() if n.rsplit("/", 1)[-1].startswith("test_")]
    assert sorted(listed) == sorted(names)


def test_pyargs_from_an_empty_directory_collects_every_gate_of_the_suite(installed, tmp_path):
    """The whole suite, not a selection: every gate function of fairness_tests/ is collected from the wheel."""
    import ast

    env = dict(os.environ, PYTHONPATH=str(installed), HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_XDIST_WORKER", None)
    done = subprocess.run([sys.executable, "-m", "pytest", "--pyargs", "t2i_fairness", "-p", "no:cacheprovider",
                           "--collect-only", "-q"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    collected = {(i.split("::")[0].rsplit("/", 1)[-1], i.split("::")[1].split("[")[0]) for i in ids}
    defined = {(path.name, node.name) for path in (REPO / "fairness_tests").glob("test_*.py")
               for node in ast.parse(path.read_text()).body
               if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}
    assert defined and defined <= collected, sorted(defined - collected)
    assert f"{len(ids)} tests collected" in done.stdout


def test_every_package_of_the_checkout_is_in_the_wheel_by_discovery(installed):
    """pyproject.toml lists no package: setuptools finds each one under the folders it maps (the package and
    the suite's two folders), so a package added under plugin/ is in the wheel without a line there."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "packages" not in setuptools, "pyproject.toml lists packages again: a new paper would need a line there"
    assert setuptools["package-dir"] == {"t2i_fairness": "plugin/t2i_fairness", "t2i_fairness.fairness_tests": "fairness_tests",
                                         "t2i_fairness.fixtures": "fixtures"}
    on_disk = {".".join(p.parent.relative_to(REPO / "plugin").parts)
               for p in (REPO / "plugin" / "t2i_fairness").rglob("__init__.py")}
    on_disk |= {"t2i_fairness.fairness_tests", "t2i_fairness.fixtures"}
    in_wheel = {".".join(p.parent.relative_to(installed).parts) for p in (installed / "t2i_fairness").rglob("__init__.py")}
    assert on_disk == in_wheel, sorted(on_disk ^ in_wheel)
    assert not (REPO / "setup.py").exists()  # one place for the packaging: pyproject.toml
