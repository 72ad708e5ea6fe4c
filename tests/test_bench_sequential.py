"""bench/bench_sequential.py at a handful of runs: the harness decides both designs on the same
images, never uses more than fixed N, catches the planted canaries and prints its table."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench_sequential.py"


@pytest.fixture(scope="module")
def bench(load_bench):
    sys.path.insert(0, str(BENCH.parent))  # the script imports its sibling modules
    yield load_bench("bench_sequential")
    sys.path.remove(str(BENCH.parent))


@pytest.mark.xfail(strict=True, reason="the e-process design of issue #24 (still main's --t2i-sequential) disagrees with the "
                   "fixed-N verdict in 1 of 3 canary runs since coverage's default became jackknife_wilson_df (issue #28): its "
                   "early fail does not use the df-corrected interval; the alpha-spending design on branch seq29 (issue #29) "
                   "decides each look with the fixed-N test and replaces it")
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


def test_bench_control_flag(bench, capsys):
    """--control picks run_rounds' early-fail rule; the header says which one ran."""
    assert bench.main(["--runs", "1", "--control", "e-holm"]) == 0
    out = capsys.readouterr().out
    assert "control e-holm" in out and "| null | 1 |" in out
    with pytest.raises(SystemExit):
        bench.main(["--runs", "1", "--control", "holm"])
    with pytest.raises(SystemExit):
        bench.main(["--runs", "1", "--no-such-flag"])
    assert "unrecognized arguments: --no-such-flag" in capsys.readouterr().err


@pytest.mark.slow
def test_procedural_mode_rows_add_up(bench, tmp_path, capsys):
    """bench_sequential --procedural 1 on a tiny selection: the real suite through pytest, bounds at another seed,
    fixed N and --t2i-sequential on the same seed and cache; every scenario has its row, counts stay within the
    runs, no gate uses more than fixed N, and the planted collapse is caught by both designs."""
    import json

    out_json = tmp_path / "rows.json"
    select = ("test_cis and not test_cis_order and not test_cis_drop and not test_cis_component or object_in_region "
              "and (test_region_precision or test_region_coverage) and (africa or europe)")
    assert bench.main(["--procedural", "1", "--scenarios", "null", "collapse_region:africa", "--objects", "bag,car",
                       "--cis-k", "1,2", "--images", "4", "--work", str(tmp_path), "--select", select,
                       "--json", str(out_json)]) == 0
    text = capsys.readouterr().out
    rows = {r["scenario"]: r for r in json.loads(out_json.read_text())}
    assert set(rows) == {"null", "collapse_region:africa"}
    for r in rows.values():
        assert r["runs"] == 1
        assert 0 <= r["false_fixed"] <= 1 and 0 <= r["false_seq"] <= 1 and 0 <= r["caught_seq"] <= 1
        assert set(r["kinds"]) == {"CIS", "DIG In precision", "DIG In coverage"}
        for used, planned in r["kinds"].values():
            assert 0 < used <= planned
        used, planned = r["images"]
        assert 0 < used <= planned == r["requests"][1]  # distinct images: the fixed-N run asked for each once
        assert not [a for a in r["anomalies"] if a.startswith("cache accounting")]
        assert f"| {r['scenario']} | 1 | " in text
    # CIS: 2 K x 4 prompts x 4 images, looked at in rounds of 2 (the records' planned images are the fixed N's)
    assert rows["null"]["kinds"]["CIS"][1] == 2 * 4 * 4
    assert rows["collapse_region:africa"]["caught_fixed"] == rows["collapse_region:africa"]["caught_seq"] == 1
    assert rows["collapse_region:africa"]["differ_slice"] == 0
    assert len([line for line in text.splitlines() if line.startswith("|")]) == 2 + 2  # header, rule, 2 rows


def test_procedural_usage_errors(bench, capsys):
    with pytest.raises(SystemExit):
        bench.main(["--procedural", "1", "--batch", "8", "--images", "8"])
    assert "--batch must be in 1..7" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench.main(["--procedural", "0"])
    assert "--runs must be >= 1" in capsys.readouterr().err
