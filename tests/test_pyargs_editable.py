"""``pytest --pyargs t2i_fairness`` from an editable install (what ``make`` creates) collects the suite, as
from the wheel (``tests/test_wheel.py``): the install maps ``t2i_fairness.fairness_tests`` onto the
checkout's ``fairness_tests/``, outside the package's folder ``plugin/t2i_fairness/``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import t2i_fairness
from t2i_fairness.plugin import SUITE, suite_argument

REPO = Path(__file__).resolve().parents[1]
EDITABLE = Path(t2i_fairness.__file__).resolve().parent == REPO / "plugin" / "t2i_fairness"


def _collect(args: list[str], cwd: Path) -> list[str]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    for name in ("PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER", "PYTHONPATH"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, "-m", "pytest", *args, "-p", "no:cacheprovider", "--collect-only", "-q"],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    assert f"{len(ids)} tests collected" in done.stdout
    return sorted(i.rsplit("/", 1)[-1] for i in ids)  # test_x.py::test_y[...], wherever the file lies


@pytest.mark.skipif(not EDITABLE, reason="t2i_fairness is not installed editable from this checkout")
def test_pyargs_from_an_empty_directory_collects_every_test_the_checkout_collects(tmp_path):
    from_checkout = _collect(["fairness_tests"], REPO)
    from_install = _collect(["--pyargs", "t2i_fairness"], tmp_path)
    assert len(from_checkout) > 100 and from_install == from_checkout


@pytest.mark.skipif(not EDITABLE, reason="t2i_fairness is not installed editable from this checkout")
def test_only_the_bare_package_name_is_redirected_and_only_when_the_suite_lies_outside_it():
    assert suite_argument("t2i_fairness") == SUITE  # this checkout: fairness_tests/ is beside plugin/
    for arg in (SUITE, "t2i_fairness.fairness_tests.test_cis", "t2i_fairness::x", "other_package"):
        assert suite_argument(arg) == arg
