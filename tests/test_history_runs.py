"""Gate runs write the run history: concurrent runs and an xdist run lose nothing, a killed run leaves the
store readable and is said to be killed, an interrupted one is recorded as such, MLflow logs and reads back.

The gates here read the fast fake generator (flat colours from the seed: ``tests/fakegen.py``), so each
run takes seconds; tests/test_history_suite.py runs the tiny suite itself.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from demo_gates import RUN_FLAGS
from t2i_fairness.cli import main as cli
from t2i_fairness.history.store import HistoryStore

FAKEGEN = (Path(__file__).resolve().parent / "fakegen.py").read_text()

GATES = """
import os
import time

import numpy as np
import pytest

REGIONS = ["africa", "europe", "east_asia", "west_asia"]


@pytest.mark.parametrize("region", REGIONS)
def test_region(region, t2i, gate):
    rows = t2i.images([f"a bag in {region}"], 16)
    values = np.array([np.asarray(ref.load()).mean() / 255 for row in rows for ref in row])
    se = values.std(ddof=1) / np.sqrt(len(values))
    gate(float(values.mean()), n=len(values), interval=(values.mean() - 1.96 * se, values.mean() + 1.96 * se))


def test_zz_after(t2i):
    if os.environ.get("HISTORY_WAIT"):
        time.sleep(float(os.environ["HISTORY_WAIT"]))
    if os.environ.get("HISTORY_EXIT"):
        pytest.exit("stopped by the test")
"""

BOUNDS = "gates:\n" + "".join(f"  test_region[{r}]:\n    min: 0.0\n" for r in ("africa", "europe", "east_asia", "west_asia"))


@pytest.fixture
def project(pytester, monkeypatch):
    pytester.makepyfile(test_gates_history=GATES, fakegen=FAKEGEN)
    (pytester.path / "t.yaml").write_text(BOUNDS)
    for var in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID", "MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(pytester.path), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return pytester


def _args(p, name="a", *extra):
    return [sys.executable, "-m", "pytest", str(p.path / "test_gates_history.py"), "--t2i-model", "python:fakegen:make",
            "--t2i-device", "cpu", "--t2i-thresholds", str(p.path / "t.yaml"), "--t2i-cache-dir", str(p.path / f"cache-{name}"),
            "--t2i-artifacts", str(p.path / f"art-{name}"), "--t2i-history", str(p.path / "h.sqlite"), *RUN_FLAGS, *extra]


def test_two_concurrent_runs_and_an_xdist_run_write_every_gate(project):
    procs = [subprocess.Popen(_args(project, f"c{seed}", "--t2i-seed", str(seed)), cwd=project.path,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for seed in (1, 2)]
    outs = [p.communicate(timeout=600)[0].decode() for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    done = subprocess.run(_args(project, "x", "--t2i-seed", "3", "-p", "xdist", "-n", "2"), cwd=project.path,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    store = HistoryStore(project.path / "h.sqlite")
    runs = store.runs()
    assert sorted(r.seed for r in runs) == [1, 2, 3]  # the xdist run is one run: its workers wrote nothing
    assert {r.state for r in runs} == {"finished"}
    for r in runs:
        assert sorted(g.gate for g in store.gates(r.id)) == [f"test_region[{x}]" for x in
                                                              ("africa", "east_asia", "europe", "west_asia")]
        assert all(g.se and g.se > 0 and g.p_adjusted is not None for g in store.gates(r.id))
    assert "history: run #3" in done.stdout and "gate(s) changed beyond noise" in done.stdout


def test_a_killed_run_leaves_the_store_readable_and_is_said_killed(project, capsys):
    proc = subprocess.Popen(_args(project, "k", "-p", "no:randomly"), cwd=project.path, env={**os.environ, "HISTORY_WAIT": "300"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    path, deadline = project.path / "h.sqlite", time.monotonic() + 300
    try:
        while time.monotonic() < deadline:  # until its four gates are in the store, then the sleeping test
            if path.is_file() and len(HistoryStore(path).gates(1)) == 4:
                break
            time.sleep(0.5)
        else:
            pytest.fail("the run's gates never reached the store")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(60)
    (run,) = HistoryStore(path).runs()
    assert (run.status, run.state, run.finished) == ("running", "killed", None)
    assert cli(["history", "--t2i-history", str(path)]) == 0
    out = capsys.readouterr().out
    assert "#1" in out and "killed" in out and "test_region[africa]:" in out
    assert cli(["compare", "--t2i-history", str(path)]) == 2  # no finished run to compare
    assert "no finished run" in capsys.readouterr().err


def test_an_interrupted_run_is_recorded_as_interrupted(project):
    done = subprocess.run(_args(project, "i", "-p", "no:randomly"), cwd=project.path, capture_output=True, text=True,
                          env={**os.environ, "HISTORY_EXIT": "1"}, timeout=600)
    assert done.returncode != 0
    (run,) = HistoryStore(project.path / "h.sqlite").runs()
    assert (run.state, run.exit_status) == ("interrupted", done.returncode) and run.finished is not None


def test_the_default_store_sits_beside_the_artifacts_and_no_history_writes_nothing(project):
    args = [a for a in _args(project, "n") if a not in ("--t2i-history", str(project.path / "h.sqlite"))]
    off = subprocess.run([*args, "--t2i-no-history"], cwd=project.path, capture_output=True, text=True, timeout=600)
    assert off.returncode == 0 and not list(project.path.glob("*.sqlite"))
    on = subprocess.run(args, cwd=project.path, capture_output=True, text=True, timeout=600)
    assert on.returncode == 0 and len(HistoryStore(project.path / "t2i-history.sqlite").runs()) == 1
    both = subprocess.run([*_args(project, "n"), "--t2i-no-history"], cwd=project.path, capture_output=True, text=True,
                          timeout=600)
    assert both.returncode == 4 and "--t2i-no-history: cannot be combined with --t2i-history" in both.stderr


# read back in another process: importing mlflow here would change this worker's package metadata for the
# tests that follow it (library versions read as None, pytester runs without the plugin)
READ_BACK = """
import json, sys
import mlflow
client = mlflow.tracking.MlflowClient(tracking_uri=sys.argv[1])
(run,) = client.search_runs([client.get_experiment_by_name("t2i-fairness").experiment_id])
print(json.dumps({"name": run.info.run_name, "tags": run.data.tags, "params": run.data.params,
                  "metrics": run.data.metrics, "artifacts": sorted(a.path for a in client.list_artifacts(run.info.run_id))}))
"""


def test_mlflow_logs_a_run_that_reads_back_and_a_dead_server_loses_nothing(project, monkeypatch):
    import importlib.util
    import json

    if importlib.util.find_spec("mlflow") is None:
        pytest.skip("mlflow is not installed (pip install 't2i-fairness[mlflow]')")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 keeps the file store behind this switch
    uri = (project.path / "mlruns").as_uri()
    done = subprocess.run(_args(project, "m", "--t2i-mlflow", uri, "--t2i-report", str(project.path / "rep")),
                          cwd=project.path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    back = subprocess.run([sys.executable, "-c", READ_BACK, uri], capture_output=True, text=True, timeout=300)
    assert back.returncode == 0, back.stderr
    run = json.loads(back.stdout.strip().splitlines()[-1])
    assert run["name"] == "python:fakegen:make" and run["tags"]["t2i.verdict"] == "PASSED"
    assert run["params"]["seed"] == "0" and run["params"]["alpha"] == "0.05"
    metrics = run["metrics"]
    store_row = {g.gate: g for g in HistoryStore(project.path / "h.sqlite").gates(1)}["test_region[africa]"]
    assert metrics["test_region.africa.value"] == pytest.approx(store_row.value)
    assert metrics["test_region.africa.low"] == pytest.approx(store_row.low) and metrics["test_region.africa.verdict"] == 1.0
    assert run["artifacts"] == ["index.html", "run.json"]
    # a server that cannot be reached: one warning line, every local output kept
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    dead = subprocess.run(_args(project, "d", "--t2i-mlflow", "http://127.0.0.1:9"), cwd=project.path,
                          capture_output=True, text=True, timeout=600)
    assert dead.returncode == 0, dead.stdout + dead.stderr
    assert "WARNING: --t2i-mlflow http://127.0.0.1:9: not logged" in dead.stdout
    assert (project.path / "art-d" / "run.json").is_file() and len(HistoryStore(project.path / "h.sqlite").runs()) == 2
