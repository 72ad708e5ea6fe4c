"""bench/bench_futility.py at a few runs: it decides each look with the product's ``decide_look``, the law-free
limit never stops a gate where Korn and Graubard's alone would not have, a clear pass stops early and a large
miss never does, and its table prints one row per (K, sd, miss)."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="module")
def bench(load_bench):
    return load_bench("bench_futility")  # the script puts bench/ on sys.path for its sibling module itself


def test_the_law_free_limit_stops_a_gate_only_where_korn_graubard_s_alone_has(bench):
    # the law-free rule reads the wider of the two limits: a futility pass under it is one under KG at the same
    # look or an earlier one (never the other way round)
    from t2i_fairness.families.cis.study import cis_looks

    rng = np.random.default_rng(3)
    looks = cis_looks(96)
    seen = 0
    for _ in range(40):
        r = bench.one_run(rng, 0.8, 0.3, 96, 4, looks, bound=0.7)  # 0.1 above the bound: often clear early
        free, kg = r["early"]["law-free"], r["early"]["KG"]
        if free is not None:
            seen += 1
            assert kg is not None and kg <= free, r
    assert seen > 0  # the check above ran on real early passes


def test_a_clear_pass_stops_early_and_a_large_miss_never_does(bench):
    clear = bench.measure(0.8, 0.2, -0.3, prompts=128, images=8, runs=10, seed=1)   # bound 0.5, mean 0.8
    assert clear["early"]["law-free"] == clear["early"]["KG"] == 10
    assert clear["fixed_fails"] == 0
    far = bench.measure(0.5, 0.2, 0.3, prompts=128, images=8, runs=10, seed=1)      # bound 0.8, mean 0.5
    assert far["early"] == {"law-free": 0, "KG": 0} and far["fixed_fails"] == 10


def test_the_table_has_a_row_per_k_sd_and_miss(bench, capsys):
    assert bench.main(["--prompts", "64", "--images", "4", "--runs", "3", "--ks", "1", "8", "--sd", "0.3",
                       "--misses", "0.05"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| 1 (0.8)") or line.startswith("| 8 (0.5)")]
    assert len(rows) == 2 and all("/3" in row for row in rows), out
    assert "largest upper 95% bound on the early-pass rate" in out


def test_written_bounds_measure_what_a_null_model_saves(bench, capsys):
    # a model that did not regress against the bound the update flow writes at another seed: never failed, and at
    # 2,000 prompts both rules pass it early (Korn-Graubard's limit alone sooner than with the law-free one beside)
    r = bench.measure_written(0.8, 0.2, prompts=2000, images=16, runs=5, seed=0)
    assert r["bound"] < 0.8 and r["fixed_fails"] == 0
    assert r["used"]["KG"] <= r["used"]["law-free"] < 0.9 and r["early"]["KG"] == 5
    assert bench.main(["--written", "--prompts", "64", "--images", "4", "--runs", "2", "--ks", "1", "--sd", "0.3"]) == 0
    out = capsys.readouterr().out
    assert "| 1 (0.8) | 0.3 |" in out and "/2 |" in out and "prompts used" in out
