"""The run history on the tiny suite itself: two runs at different seeds, then a run with Africa collapsed.

The slice: ``test_dig_in_region.py -k "object_in_region and (test_region_precision or test_region_coverage)"``
with ``--t2i-objects bag`` (each region's precision and coverage of ``a bag in {region}``: 12 gates), so three
runs of the tiny model fit in minutes on a CPU. ``compare`` must flag nothing between the seeds and flag
Africa's gates, only them, after ``--t2i-canary collapse_region:africa``; the third run's report shows the
trends and the section.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from t2i_fairness.cli import main as cli

REPO = Path(__file__).resolve().parents[1]
SLICE = "object_in_region and (test_region_precision or test_region_coverage)"


def _run(tmp: Path, seed: int, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pytest", str(REPO / "fairness_tests" / "test_dig_in_region.py"), "-k", SLICE,
           "--t2i-objects", "bag", "--t2i-seed", str(seed), "--t2i-thresholds", str(tmp / "tiny.yaml"),
           "--t2i-cache-dir", str(tmp / "cache"), "--t2i-artifacts", str(tmp / "art"),
           "--t2i-history", str(tmp / "h.sqlite"), "--t2i-report", str(tmp / f"report{seed}"),
           "--t2i-device", "cpu", "--t2i-no-progress", "-p", "no:cacheprovider", "-p", "no:randomly", *extra]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST", "MLFLOW_"))}
    return subprocess.run(cmd, cwd=REPO, env={**env, "HF_HUB_OFFLINE": "1"}, capture_output=True, text=True,
                          timeout=1800)


def test_seeds_are_not_changes_and_a_collapsed_region_is(tmp_path, capsys):
    shutil.copy(REPO / "thresholds" / "tiny.yaml", tmp_path / "tiny.yaml")
    runs = [_run(tmp_path, 1), _run(tmp_path, 2), _run(tmp_path, 3, "--t2i-canary", "collapse_region:africa")]
    for r in runs:
        assert r.returncode in (0, 1), r.stdout[-3000:] + r.stderr[-3000:]
    store = str(tmp_path / "h.sqlite")
    assert cli(["compare", "1", "2", "--t2i-history", store, "--fail-on-regression"]) == 0
    seeds = capsys.readouterr().out
    assert "0 of 12 gate(s) changed beyond noise" in seeds, seeds
    assert cli(["compare", "--t2i-history", store, "--fail-on-regression"]) == 1  # no arguments: the last two
    canary = capsys.readouterr().out
    flagged = re.findall(r"^\s+(?:REGRESSED|CHANGED|LOST)\s+(\S+):", canary, re.M)
    assert flagged and all("africa" in g for g in flagged), canary
    assert "B: #3" in canary and "A: #2" in canary
    assert "history: run #3" in runs[2].stdout and f"{len(flagged)} of " in runs[2].stdout
    html = (tmp_path / "report3" / "index.html").read_text()
    assert html.count('<svg class="trend"') == 12  # each gate: runs 1 and 2, then this one
    section = html[html.index('id="since"'):]
    section = section[:section.index("</section>")]
    assert "Against #2" in section and all(g in section for g in flagged)
    assert cli(["history", "--t2i-history", store, "-k", "africa and precision"]) == 0
    out = capsys.readouterr().out
    assert re.findall(r"^  #(\d) (?:[\d.]+ \[|undefined)", out, re.M) == ["1", "2", "3"], out  # one gate, three runs
    assert "#3 undefined n 0, fail" in out
