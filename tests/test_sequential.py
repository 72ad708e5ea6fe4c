"""The sequential gates' statistics (t2i_fairness.metrics.sequential), measured by simulation.

* validity: each e-process is a supermartingale under H0 at the boundary: over 2,000 simulated
  streams, ``sup_t K_t >= 1 / alpha`` happens in at most ``alpha`` of them (binomial slack: the
  one-sided 99.9% upper tolerance of 2,000 draws at 0.05 is 0.066, so the assertion is
  ``rate <= 0.05 + 3.1 * sqrt(0.05 * 0.95 / 2000) = 0.065``);
* the confidence sequence agrees with ``confseq.betting.betting_cs`` (same construction) within
  2 grid steps (0.002 at 1,000 breaks) when confseq is installed (a test-time reference only);
* e-Holm controls the family-wise error at every look; futility flips a fixed-N fail into a pass
  no more often than its stated bound ``gamma + delta``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from t2i_fairness.metrics.sequential import (
    confidence_sequence,
    e_closed_rejections,
    e_process,
    look,
    mixture_cs,
    mixture_e_process,
    round_sizes,
)

STREAMS = 2000
ALPHA = 0.05
SLACK = ALPHA + 3.1 * math.sqrt(ALPHA * (1 - ALPHA) / STREAMS)


@pytest.mark.parametrize("direction", ["min", "max"])
@pytest.mark.parametrize("bound", [0.1, 0.5, 0.85])
def test_betting_e_process_is_valid_at_the_boundary(direction, bound):
    rng = np.random.default_rng([1, int(bound * 100), direction == "min"])
    y = rng.binomial(1, bound, size=(STREAMS, 200)).astype(float)  # true share on the bound
    hits = sum(e_process(row, bound, direction).max() >= 1 / ALPHA for row in y)
    assert hits / STREAMS <= SLACK, (hits, STREAMS)


@pytest.mark.parametrize("direction", ["min", "max"])
@pytest.mark.parametrize("bound", [0.05, 0.5, 0.9])
def test_mixture_e_process_is_valid_at_the_boundary(direction, bound):
    # sweeps of 50 prompts whose own shares differ (a mean at the bound, prompts spread around it)
    rng = np.random.default_rng([2, int(bound * 100), direction == "min"])
    spread = np.clip(bound + rng.uniform(-0.05, 0.05, 50), 0, 1)
    spread += bound - spread.mean()
    images = rng.random((STREAMS, 64, 50)) < spread  # (stream, sweep, prompt)
    y = images.mean(axis=2)
    k = np.array([mixture_e_process(row, bound, direction, prompts=50, n_target=16).max() for row in y])
    assert (k >= 1 / ALPHA).mean() <= SLACK


def test_e_processes_grow_under_the_alternative():
    rng = np.random.default_rng(3)
    y = rng.binomial(1, 0.3, 400).astype(float)
    assert e_process(y, 0.5, "min")[-1] > 1e4
    sweeps = rng.binomial(100, 0.45, 32) / 100
    assert mixture_e_process(sweeps, 0.5, "min", prompts=100, n_target=8)[-1] > 1e4


def test_mixture_cs_covers_at_every_time():
    rng = np.random.default_rng(4)
    y = rng.binomial(40, 0.3, size=(STREAMS, 64)) / 40
    miss = 0
    for row in y:
        lo, hi = mixture_cs(row, prompts=40, n_target=16)
        miss += bool(((lo > 0.3) | (hi < 0.3)).any())
    assert miss / STREAMS <= SLACK


def test_betting_cs_covers_at_every_time():
    rng = np.random.default_rng(5)
    y = rng.beta(2, 5, size=(400, 100))  # mean 2/7
    miss = 0
    for row in y:
        lo, hi = confidence_sequence(row, 0.05, breaks=200)
        miss += bool(((lo > 2 / 7) | (hi < 2 / 7)).any())
    assert miss / 400 <= 0.05 + 3.1 * math.sqrt(0.05 * 0.95 / 400)


def test_confidence_sequence_agrees_with_confseq():
    pytest.importorskip("multiprocess")
    if not hasattr(np, "float_"):  # confseq 0.0.11 still names np.float_ (removed in NumPy 2)
        np.float_ = np.float64
    betting = pytest.importorskip("confseq.betting")
    rng = np.random.default_rng(6)
    for x in (rng.beta(2, 5, 80), rng.binomial(1, 0.7, 80).astype(float), rng.uniform(0, 1, 80)):
        ours = confidence_sequence(x, 0.05, breaks=1000, running_intersection=False)
        lo, hi = betting.betting_cs(x, alpha=0.05, breaks=1000, running_intersection=False)
        tol = 2.0 / 1000
        assert np.abs(ours[0] - lo).max() <= tol and np.abs(ours[1] - hi).max() <= tol


def test_e_holm_controls_family_wise_error_over_looks():
    # 20 gates, 15 true nulls on the bound, 5 far alternatives; rejections at any of 5 looks count
    rng = np.random.default_rng(7)
    runs, alpha, false = 400, 0.05, 0
    sizes = round_sizes(64, 4)
    for _ in range(runs):
        means = np.r_[np.full(15, 0.5), np.full(5, 0.3)]
        y = rng.binomial(30, means[:, None], size=(20, 64)) / 30
        rejected = np.zeros(20, bool)
        for n in sizes:
            e = np.array([mixture_e_process(y[g, :n], 0.5, "min", prompts=30, n_target=16).max() for g in range(20)])
            rejected |= e_closed_rejections(e, alpha)
        false += bool(rejected[:15].any())
    assert false / runs <= alpha + 3.1 * math.sqrt(alpha * (1 - alpha) / runs)


def test_e_holm_is_at_least_bonferroni():
    rng = np.random.default_rng(8)
    for _ in range(200):
        e = rng.lognormal(0, 3, 30)
        bonf = e >= 30 / 0.05
        assert not (bonf & ~e_closed_rejections(e, 0.05)).any()


@pytest.mark.parametrize("batch", [2, 4])
def test_futility_rarely_flips_a_fixed_n_fail(batch):
    """A gate just past its bound (the fixed-N test fails it about half the time): how often does
    the sequential design pass it by futility or "met" when the fixed-N test on the same images
    fails it? The bound is gamma + delta = 0.06."""
    rng = np.random.default_rng(9)
    P, N, z = 40, 64, 3.7
    se_N = 0.5 / math.sqrt(P * N)
    theta = 0.5 - z * math.sqrt(0.25 / (P * N))
    fixed_fails = flips = 0
    for _ in range(1000):
        y = rng.binomial(P, theta, N) / P
        fixed_fail = y.mean() <= 0.5 - z * se_N
        fixed_fails += fixed_fail
        sizes = round_sizes(N, batch, first=batch)
        for n in sizes:
            lk = look(y[:n], N, 0.5, "min", prompts=P, e_threshold=1e12, z_fail=z, looks=len(sizes))
            if lk.reason in ("met", "futility"):
                flips += fixed_fail
                break
            if lk.stopped:
                break
    assert fixed_fails > 300
    assert flips / fixed_fails <= 0.06


# ------------------------------------------------------------------ the rounds controller


def _controller_case(rng, shares, kinds=None, N=16, P=60):
    from pathlib import Path

    from t2i_fairness.gating.gate import measure
    from t2i_fairness.gating.sequential import SequentialGate
    from t2i_fairness.gating.thresholds import Bound, ThresholdFile
    from t2i_fairness.metrics.intervals import precision_interval

    data = {f"g{i}": rng.random((P, N)) < s for i, s in enumerate(shares)}
    kinds = kinds or ["share"] * len(shares)
    gates = [SequentialGate(g, k, tuple(f"{g}-{p}" for p in range(P)), N) for g, k in zip(data, kinds)]
    t = ThresholdFile(Path("t.yaml"), {g: Bound("min", 0.5) for g in data})

    def full(g):
        x = data[g].ravel()
        return measure(g, float(x.mean()), n=x.size, interval=precision_interval(x))

    return data, gates, t, full


def test_controller_never_uses_more_than_fixed_n_and_fixed_kinds_run_to_n():
    from t2i_fairness.gating.sequential import run_rounds
    from t2i_fairness.spine.options import T2IOptions

    rng = np.random.default_rng(10)
    data, gates, t, full = _controller_case(rng, [0.9, 0.2, 0.52, 0.9], kinds=["share", "share", "share", "ratio"])
    out = run_rounds(gates, t, T2IOptions(), batch=4, scores=lambda g, n: data[g][:, :n], coverage=None,
                     full_measurement=full)
    assert all(r["images_per_prompt"] <= r["planned_per_prompt"] for r in out.records.values())
    assert out.records["g3"]["reason"] == "ran to N" and "no valid early stop" in out.records["g3"]["note"]
    assert out.records["g1"]["verdict"] == "fail" and out.records["g1"]["round"] == 1
    assert out.images < out.planned_images == 4 * 60 * 16


def test_controller_names_a_gate_without_a_bound():
    from pathlib import Path

    from t2i_fairness.gating.sequential import SequentialGate, run_rounds
    from t2i_fairness.gating.thresholds import ThresholdFile
    from t2i_fairness.spine.options import T2IOptions

    with pytest.raises(ValueError, match="gate lost: no bound in t.yaml"):
        run_rounds([SequentialGate("lost", "share", ("p",), 4)], ThresholdFile(Path("t.yaml"), {}), T2IOptions(),
                   batch=2, scores=None, coverage=None, full_measurement=None)
    with pytest.raises(ValueError, match="unknown sequential kind"):
        SequentialGate("g", "mean", ("p",), 4)


def test_controller_agrees_with_fixed_n_on_clear_gates():
    """Gates far from the bound on either side: the sequential verdict is the fixed-N verdict."""
    from t2i_fairness.gating.gate import judge
    from t2i_fairness.gating.sequential import run_rounds
    from t2i_fairness.spine.options import T2IOptions

    rng = np.random.default_rng(11)
    disagree = 0
    for _ in range(20):
        data, gates, t, full = _controller_case(rng, [0.3, 0.7, 0.35, 0.8])
        out = run_rounds(gates, t, T2IOptions(), batch=4, scores=lambda g, n: data[g][:, :n], coverage=None,
                         full_measurement=full)
        for g in data:
            fixed = judge(full(g), t, {}, T2IOptions(), family_size=4)[0].status
            disagree += fixed != out.records[g]["verdict"]
    assert disagree == 0


def test_max_gates_mirror_min_gates():
    """A max gate on 1 - y against 1 - bound decides exactly as the min gate on y against bound."""
    rng = np.random.default_rng(12)
    for share in (0.3, 0.45, 0.5, 0.55, 0.8):
        for n in (4, 8, 16):
            y = rng.binomial(50, share, n) / 50
            a = look(y, 16, 0.5, "min", prompts=50, e_threshold=200.0, z_fail=3.0, looks=3)
            b = look(1 - y, 16, 0.5, "max", prompts=50, e_threshold=200.0, z_fail=3.0, looks=3)
            assert a.reason == b.reason
            assert a.wealth == pytest.approx(b.wealth) and a.conditional_power == pytest.approx(b.conditional_power)
            assert a.lower == pytest.approx(1 - b.upper) and a.upper == pytest.approx(1 - b.lower)


@pytest.mark.parametrize("share", [0.40, 0.44])
def test_controller_bonferroni_never_rejects_more_than_e_holm(share):
    """run_rounds(control=...): the suite's per-gate Bonferroni (wealth >= m / (alpha/2)) fails a gate at a
    look only where e-Holm has failed it at that look or earlier, so its fails are a subset of e-Holm's and
    never come sooner; with 20 gates just under the bound e-Holm's pooled evidence fails more of them early."""
    from t2i_fairness.gating.sequential import e_threshold, run_rounds
    from t2i_fairness.spine.options import T2IOptions

    rng = np.random.default_rng(5)
    data, gates, t, full = _controller_case(rng, [share] * 20, P=60)
    out = {c: run_rounds(gates, t, T2IOptions(), batch=4, scores=lambda g, n: data[g][:, :n], coverage=None,
                         full_measurement=full, control=c) for c in ("e-holm", "bonferroni")}
    holm, bonf = out["e-holm"].records, out["bonferroni"].records
    early = {c: {g for g, r in out[c].records.items() if r["reason"] == "fail: bound excluded"} for c in out}
    assert early["bonferroni"] <= early["e-holm"]
    assert {g for g, r in bonf.items() if r["verdict"] == "fail"} <= {g for g, r in holm.items() if r["verdict"] == "fail"}
    for g in early["bonferroni"]:
        assert holm[g]["round"] <= bonf[g]["round"]
        assert bonf[g]["wealth"] >= bonf[g]["e_threshold"] == e_threshold(0.05, 20) == 800.0
    # where they differ, in the expected direction: e-Holm stops sooner or fails more
    assert out["e-holm"].images < out["bonferroni"].images or len(early["e-holm"]) > len(early["bonferroni"])
    assert "Bonferroni" in out["bonferroni"].method and "e-Holm" in out["e-holm"].method
    with pytest.raises(ValueError, match="`control` must be one of"):
        run_rounds(gates, t, T2IOptions(), batch=4, scores=None, coverage=None, full_measurement=None, control="holm")


def test_controller_suite_looks_are_decide_look():
    """run_rounds(decide="suite") decides every look with decide_look (the suite's function) on the gate's value:
    a gate's stopping reason and round are those of decide_look on the first n images of its data."""
    from t2i_fairness.gating.sequential import Sweeps, decide_look, run_rounds
    from t2i_fairness.metrics.sequential import round_sizes
    from t2i_fairness.spine.options import T2IOptions

    rng = np.random.default_rng(13)
    shares = [0.2, 0.45, 0.5, 0.55, 0.62, 0.9]
    data, gates, t, full = _controller_case(rng, shares, P=40)
    out = run_rounds(gates, t, T2IOptions(), batch=4, scores=lambda g, n: data[g][:, :n], coverage=None,
                     full_measurement=full, control="bonferroni", decide="suite")
    sizes = round_sizes(16, 4)
    for g, rec in out.records.items():
        for r, n in enumerate(sizes):
            lk = decide_look("share", float(data[g][:, :n].mean()), Sweeps(40, n, 16), t.gates[g], alpha=0.05,
                             family_size=len(shares), rounds=len(sizes))
            if lk.reason != "open":
                break
        assert (rec["round"], rec["images_per_prompt"]) == (r + 1, n), g
        expected = {"fail": "fail: bound excluded", "met": "pass: bound met with certainty",
                    "futility": "pass: futility", "full": "ran to N"}[lk.reason]
        assert rec["reason"] == expected, g
    assert {r["reason"] for r in out.records.values()} >= {"fail: bound excluded", "ran to N"}
    with pytest.raises(ValueError, match="`decide` must be"):
        run_rounds(gates, t, T2IOptions(), batch=4, scores=None, coverage=None, full_measurement=None, decide="suite")
