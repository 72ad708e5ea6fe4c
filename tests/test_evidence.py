"""Evidence beside a failing gate: DIG In's precision/coverage gates, in the HTML report, in a browser.

The repository's own region gates run on the procedural smoke world (fast, offline) with a bound
raised so that Africa's coverage fails; its section of the report must then show the generated
images beside their nearest real ones and the real images no generated image reached (counted in
headless Chromium, every image decoded), and nothing for a passing gate. The grids' counts are
checked against the gate's own number.
"""

from __future__ import annotations

import json

import pytest

from test_html_report import needs_chromium, open_in_chromium
from test_outcome import Dom

GATE = "test_region_coverage[synthetic-object_in_region-africa]"
PASSING = "test_region_coverage[synthetic-object_in_region-europe]"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One run of two region coverage gates (Africa's bound raised to fail) with the HTML report."""
    import os
    import subprocess
    import sys

    root = tmp_path_factory.mktemp("evidence")
    (root / "pytest.ini").write_text("[pytest]\n")
    (root / "thr.yaml").write_text(f"gates:\n  {GATE}:\n    min: 0.99\n  {PASSING}:\n    min: 0.0\n")
    cmd = [sys.executable, "-m", "pytest", "--pyargs", "t2i_fairness.fairness_tests.test_dig_in_region", "-p", "no:cacheprovider",
           "-k", "test_region_coverage and object_in_region- and (africa or europe)", "--t2i-model", "procedural",
           "--t2i-objects", "bag,car", "--t2i-images-per-prompt", "4", "--t2i-thresholds", "thr.yaml",
           "--t2i-cache-dir", "cache", "--t2i-artifacts", "art", "--t2i-report", "report", "--t2i-no-progress"]
    done = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=900, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 1, done.stdout[-4000:] + done.stderr[-2000:]
    assert "1 failed, 1 passed" in done.stdout, done.stdout[-3000:]
    return root


def test_the_failing_coverage_gate_leaves_both_grids_and_the_passing_one_none(run):
    failing = run / "art" / GATE
    assert sorted(p.name for p in failing.iterdir()) == [
        "evidence.json", "evidence_generated_vs_nearest_real.png", "evidence_real_not_reached.png"]
    assert not (run / "art" / PASSING).exists()


def test_the_evidence_counts_agree_with_the_gate(run):
    data = json.loads((run / "art" / GATE / "evidence.json").read_text())
    record = next(g for g in json.loads((run / "art" / "run.json").read_text())["gates"] if g["gate"] == GATE)
    assert data["real"] == record["n"] and data["real_reached"] / data["real"] == pytest.approx(record["value"])
    assert len(data["real_not_reached"]) == data["real"] - data["real_reached"] > 0
    assert all(r["nearest_generated_d_over_r"] >= 1 for r in data["real_not_reached"])
    first = data["furthest_generated"][0]
    assert first["prompt"].endswith("in Africa") and isinstance(first["seed"], int)


@needs_chromium
def test_in_chromium_the_failing_gate_section_shows_generated_and_real_images(run, tmp_path):
    report = run / "report" / "index.html"
    page, console = open_in_chromium(report, tmp_path / "profile")
    assert page.root.get("data-ready") == "1" and console == [] and json.loads(page.root["data-errors"]) == []
    assert page.root["data-images"] == page.root["data-images-loaded"]  # every image decoded
    dom = Dom(report.read_text())
    sections = {k: v for k, v in dom.images.items() if "test_region_coverage" in k}
    assert list(sections.values()) == [2] and "africa" in next(iter(sections))  # generated-vs-real and not-reached grids
    text = report.read_text()
    assert "evidence_generated_vs_nearest_real.png" in text and "evidence_real_not_reached.png" in text
