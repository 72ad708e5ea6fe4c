"""``tools/underpowered_at.py`` counts what ``bench/bench_sequential.py`` counts: the same null run, decided at N by
the product, gives the same underpowered passes through either path."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # two simulated runs of the paper mix at a small size (about a minute)
def test_the_tool_and_the_bench_count_the_same_underpowered_passes(tmp_path):
    size = ["--cis-prompts", "64", "--dig-objects", "2"]
    tool = subprocess.run([sys.executable, str(REPO / "tools" / "underpowered_at.py"), "--runs", "1", *size],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert tool.returncode == 0, tool.stderr[-2000:]
    counted = re.search(r"^# .*: ([\d.]+) of (\d+) per run", tool.stdout, re.M)
    bench = subprocess.run([sys.executable, str(REPO / "bench" / "bench_sequential.py"), "--scenarios", "null", "--runs",
                            "1", "--sd", "0.3", "--batch", "16", "--pop-runs", "1", "--components", "1000", *size],
                           capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert bench.returncode == 0, bench.stderr[-2000:]
    line = re.search(r"^sd 0.3, batch 16: ([\d.]+) of (\d+) simulated gates per run", bench.stdout, re.M)
    assert counted and line and counted.groups() == line.groups(), (tool.stdout[-500:], bench.stdout[-1500:])
    assert 0 < float(counted.group(1)) <= int(counted.group(2))
