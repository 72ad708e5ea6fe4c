"""bench/bench_order_futility.py at a few runs: its looks are the product's (CisStudy.order_size over the CIS
schedule), it decides with the product's ``decide_look``, a study with no order effect passes early and one with
the stated effect never does, and it prints one row per (sd, effect)."""

from __future__ import annotations

import math

import numpy as np
import pytest


@pytest.fixture(scope="module")
def bench(load_bench):
    return load_bench("bench_order_futility")


def test_its_looks_are_the_cis_looks_share_of_the_order_prompts(bench):
    from t2i_fairness.families.cis.study import cis_looks

    cis, sizes = bench.order_looks(1000, 10_000)
    assert cis == cis_looks(10_000) == [625, 884, 1251, 1770, 2504, 3542, 5010, 7086, 10_000]
    assert sizes == [63, 89, 126, 177, 251, 355, 501, 709, 1000]
    assert bench.order_looks(12, 32)[1] == [math.ceil(12 * m / 32) for m in cis_looks(32)]


def test_no_effect_passes_early_and_the_stated_effect_runs_to_n(bench):
    from t2i_fairness.metrics.cis import simulate_order_study

    rng = np.random.default_rng(0)
    looks = bench.order_looks(1000, 10_000)
    null = simulate_order_study(rng.beta(3, 3, size=(1000, 8)), 16, rng, 0.0)
    assert bench.stopped_at(*null, looks) in looks[1][:-1]
    strong = simulate_order_study(rng.beta(3, 3, size=(1000, 8)), 16, rng, 0.2)
    assert bench.stopped_at(*strong, looks) is None


def test_it_prints_a_row_per_sd_and_effect(bench, capsys):
    assert bench.main(["--runs", "2", "--order-prompts", "64", "--cis-prompts", "640", "--images", "4",
                       "--sd", "0.2", "--effects", "0.0", "0.2"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith(" 0.2 ")]
    assert len(rows) == 2 and all(" of 2 " in r for r in rows)
