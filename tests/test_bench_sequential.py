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


def test_bench_rows_at_a_tiny_size(bench):
    """The simulation decides both designs on the same images: a sequential run never uses more than fixed N,
    the null model raises no false alarm in a few runs, a canary is caught as at fixed N, and a coverage at its
    population value (borderline) is not failed at N by its early looks."""
    size = bench.Size(64, 12, 8, 1)
    rows = bench.simulate(size, [0.3], ["null", "borderline", "drop_component"], 2, [8], pop_runs=3,
                          log=lambda *a: None)
    by = {r["scenario"]: r for r in rows}
    for r in rows:
        for used, planned in r["images"].values():
            assert 0 < used <= planned
        assert r["runs"] == 2 and r["false"][1] == 0  # no false alarm (2 runs: any here would be a bug)
        assert sum(r["differ"].values()) == 0, r["flips"]
    assert by["drop_component"]["caught"] == [2, 2]  # caught at fixed N and sequentially
    # CIS gates stop early: its spread gates do at this size; its CIS_K shares and rate floor (cluster shares)
    # run to N here since their test is also law-free (issue #28: Hoeffding / Maurer-Pontil beside Korn-Graubard,
    # whose limits at an early look's few prompts are too wide for a futility pass)
    spread = by["null"]["kinds"][("cis", "spread")]
    assert spread[0] < spread[1]
    # the plan's table (gating.sequential.NULL_SHARES) keyed by the bench's N in each family's look unit and batch
    shares = bench.null_shares(rows)
    assert shares[("cis", "spread")] == {(64, 8): pytest.approx(bench.share(spread), abs=0.01)}
    assert set(shares[("dig_in", "share")]) == {(bench.DIG_N, 8)} and set(shares) == set(by["null"]["kinds"])
    lines = bench.table(rows)
    assert len(lines) == 2 + len(rows) and lines[2].startswith("| null (a) | 0.3 | 8 | 2 |")


def test_bench_usage_errors(bench, capsys):
    with pytest.raises(SystemExit):
        bench.main(["--scenarios", "nonsense"])
    assert "invalid choice: 'nonsense'" in capsys.readouterr().err


def test_the_order_test_is_simulated_by_the_product_s_futility_rule(bench):
    """The bench's order test (no order effect): at the paper's 1,000 order prompts the futility rule passes it
    before N (bench_order_futility: by the 501-prompt look); at a handful of prompts it reads them all."""
    import numpy as np

    from t2i_fairness.families.cis.study import cis_looks

    rng = np.random.default_rng(0)
    paper = bench.Size(10_000, 1_000, 1_000, 9)
    world = bench.CisWorld(10_000, 1_000, 0.3, 1_000)
    used = bench.order_run(paper, world, rng, cis_looks(10_000))
    assert used in (63, 89, 126, 177, 251, 355, 501, 709)
    small = bench.Size(64, 12, 8, 1)
    assert bench.order_run(small, bench.CisWorld(64, 12, 0.3, 8), rng, cis_looks(64)) == 8


def test_the_bench_writes_the_families_null_shares(bench, tmp_path):
    """``--write-null-shares``: the null rows' shares merged into each family's data file, with their provenance."""
    from t2i_fairness.gating.sequential.plan import NullShares

    (tmp_path / "cis").mkdir()
    (tmp_path / "cis" / "null_shares.json").write_text(NullShares({"share": {(500, 8): 0.6}}, "old").dump())
    shares = {("cis", "share"): {(64, 8): 0.5}, ("dig_in", "worst"): {(60, 8): 0.8}}
    written = bench.write_null_shares(shares, "new", root=tmp_path)
    assert [p.parent.name for p in written] == ["cis", "dig_in"]
    cis, dig = (NullShares.load(p) for p in written)
    assert cis.table == {"share": {(500, 8): 0.6, (64, 8): 0.5}} and cis.source == "old; new"
    assert dig.table == {"worst": {(60, 8): 0.8}} and dig.source == "new"


def test_the_power_curve_decides_both_designs_on_the_same_runs_and_its_laws_have_their_means(bench):
    """``--power-curve`` at a tiny size: every row has its runs, a gross miss is failed by both designs, a model on its
    bound by neither, the table and goals print; each prompt law's mean is the one asked for (the logit law's shift
    solved by quadrature, checked here against a large sample)."""
    import numpy as np

    import sequential_power as sp

    rng = np.random.default_rng(0)
    for law in sp.LAWS:
        for mean in (0.45, 0.8):
            assert abs(sp.prompt_rates(law, mean, 400_000, rng).mean() - mean) < 3e-3, (law, mean)
    rows = sp.power_curve(kinds=(1,), misses=(0.0, 0.3), runs=2, prompts=128, null=False, log=lambda *a: None)
    assert [(r.law, r.miss, r.runs) for r in rows] == [(law, m, 2) for law in sp.LAWS for m in (0.0, 0.3)]
    for r in rows:
        assert 0 < r.images <= r.runs
        assert (r.fixed, r.seq) == ((0, 0) if r.miss == 0.0 else (2, 2)), r
    table = sp.curve_table(rows)
    assert table[0].startswith("| gate | miss |") and len(table) == 2 + 2
    assert "met" in sp.curve_goals(rows)[0]
