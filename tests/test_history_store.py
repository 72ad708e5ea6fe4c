"""The run history's store, comparison and expressions, without a gate run: schema and migration,
concurrent writers, Holm over the compared gates against statsmodels, ``-k`` against pytest's own parser."""

from __future__ import annotations

import math
import multiprocessing
import sqlite3

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from t2i_fairness.history.compare import compare_gates
from t2i_fairness.history.expression import ExpressionError, matcher
from t2i_fairness.history.store import MIGRATIONS, SCHEMA_VERSION, GateRow, HistoryError, HistoryStore


def _record(gate, value, se=0.05, status="pass", direction="min"):
    return {"gate": gate, "value": value, "n": 20, "status": status, "direction": direction, "bound": 0.1,
            "interval": [value - 1.96 * se, value + 1.96 * se], "uncertainty": {"se": se, "confidence": 0.95},
            "p_value": 0.01, "provenance": {"seed": 0}}


def test_a_run_is_written_read_back_and_finished(tmp_path):
    store = HistoryStore(tmp_path / "h.sqlite")
    run = store.begin_run({"model": "tiny", "seed": 3, "settings": {"alpha": 0.05}, "thresholds_commit": "abc"})
    assert store.runs()[0].state == "running"  # this process is alive: not "killed"
    store.add_gates(run, [(_record("g[a]", 0.5), "s"), (_record("g[b]", float("nan")), "s")])
    store.finish_run(run, "finished", verdict="PASSED: 2 gates", exit_status=0)
    (r,) = store.runs()
    assert (r.state, r.seed, r.settings, r.thresholds_commit, r.exit_status) == ("finished", 3, {"alpha": 0.05}, "abc", 0)
    rows = {g.gate: g for g in store.gates(run)}
    assert rows["g[a]"].value == 0.5 and rows["g[a]"].se == 0.05 and rows["g[a]"].sample == "s"
    assert rows["g[b]"].value is None  # NaN is stored as NULL, read back as undefined
    assert store.record(run, "g[a]")["interval"] == pytest.approx([0.402, 0.598])


def test_an_old_store_migrates_and_keeps_its_runs_and_a_newer_one_is_refused(tmp_path):
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied TEXT NOT NULL)")
    for sql in MIGRATIONS[0][1]:  # the first version's schema, as an older t2i-fairness wrote it
        db.execute(sql)
    db.execute("INSERT INTO schema_version VALUES (1, 'then')")
    db.execute("INSERT INTO runs (started, status, model) VALUES ('2026-01-01T00:00:00+00:00', 'finished', 'v1')")
    db.execute("INSERT INTO gates (run_id, gate, value) VALUES (1, 'g', 0.25)")
    db.commit()
    db.close()
    store = HistoryStore(path)
    assert store.version() == SCHEMA_VERSION == 3
    assert [(r.model, r.state) for r in store.runs()] == [("v1", "finished")]  # no pid: never taken for killed
    assert store.gates(1)[0].value == 0.25
    store.db.execute("INSERT INTO schema_version VALUES (99, 'later')")
    store.close()
    with pytest.raises(HistoryError, match="schema version 99 is newer"):
        HistoryStore(path)


def test_a_file_that_is_not_a_store_is_named(tmp_path):
    bad = tmp_path / "h.sqlite"
    bad.write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(HistoryError, match="h.sqlite: not a readable history store"):
        HistoryStore(bad)
    with pytest.raises(HistoryError, match="no history store here"):
        HistoryStore(tmp_path / "none.sqlite", create=False)


def _writer(path, k, gates):
    store = HistoryStore(path)
    run = store.begin_run({"model": f"m{k}", "seed": k, "settings": {}})
    for i in range(gates):  # one transaction per gate, as a run writes them while they arrive
        store.add_gates(run, [(_record(f"g[{i}]", i / gates), None)])
    store.finish_run(run, "finished")


def test_concurrent_writers_lose_nothing(tmp_path):
    path = tmp_path / "h.sqlite"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, k, 60)) for k in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    store = HistoryStore(path)
    runs = store.runs()
    assert sorted(r.model for r in runs) == ["m0", "m1", "m2", "m3"] and {r.state for r in runs} == {"finished"}
    assert [len(store.gates(r.id)) for r in runs] == [60] * 4


def _row(run, gate, value, se, sample="s", direction="min"):
    return GateRow(run, gate, None, value, None, None, se, 0.95, 20, 0.1, direction, "pass", None, None, None, sample)


def test_compare_matches_a_z_test_and_holm_from_statsmodels():
    from scipy.stats import norm
    from statsmodels.stats.multitest import multipletests

    a = [_row(1, f"g{i}", 0.5, 0.01 + 0.002 * i, sample="s1") for i in range(6)]
    b = [_row(2, f"g{i}", 0.5 - 0.03 * i, 0.02, sample="s2") for i in range(6)]
    changes = {c.gate: c for c in compare_gates(a, b, alpha=0.05)}
    p = [2 * norm.sf(abs(0.03 * i) / math.hypot(0.01 + 0.002 * i, 0.02)) for i in range(6)]
    reject, adjusted, _, _ = multipletests(p, alpha=0.05, method="holm")
    for i in range(6):
        c = changes[f"g{i}"]
        assert c.pairing == "independent" and c.p_value == pytest.approx(p[i])
        assert c.p_adjusted == pytest.approx(adjusted[i]) and c.changed == bool(reject[i])
        assert c.regressed == (bool(reject[i]) and i > 0)  # a min gate that went down
        half = norm.ppf(0.975) * math.hypot(0.01 + 0.002 * i, 0.02)
        assert c.interval == pytest.approx((-0.03 * i - half, -0.03 * i + half))
    assert sum(c.changed for c in changes.values()) >= 3  # the test can fail: large drops are found


def test_compare_pairs_one_sample_and_says_what_it_cannot_compare():
    same = compare_gates([_row(1, "g", 0.5, 0.03)], [_row(2, "g", 0.5, 0.03)])[0]
    assert (same.pairing, same.delta, same.changed, same.p_value) == ("paired", 0.0, False, 1.0)
    up = compare_gates([_row(1, "m", 0.5, 0.01, direction="max")], [_row(2, "m", 0.6, 0.01, direction="max")])[0]
    assert up.changed and up.regressed  # a max gate that rose regressed
    only = compare_gates([_row(1, "x", 0.5, 0.01)], [_row(2, "y", 0.5, 0.01)])
    assert [c.note for c in only] == ["only in run A", "only in run B"]
    untested = compare_gates([_row(1, "t", 0.5, None)], [_row(2, "t", 0.2, None)])[0]
    assert untested.p_value is None and "no interval or standard error" in untested.note


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1), st.floats(0.001, 0.2), st.floats(0.001, 0.2)),
                min_size=1, max_size=8))
def test_compare_is_antisymmetric(rows):
    a = [_row(1, f"g{i}", va, sa, sample="x") for i, (va, vb, sa, sb) in enumerate(rows)]
    b = [_row(2, f"g{i}", vb, sb, sample="y") for i, (va, vb, sa, sb) in enumerate(rows)]
    ab, ba = compare_gates(a, b), compare_gates(b, a)
    for x, y in zip(ab, ba):
        assert x.delta == pytest.approx(-y.delta) and x.p_value == pytest.approx(y.p_value) and x.changed == y.changed


NAMES = ["test_region_coverage[synthetic-object-africa]", "test_region_precision[synthetic-object_in_country-europe]",
         "test_cis[k1]", "test_worst_region_coverage[synthetic-object]", "TEST_Upper[Africa]"]
EXPRESSIONS = ["africa", "coverage and africa", "not africa", "coverage or cis", "(africa or europe) and not country",
               "not (coverage and object)", "AFRICA", "region and not worst and (precision or coverage)", "k1 or k2"]


@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_k_expressions_select_as_pytests_own(expr):
    from _pytest.mark.expression import Expression

    reference = Expression.compile(expr)
    mine = matcher(expr)
    for name in NAMES:
        assert mine(name) == reference.evaluate(lambda word, name=name: word.lower() in name.lower()), (expr, name)


@pytest.mark.parametrize("expr", ["africa and", "(africa", "and x", "a b"])
def test_a_malformed_expression_is_named(expr):
    with pytest.raises(ExpressionError, match="-k"):
        matcher(expr)


@pytest.mark.parametrize("counts", [(12, 40, 3, 40), (0, 25, 9, 30), (30, 30, 22, 35)])
def test_compare_of_wilson_intervals_is_newcombes_interval_from_statsmodels(counts):
    from statsmodels.stats.proportion import confint_proportions_2indep, proportion_confint

    ka, na, kb, nb = counts

    def row(run, k, n):
        lo, hi = proportion_confint(k, n, alpha=0.05, method="wilson")
        return GateRow(run, "g", None, k / n, lo, hi, None, 0.95, n, 0.1, "min", "pass", None, None, None, f"s{run}")

    (c,) = compare_gates([row(1, ka, na)], [row(2, kb, nb)], alpha=0.05)
    assert c.interval == pytest.approx(confint_proportions_2indep(kb, nb, ka, na, method="newcomb", compare="diff"))
    assert (c.p_value <= 0.05) == (not c.interval[0] <= 0 <= c.interval[1])  # the p-value is the interval's own


def test_a_gate_that_lost_its_value_is_listed_as_changed():
    lost = GateRow(2, "g", None, None, None, None, None, None, 0, 0.1, "min", "fail", None, None, None, "s2")
    (c,) = compare_gates([_row(1, "g", 0.4, 0.02)], [lost])
    assert c.changed and c.regressed and c.p_value is None and "undefined in run B" in c.note


def test_the_report_draws_each_gates_trend_and_lists_what_changed(tmp_path):
    from pathlib import Path

    from t2i_fairness.gating.session import GateSession
    from t2i_fairness.history.view import history_view
    from t2i_fairness.report.html import render_report
    from t2i_fairness.report.terminal import GateReport

    store = HistoryStore(tmp_path / "h.sqlite")
    for values in ({"a": 0.50, "b": 0.50, "c": 0.30}, {"a": 0.52, "b": 0.49, "c": 0.31}, {"a": 0.51, "b": 0.20, "c": None}):
        run = store.begin_run({"model": "m", "settings": {}})
        store.add_gates(run, [(_record(g, float("nan") if v is None else v, se=0.02,
                                       status="fail" if v is None else "pass"), f"s{run}") for g, v in values.items()])
        store.finish_run(run, "finished")
    view = history_view(store, run)
    assert view.previous.id == 2 and [(c.gate, c.regressed) for c in view.changed] == [("b", True), ("c", True)]
    session = GateSession(Path("t.yaml"))
    for g, v in (("a", 0.51), ("b", 0.20)):
        session.add({**_record(g, v, se=0.02), "nodeid": f"t.py::{g}", "bound": 0.1, "write": None, "message": "",
                     "provenance": {}})
    session.history = view
    page = render_report(session, tmp_path, "demo", {})
    assert page.count('<svg class="trend"') == 2 and page.count("<circle") >= 2 * 3
    section = page[page.index('id="since"'):page.index("</section>", page.index('id="since"'))]
    assert "Against #2" in section and "<td>b</td>" in section and "undefined in run B" in section
    assert "<td>a</td>" not in section
    assert any("2 of 3 gate(s) changed beyond noise (2 regressed" in line for line in GateReport(session).lines())


def _unit_record(gate, values, ids=None):
    """A gate record whose value is the mean of its units, with the independent normal interval of that mean."""
    v = np.asarray(values, dtype=float)
    se = float(v.std(ddof=1) / np.sqrt(v.size))
    rec = _record(gate, float(v.mean()), se=se)
    rec["units"] = {"ids": ids or [f"p{i}" for i in range(v.size)], "values": v.tolist()}
    return rec


def test_paired_units_give_the_paired_t_interval_narrower_than_the_independent_one(tmp_path):
    from scipy import stats

    rng = np.random.default_rng(0)
    base = rng.uniform(0.2, 0.8, 60)  # prompts differ a lot; each moves by about -0.03 between the runs
    later = base - 0.03 + rng.normal(0.0, 0.01, 60)
    store = HistoryStore(tmp_path / "h.sqlite")
    runs = []
    for values, ids, sample in ((base, None, "s"), (later, None, "s"), (later, [f"q{i}" for i in range(60)], "s"),
                                (later, None, "t")):
        runs.append(store.begin_run({"model": "m", "settings": {}}))
        store.add_gates(runs[-1], [(_unit_record("g", values, ids), sample)])
    a, same, other_ids, other_sample = (store.gates(r) for r in runs)
    assert a[0].unit_values()["p7"] == base[7] and "units" not in store.record(runs[0], "g")
    paired = compare_gates(a, same)[0]
    ref = stats.ttest_rel(later, base)  # scipy's paired t test: the reference
    low, high = ref.confidence_interval(0.95)
    assert paired.pairing == "paired" and paired.p_value == pytest.approx(ref.pvalue, rel=1e-9)
    assert paired.interval == pytest.approx((low, high), rel=1e-9) and paired.changed and paired.regressed
    for fallback, label in ((other_ids, "same sample"), (other_sample, "independent")):
        c = compare_gates(a, fallback)[0]  # unit ids or sample differ: the independent interval, which misses the shift
        assert c.pairing == label and not c.changed and c.delta == pytest.approx(paired.delta)
        assert c.interval[1] - c.interval[0] > 10 * (paired.interval[1] - paired.interval[0])


def test_a_version_2_store_migrates_to_units_and_reads_its_old_gates(tmp_path):
    path = tmp_path / "v2.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied TEXT NOT NULL)")
    for version, statements in MIGRATIONS[:2]:
        for sql in statements:
            db.execute(sql)
        db.execute("INSERT INTO schema_version VALUES (?, 'then')", (version,))
    db.execute("INSERT INTO runs (started, status, model) VALUES ('2026-01-01T00:00:00+00:00', 'finished', 'v2')")
    db.execute("INSERT INTO gates (run_id, gate, value, se, sample) VALUES (1, 'g', 0.5, 0.02, 's')")
    db.commit()
    db.close()
    store = HistoryStore(path)
    assert store.version() == 3 and store.gates(1)[0].units is None
    run = store.begin_run({"model": "v3", "settings": {}})
    store.add_gates(run, [(_unit_record("g", [0.4, 0.5, 0.9]), "s")])
    assert store.gates(run)[0].unit_values() == {"p0": 0.4, "p1": 0.5, "p2": 0.9}
    c = compare_gates(store.gates(1), store.gates(run))[0]  # the old run kept no units: not paired
    assert c.pairing == "same sample" and c.delta == pytest.approx(0.1) and c.interval is not None


def test_the_units_a_judged_gate_keeps_are_its_clustered_prompt_shares():
    from t2i_fairness.gating.gate import measure, unit_values
    from t2i_fairness.metrics.intervals.clusters import cluster_mean_interval

    values, prompts = [1.0, 1.0, 0.0, 1.0, 1.0, 0.0], ["a", "a", "b", "b", "c", "c"]
    iv = cluster_mean_interval(values, prompts)
    units = unit_values(measure("g", iv.estimate, n=6, interval=iv))
    assert units == {"ids": ["0", "1", "2"], "values": [1.0, 0.5, 0.5]}
    assert unit_values(measure("g", 0.9, n=6, interval=iv)) is None  # not the mean of its units: none kept
