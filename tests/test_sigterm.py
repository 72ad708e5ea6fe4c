"""SIGTERM (what a CI runner sends on a timeout) ends a run as Ctrl-C does, and a run never leaves an
earlier run's outputs at its paths looking current.

A real pytest subprocess on the toy suite of ``tests/test_outcome.py`` (fake generator, no model): an
earlier green run writes JUnit, run.json, the HTML report (and Allure); the next run is sent SIGTERM
while its last test is running. While it runs, the earlier green files are already placeholders saying
the run has not finished (what a SIGKILL would leave); after the SIGTERM every output says interrupted.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from test_outcome import SUITE, _junit, _project

WAITING = SUITE.replace('''    if os.environ.get("T2I_TEST_SIGINT"):''', '''    if os.environ.get("T2I_TEST_READY"):  # the run is mid-test: say so, then wait for the signal
        open(os.environ["T2I_TEST_READY"], "w").close()
        import time
        time.sleep(120)
    if os.environ.get("T2I_TEST_SIGINT"):''')


def _args(pytester) -> list[str]:
    args = _project(pytester)
    pytester.makepyfile(test_toy=WAITING)
    args += ["-p", "no:cacheprovider", "--junitxml", "junit.xml"]
    try:
        import allure_pytest  # noqa: F401

        args += ["--alluredir", "allure"]
    except ImportError:
        pass
    return args


def _outputs(path) -> dict:
    """The verdict each output states."""
    attrs, props, cases = _junit(path / "junit.xml")
    page = (path / "report" / "index.html").read_text()
    marker = 'id="verdict" data-verdict="'
    out = {"junit": props.get("t2i_verdict", ""), "run.json": json.loads((path / "art" / "run.json").read_text())["verdict"],
           "html": page[page.index(marker) + len(marker):].split('"', 1)[0]}
    if (path / "allure").is_dir():
        out["allure"] = (path / "allure" / "environment.properties").read_text()
    return out


def test_sigterm_mid_run_every_output_says_interrupted_and_no_earlier_green_survives(pytester):
    args = _args(pytester)
    green = pytester.run(sys.executable, "-m", "pytest", *args, "-k", "africa", timeout=300)
    assert green.ret == 0, green.stdout.str()[-2000:]
    before = _outputs(pytester.path)
    assert before["junit"].startswith("PASSED") and before["run.json"] == "PASSED" and before["html"] == "PASSED"

    ready = pytester.path / "ready"
    env_args = [sys.executable, "-m", "pytest", *args]
    import os

    env = dict(os.environ, T2I_TEST_READY=str(ready), PYTHONPATH=os.pathsep.join(
        [str(pytester.path), os.environ.get("PYTHONPATH", "")]))
    env.pop("PYTEST_ADDOPTS", None)
    proc = subprocess.Popen(env_args, cwd=pytester.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        deadline = time.monotonic() + 240
        while not ready.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read() if proc.poll() is not None else "timeout"
            time.sleep(0.2)
        # mid-run (what a SIGKILL now would leave): no earlier green at any path this run writes
        during = _outputs(pytester.path)
        assert {k: v.split(":", 1)[0] for k, v in during.items() if k != "allure"} == {
            "junit": "INCOMPLETE", "run.json": "INCOMPLETE", "html": "INCOMPLETE"}, during
        attrs, _, cases = _junit(pytester.path / "junit.xml")
        assert attrs["errors"] == "1" and cases["run verdict"][0][0] == "error"
        if "allure" in during:
            assert "t2i.verdict=INCOMPLETE" in during["allure"]
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out[-3000:]
    assert "Traceback" not in out.split("t2i-fairness gates")[-1]
    reason = "SIGTERM (a termination signal: a CI job's timeout, kill)"
    assert f"verdict: INTERRUPTED: {reason} after 5 of 5 tests" in out, out[-3000:]
    after = _outputs(pytester.path)
    assert after["run.json"] == "INTERRUPTED" and after["html"] == "INTERRUPTED", after
    attrs, props, cases = _junit(pytester.path / "junit.xml")
    assert props["t2i_verdict"].startswith(f"INTERRUPTED: {reason}")
    assert props["t2i_interrupted"] == f"{reason} during test_toy.py::test_last"
    assert cases["test_last"] == [("error", f"interrupted: {reason}")]
    assert (attrs["failures"], attrs["errors"]) == ("2", "1")  # europe's gate and the crash; the cut-off test
    if "allure" in after:
        assert "t2i.verdict=INTERRUPTED" in after["allure"]
        results = [json.loads(p.read_text()) for p in (pytester.path / "allure").glob("*-result.json")]
        last = [r for r in results if r["fullName"].endswith("#test_last")]
        assert [r["status"] for r in last] == ["broken"] and last[0]["statusDetails"]["message"] == f"interrupted: {reason}"


def test_a_run_of_other_tests_leaves_a_gate_runs_run_json_alone(pytester):
    """run.json is marked stale only by a run that will write it (gate tests selected, or --t2i-report)."""
    (pytester.path / "art").mkdir()
    (pytester.path / "art" / "run.json").write_text('{"verdict": "PASSED"}')
    pytester.makepyfile(test_plain="def test_x():\n    assert 1 + 1 == 2\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "--t2i-artifacts", "art", "test_plain.py")
    result.assert_outcomes(passed=1)
    assert json.loads((pytester.path / "art" / "run.json").read_text()) == {"verdict": "PASSED"}


def test_a_run_refused_before_it_starts_leaves_no_earlier_green_junit(pytester):
    (pytester.path / "junit.xml").write_text('<?xml version="1.0"?><testsuites><testsuite name="pytest" errors="0" '
                                             'failures="0" tests="1"><testcase name="t"/></testsuite></testsuites>')
    result = pytester.runpytest("-p", "no:cacheprovider", "--junitxml", "junit.xml", "--t2i-seed", "-1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    attrs, props, cases = _junit(pytester.path / "junit.xml")
    assert attrs["errors"] == "1" and props["t2i_verdict"].startswith("INCOMPLETE: the run started at")
