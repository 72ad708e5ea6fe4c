"""bench/bench_sequential.py at a handful of runs: the harness decides both designs on the same
images, never uses more than fixed N, catches the planted canaries and prints its table."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench_sequential.py"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCH.parent))
    spec = importlib.util.spec_from_file_location("bench_sequential", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_sequential"] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("bench_sequential", None)
    sys.path.remove(str(BENCH.parent))


def test_bench_rows(bench):
    rows = {r["scenario"]: r for r in bench.run(3, seed=1)}
    for r in rows.values():
        for used, planned in r["images"].values():
            assert 0 < used <= planned
        assert r["seq_false"] == 0  # 3 runs: any false alarm here would be a bug, not chance (rate <= 5%)
    for canary in ("degrade_region:africa:0.6", "drop_component"):
        assert rows[canary]["fixed_detect"] == rows[canary]["seq_detect"] == 3
        assert rows[canary]["slice_differ"] == 0
    assert bench.paper_share(rows["null"]) < 0.6  # the null stops early (0.36 measured at 200 runs)
    lines = bench.table(list(rows.values()))
    assert len(lines) == 2 + len(rows) and lines[2].startswith("| null | 3 |")


def test_bench_usage_errors(bench, capsys):
    with pytest.raises(SystemExit):
        bench.main(["--runs", "0"])
    assert "--runs must be >= 1" in capsys.readouterr().err
