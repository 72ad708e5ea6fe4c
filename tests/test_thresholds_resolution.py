"""Which thresholds file a run gates against never depends on how an option was spelled.

pytest picks its rootdir before the plugin's options are known, so in ``--t2i-cache-dir /other/.t2i-cache``
(a space, not ``=``) the value looks like a test path, and a project at ``/other`` would become the
rootdir, with its ``thresholds/``. The plugin decides the rootdir of its defaults again from the
arguments as finally parsed (``plugin.defaults_root``) and prints the absolute thresholds path.
"""

from __future__ import annotations

import os

import pytest

from demo_gates import GATE_FILE, RUN_FLAGS
from t2i_fairness.generators import model_slug

MODEL = ("--t2i-model", "python:fakegen:make", "--t2i-objects", "bag,car", "--t2i-images-per-prompt", "3")


@pytest.fixture
def two_projects(pytester: pytest.Pytester, monkeypatch):
    """An empty-ish working folder (the gate file, no ini, no thresholds) and another project beside it,
    ``other/``, with an ini file and bounds for the same gates."""
    from pathlib import Path

    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    monkeypatch.setenv("FAKEGEN_BATCH", "4")
    pytester.makepyfile(test_gates_demo=GATE_FILE)
    pytester.makepyfile(fakegen=(Path(__file__).resolve().parent / "fakegen.py").read_text())
    pytester.syspathinsert()
    other = pytester.path / "other"
    (other / "thresholds").mkdir(parents=True)
    (other / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    other_thresholds = other / "thresholds" / f"{model_slug('python:fakegen:make')}.yaml"
    # the other project's bounds: written by a run that names its file explicitly
    wrote = pytester.runpytest(*MODEL, f"--t2i-thresholds={other_thresholds}", "--t2i-update-thresholds",
                               f"--t2i-cache-dir={other / '.t2i-cache'}", *RUN_FLAGS)
    wrote.assert_outcomes(passed=6)
    assert other_thresholds.exists()
    return pytester, other


def _header_thresholds(result) -> str:
    (line,) = [line for line in result.stdout.lines if line.startswith("t2i-fairness: model ")]
    return line.rsplit("; thresholds ", 1)[1]


def test_a_space_or_an_equals_sign_reads_the_same_thresholds_file(two_projects):
    pytester, other = two_projects
    cache = str(other / ".t2i-cache")
    spaced = pytester.runpytest(*MODEL, "--t2i-cache-dir", cache, *RUN_FLAGS)
    equals = pytester.runpytest(*MODEL, f"--t2i-cache-dir={cache}", *RUN_FLAGS)
    expected = os.path.abspath(pytester.path / "thresholds" / f"{model_slug('python:fakegen:make')}.yaml")
    # the default lives under the rootdir of this command (the working folder), whatever the spelling:
    # no bounds there, so both runs fail and propose them; neither reads the other project's bounds
    assert _header_thresholds(spaced) == _header_thresholds(equals) == expected
    assert spaced.ret == equals.ret == pytest.ExitCode.TESTS_FAILED
    for result in (spaced, equals):
        result.assert_outcomes(failed=6)
        result.stdout.fnmatch_lines(["6 gate(s) missing; proposed bounds written to *"])
    # pytest itself still took the spaced value for a test path when it chose its rootdir: said in the header
    assert any(line.startswith(f"t2i-fairness: pytest's rootdir {other} is not that of this command's test paths")
               for line in spaced.stdout.lines)
    assert not any("is not that of this command's test paths" in line for line in equals.stdout.lines)


def test_an_explicit_thresholds_file_is_read_from_the_invocation_folder_under_both_spellings(two_projects):
    pytester, other = two_projects
    relative = os.path.relpath(other / "thresholds" / f"{model_slug('python:fakegen:make')}.yaml", pytester.path)
    cache = str(other / ".t2i-cache")
    spaced = pytester.runpytest(*MODEL, "--t2i-thresholds", relative, "--t2i-cache-dir", cache, *RUN_FLAGS)
    equals = pytester.runpytest(*MODEL, f"--t2i-thresholds={relative}", f"--t2i-cache-dir={cache}", *RUN_FLAGS)
    assert _header_thresholds(spaced) == _header_thresholds(equals) == os.path.abspath(pytester.path / relative)
    spaced.assert_outcomes(passed=6)
    equals.assert_outcomes(passed=6)
