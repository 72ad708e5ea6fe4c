"""Sequential gates against fixed N, on simulated per-image scores, through the suite's decision code.

``python bench/bench_sequential.py --procedural 20`` runs the procedural-world part instead: the real suite
through pytest, fixed N and ``--t2i-sequential`` on the same seeds (``bench/bench_sequential_suite.py``, where
its options are; any option this parser does not know is passed on to it).

``python bench/bench_sequential.py --runs 200`` simulates whole runs of a scaled-down paper gate mix
and decides every run twice on the same images:

* **fixed N**: every gate on all ``N`` images per prompt; ``gating.gate.measure`` + ``judge`` at the
  default options (significant mode, Holm's first step ``alpha / m``, ``alpha = 0.05``);
* **sequential** (:func:`t2i_fairness.gating.sequential.run_rounds` on
  :mod:`t2i_fairness.metrics.sequential`): rounds of ``round_sizes(N, batch)`` images per prompt; after each
  round a share gate fails early when its normal-mixture e-process reaches ``e_threshold(alpha, m) =
  m / (alpha / 2)`` (``--control bonferroni``, the default: the rule of the suite's ``--t2i-sequential``,
  per gate) or by closed e-testing (e-Holm) at ``alpha / 2`` over every share gate's e-process
  (``--control e-holm``: what docs/sequential.md's first tables measured); with ``--control bonferroni``
  each look is decided by default by ``gating.sequential.decide_look`` on the gate's value, the function the
  suite calls (``--decide suite``; ``--decide sweeps``: ``metrics.sequential.look`` on the observed sweeps,
  as e-Holm always is); a share gate passes early when its confidence sequence
  clears the bound ("met") or by futility (conditional power of the full-N test below 0.01 at the
  sequence's least favourable mean); a coverage gate passes early when its coverage at ``n`` already
  meets a ``min`` bound (nested samples); a gate that reaches ``N`` gets the fixed-N test
  (``judge``) at ``alpha / 2``. Gates of the kinds with no valid early stop are not simulated here:
  they run to ``N`` in both designs (counted at 100% of their images in the paper-mix column).

The simulated run (parameters fixed before any run):
    CIS-like share gates: 30 gates, each over 100 prompts x 16 images (the paper's N = 16 images per
    prompt); prompt ``p`` of gate ``g`` shows its component with probability
    ``clip(theta_g + N(0, 0.1^2))``, ``theta_g ~ U(0.3, 0.9)`` (one fixed draw).
    DIG In region gates: :func:`simulated_canaries.dig_world` features, 9 objects x 40 real images per
    region and 24 generated images per object (batch 4): a precision gate (a share: per image, inside
    the real manifold) and a coverage gate per region, 6 regions.
    Bounds: written by the update flow (``judge`` with ``--t2i-update-thresholds``, level 0.99) from
    one reference run of the unchanged model at another seed.

Scenarios: ``null`` (the unchanged model, fresh seeds); each simulable canary of
``t2i_fairness.canaries``: ``degrade_region:africa:0.6`` and ``collapse_region:africa`` (DIG In
features, as in ``bench/simulated_canaries.py``; the collapse as every image of the region one draw
plus noise of 1e-3, so that dedupe leaves them), ``drop_component`` (5 of the 30 CIS gates: their
prompts' shares times 0.6); ``far floor`` (policy floors: coverage floor 0.3 and CIS floors at
``theta_g / 2``); ``borderline`` (every CIS bound on its gate's true value). ``answer_language`` and
``shift_group_share`` move IndicTTI and word-level gates, kinds that run to ``N`` (same images, same
test at ``alpha / 2``): not simulated.
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
for p in (REPO / "plugin", REPO / "bench"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from simulated_canaries import REGIONS, DigSize, dig_world, upper95  # noqa: E402
from t2i_fairness.gating.gate import judge, measure  # noqa: E402
from t2i_fairness.gating.thresholds import Bound, ThresholdFile  # noqa: E402
from t2i_fairness.metrics.intervals import precision_interval  # noqa: E402
from t2i_fairness.metrics.manifold import ball_membership  # noqa: E402
from t2i_fairness.spine.options import T2IOptions  # noqa: E402

ALPHA = 0.05
CIS_GATES, CIS_PROMPTS, CIS_N = 30, 100, 16
DIG = DigSize(9, 40, 24, 0, "bench_sequential")
BATCH = 4
CONTROL = "bonferroni"  # --control
DECIDE = "suite"  # --decide
GROWTH = 2.0  # --growth
DROP = 5  # CIS gates in the drop_component slice
#: the paper preset's planned images per family (issue 24, measured on main) and how they are modelled
PAPER_MIX = {"cis": 656_000, "dig_in": 30_780, "decomposed": 19_440, "word_level": 2_160, "indic_tti": 96}


def _opts(**kw) -> T2IOptions:
    return dataclasses.replace(T2IOptions(), **kw)


def cis_world(seed: int = 0):
    rng = np.random.default_rng([seed, 7])
    theta = rng.uniform(0.3, 0.9, CIS_GATES)
    mu = np.clip(theta[:, None] + rng.normal(0, 0.1, (CIS_GATES, CIS_PROMPTS)), 0.01, 0.99)
    return theta, mu


def cis_images(mu: np.ndarray, rng, drop: bool = False) -> np.ndarray:
    m = mu.copy()
    if drop:
        m[:DROP] *= 0.6
    return rng.random((CIS_GATES, CIS_PROMPTS, CIS_N)) < m[:, :, None]  # (gate, prompt, image)


def dig_images(world, rng, scenario: str) -> dict:
    """Per region: (objects, images, dim) generated features."""
    out = {}
    o, g = DIG.objects, DIG.generated_per_group
    for i, region in enumerate(REGIONS):
        x = world.centres[i][:, None, :] + rng.normal(size=(o, g, world.centres.shape[-1]))
        if region == "africa" and scenario == "degrade_region:africa:0.6":
            m = world.means[region]
            x = m + 0.4 * (x - m) + 0.6 * rng.normal(size=x.shape)
        if region == "africa" and scenario == "collapse_region:africa":
            x = x[0, 0][None, None, :] + 1e-3 * rng.normal(size=x.shape)
        out[region] = x
    return out


def dig_membership(world, feats: dict) -> dict:
    """Per region: (objects, images, n_real) ball membership."""
    out = {}
    for region, x in feats.items():
        man = world.manifolds[region]
        real = world.real[region]
        mem = ball_membership(real, man.radii, x.reshape(-1, x.shape[-1]))
        out[region] = mem.reshape(x.shape[0], x.shape[1], -1)
    return out


def measurements_full(cis: np.ndarray, dig: dict, n: int | None = None) -> list:
    """Fixed-size measurements (first ``n`` images per prompt; all when None), as the gate tests make them."""
    from t2i_fairness.metrics.intervals import coverage_interval

    out = []
    k = CIS_N if n is None else n
    for g in range(CIS_GATES):
        member = cis[g, :, :k].ravel()
        out.append(measure(f"cis[{g}]", float(member.mean()), n=member.size, interval=precision_interval(member)))
    for region, mem in dig.items():
        kk = mem.shape[1] if n is None else n
        m = mem[:, :kk].reshape(-1, mem.shape[-1])
        prec = m.any(axis=1)
        out.append(measure(f"precision[{region}]", float(prec.mean()), n=prec.size, interval=precision_interval(prec)))
        cov_iv = coverage_interval(m)  # rows: generated images, columns: real balls
        out.append(measure(f"coverage[{region}]", cov_iv.estimate, n=m.shape[1], interval=cov_iv))
    return out


def write_bounds(ms: list) -> ThresholdFile:
    update = _opts(update_thresholds=True)
    empty = ThresholdFile(Path("sequential.yaml"), {})
    gates = {}
    for m in ms:
        record, _ = judge(m, empty, {}, update)
        gates[m.gate] = Bound(m.direction, record.write, margin=record.write_margin, level=record.write_level)
    return ThresholdFile(Path("sequential.yaml"), gates)


def policy(thresholds: ThresholdFile, theta: np.ndarray, mu: np.ndarray, scenario: str) -> ThresholdFile:
    gates = dict(thresholds.gates)
    if scenario == "far floor":
        for g in range(CIS_GATES):
            gates[f"cis[{g}]"] = Bound("min", float(theta[g] / 2), policy=True)
        for r in REGIONS:
            gates[f"coverage[{r}]"] = Bound("min", 0.3, policy=True)
    if scenario == "borderline":
        for g in range(CIS_GATES):  # the gate's true value: the mean of its prompts' shares
            gates[f"cis[{g}]"] = Bound("min", float(mu[g].mean()), policy=True)
    return ThresholdFile(thresholds.path, gates)


def fixed_verdicts(ms: list, thresholds: ThresholdFile, alpha: float) -> dict:
    o = _opts(alpha=alpha)
    return {m.gate: judge(m, thresholds, {}, o, family_size=len(ms))[0].status for m in ms}


def sequential_run(cis: np.ndarray, dig: dict, thresholds: ThresholdFile, control: str | None = None,
                   decide: str | None = None) -> tuple[dict, dict]:
    """Verdicts and images-per-prompt used per gate under the sequential design
    (:func:`t2i_fairness.gating.sequential.run_rounds`, the controller a sequential run uses)."""
    from t2i_fairness.gating.sequential import SequentialGate, run_rounds

    gates = [SequentialGate(f"cis[{g}]", "share", tuple(f"cis{g}-{p}" for p in range(CIS_PROMPTS)), CIS_N)
             for g in range(CIS_GATES)]
    for r in REGIONS:
        prompts = tuple(f"{r}-{o}" for o in range(DIG.objects))
        gates += [SequentialGate(f"precision[{r}]", "share", prompts, DIG.generated_per_group),
                  SequentialGate(f"coverage[{r}]", "coverage", prompts, DIG.generated_per_group)]

    def scores(gate: str, n: int) -> np.ndarray:
        if gate.startswith("cis"):
            return cis[int(gate[4:-1]), :, :n]
        return dig[gate[10:-1]][:, :n].any(axis=2)

    def coverage(gate: str, n: int) -> float:
        mem = dig[gate[9:-1]][:, :n].reshape(-1, dig[gate[9:-1]].shape[-1])
        return float(mem.any(axis=0).mean())

    full = {}

    def full_measurement(gate: str):
        if not full:
            full.update({m.gate: m for m in measurements_full(cis, dig)})
        return full[gate]

    out = run_rounds(gates, thresholds, _opts(alpha=ALPHA), batch=BATCH, scores=scores, coverage=coverage,
                     full_measurement=full_measurement, growth=GROWTH, control=control or CONTROL,
                     decide=decide or (DECIDE if (control or CONTROL) == "bonferroni" else "sweeps"))
    verdict = {g: r["verdict"] for g, r in out.records.items()}
    short = {"fail: bound excluded": "fail", "pass: bound met with certainty": "met", "pass: futility": "futility",
             "ran to N": "full"}
    return verdict, {"used": {g: r["images_per_prompt"] for g, r in out.records.items()},
                     "reason": {g: short[r["reason"]] for g, r in out.records.items()},
                     "images": (out.images, out.planned_images)}


def slice_of(scenario: str) -> set:
    if scenario.startswith(("degrade_region", "collapse_region")):
        return {"precision[africa]", "coverage[africa]"}
    if scenario == "drop_component":
        return {f"cis[{g}]" for g in range(DROP)}
    return set()


def run(runs: int, seed: int = 0, control: str | None = None, decide: str | None = None) -> list[dict]:
    theta, mu = cis_world(seed)
    world = dig_world(DIG, seed)
    ref = np.random.default_rng([seed, 1000])
    base = write_bounds(measurements_full(cis_images(mu, ref), dig_membership(world, dig_images(world, ref, "null"))))
    scenarios = ["null", "degrade_region:africa:0.6", "collapse_region:africa", "drop_component", "far floor",
                 "borderline"]
    rows = []
    for scenario in scenarios:
        thresholds = policy(base, theta, mu, scenario)
        sl = slice_of(scenario)
        acc = {"fixed_false": 0, "seq_false": 0, "fixed_detect": 0, "seq_detect": 0, "flips": 0, "slice_differ": 0, "reasons": {},
               "images": {"cis": [0, 0], "dig_in": [0, 0], "coverage": [0, 0]}}
        for i in range(runs):
            rng = np.random.default_rng([seed, 1, scenarios.index(scenario), i])
            cis = cis_images(mu, rng, drop=scenario == "drop_component")
            dig = dig_membership(world, dig_images(world, rng, scenario))
            ms = measurements_full(cis, dig)
            fixed = fixed_verdicts(ms, thresholds, ALPHA)
            seq, info = sequential_run(cis, dig, thresholds, control, decide)
            acc["fixed_false"] += any(v == "fail" for g, v in fixed.items() if g not in sl)
            acc["seq_false"] += any(v == "fail" for g, v in seq.items() if g not in sl)
            if sl:
                acc["fixed_detect"] += any(fixed[g] == "fail" for g in sl)
                acc["seq_detect"] += any(seq[g] == "fail" for g in sl)
            acc["flips"] += sum(fixed[g] == "fail" and seq[g] != "fail" for g in fixed)
            acc["slice_differ"] += sum((fixed[g] == "fail") != (seq[g] == "fail") for g in sl)
            for g, why in info["reason"].items():
                kind = "cis" if g.startswith("cis") else g.split("[")[0]
                key = f"{kind}:{why if why != 'full' else 'full:' + seq[g]}"
                acc["reasons"][key] = acc["reasons"].get(key, 0) + 1
            for g, n in info["used"].items():
                fam = "cis" if g.startswith("cis") else "coverage" if g.startswith("coverage") else "dig_in"
                acc["images"][fam][0] += n
                acc["images"][fam][1] += CIS_N if fam == "cis" else DIG.generated_per_group
            # a region's images are needed until both its gates stop
            for r in REGIONS:
                acc["images"].setdefault("dig_prompt", [0, 0])
                acc["images"]["dig_prompt"][0] += max(info["used"][f"precision[{r}]"], info["used"][f"coverage[{r}]"])
                acc["images"]["dig_prompt"][1] += DIG.generated_per_group
        rows.append({"scenario": scenario, "runs": runs, **acc})
    return rows


def paper_share(row: dict) -> float:
    """Images used as a share of fixed N over the paper preset's mix (kinds without early stop at 100%)."""
    f_cis = row["images"]["cis"][0] / row["images"]["cis"][1]
    f_dig = row["images"]["dig_prompt"][0] / row["images"]["dig_prompt"][1]
    used = PAPER_MIX["cis"] * f_cis + PAPER_MIX["dig_in"] * f_dig + sum(
        v for k, v in PAPER_MIX.items() if k not in ("cis", "dig_in"))
    return used / sum(PAPER_MIX.values())


def table(rows: list[dict]) -> list[str]:
    def rate(h, n):
        from scipy.stats import beta

        lo = 0.0 if h == 0 else float(beta.ppf(0.025, h, n - h + 1))
        hi = 1.0 if h == n else float(beta.ppf(0.975, h + 1, n - h))
        return f"{h}/{n} [{lo:.3f}, {hi:.3f}]"

    out = ["| scenario | runs | CIS-like share gates: images | DIG In precision | DIG In coverage | DIG In prompts "
           "(both gates) | paper mix | FWER fixed N | FWER sequential | slice caught fixed / sequential | "
           "fixed-N fails not failed sequentially | slice gate verdicts that differ |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        im = r["images"]
        f = {k: f"{v[0] / v[1]:.0%}" for k, v in im.items()}
        caught = f"{r['fixed_detect']}/{r['runs']} / {r['seq_detect']}/{r['runs']}" if slice_of(r["scenario"]) else "-"
        out.append(f"| {r['scenario']} | {r['runs']} | {f['cis']} | {f['dig_in']} | {f['coverage']} | "
                   f"{f['dig_prompt']} | {paper_share(r):.0%} | {rate(r['fixed_false'], r['runs'])} | "
                   f"{rate(r['seq_false'], r['runs'])} | {caught} | {r['flips']} | "
                   f"{r['slice_differ'] if slice_of(r['scenario']) else '-'} |")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--procedural", type=int, default=None, metavar="RUNS",
                    help="run the procedural-world part instead: RUNS pytest seeds per scenario, both designs "
                         "(bench/bench_sequential_suite.py; its own options pass through)")
    ap.add_argument("--runs", type=int, default=200, help="simulated runs per scenario (>= 1)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--growth", type=float, default=GROWTH, help="round size factor (> 1)")
    ap.add_argument("--reasons", action="store_true",
                    help="also print the stopping reasons and exact images per scenario")
    ap.add_argument("--batch", type=int, default=None,
                    help=f"generation batch size: rounds are its multiples (default {BATCH}; procedural: 2)")
    ap.add_argument("--control", choices=("bonferroni", "e-holm"), default="bonferroni",
                    help="early-fail rule at alpha/2: per-gate Bonferroni e-threshold m/(alpha/2) (the suite's "
                         "--t2i-sequential; default) or e-Holm closed testing")
    ap.add_argument("--decide", choices=("suite", "sweeps"), default="suite",
                    help="with --control bonferroni: decide each look with the suite's decide_look on the gate's "
                         "value (default) or with look() on the observed sweeps (e-Holm always uses the sweeps)")
    a, rest = ap.parse_known_args(argv)
    if a.procedural is not None:
        import bench_sequential_suite

        return bench_sequential_suite.main(["--runs", str(a.procedural), *(["--batch", str(a.batch)] if a.batch else []),
                                            *(["--reasons"] if a.reasons else []), *rest])
    if rest:
        ap.error(f"unrecognized arguments: {' '.join(rest)}")
    a.batch = BATCH if a.batch is None else a.batch
    if a.batch < 1 or a.growth <= 1:
        ap.error("--batch must be >= 1 and --growth > 1")
    if a.decide == "suite" and a.control != "bonferroni":
        a.decide = "sweeps"  # decide_look has the per-gate threshold built in: e-Holm decides on the sweeps
    globals()["GROWTH"], globals()["BATCH"], globals()["CONTROL"], globals()["DECIDE"] = (a.growth, a.batch, a.control,
                                                                                         a.decide)
    if a.runs < 1:
        ap.error("--runs must be >= 1")
    t0 = time.time()
    rows = run(a.runs, a.seed)
    print(f"# bench_sequential: {a.runs} runs per scenario, seed {a.seed}, batch {a.batch}, growth {a.growth:g}, "
          f"control {a.control}, decide {a.decide}, "
          f"{platform.node()} "
          f"({platform.processor() or platform.machine()}), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"{time.time() - t0:.0f} s")
    print("\n".join(table(rows)))
    if a.reasons:
        for r in rows:
            print(r["scenario"], dict(sorted(r["reasons"].items())), "images used/planned:",
                  {k: tuple(v) for k, v in r["images"].items()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
