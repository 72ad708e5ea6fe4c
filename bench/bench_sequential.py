"""``--t2i-sequential`` against fixed N on simulated runs of the paper preset's gate mix, decided by the product's code.

``python bench/bench_sequential.py`` (the full run: about an hour on a 2-core machine; ``--quick``: under 3
minutes at a twentieth of CIS and a third of DIG In's objects). ``--procedural RUNS`` runs the real suite
through pytest instead (``bench/bench_sequential_suite.py``; options it does not know pass on).

**What is simulated** (``bench/sequential_worlds.py`` has the worlds):

* **CIS** (93% of the paper preset's images): K = 1, 2, 4, 8, ``M`` prompts per K (10,000 at full scale) x 16
  images, ``C`` components (1,000), prompts a sample (per-prompt rates with between-prompt sd 0.2 or 0.3).
  Gates: CIS_K (cluster shares), the drop per component (MOVER over the CIS_K), the per-component rate
  floor (worst of the components, each a cluster share over the prompts naming it, going on with its open
  components only). Looks are prefixes of each K's drawn prompt list, each prompt with all its images:
  the product's ``cis_looks(M, first=M/16)`` (``--cis-first``; M/16, then growing by sqrt(2)). The order test (futility only, since b80b72b): an order
  study with no order effect per run, decided by the product's rule as ``bench_order_futility.py`` does; it holds
  the first prompts of K = 8 it read and their shuffles (1,000 each at full scale).
* **DIG In** (4.3%): the ``{object} in {region}`` template (9 objects at full scale, a third of the paper's
  27; 6 regions; 180 real images per object-region, 60 generated per prompt) and every gate kind it has:
  region and object-region precision (share) and coverage (coverage: grows, no early fail), worst region and
  object worst region (worst, going on with open regions), disparity (ratio) and object consistency
  (percentile: futility only). Looks: ``round_sizes(60, batch)`` images per prompt (batch 8: 8, 16, 32, 60;
  batch 16: 16, 32, 60). Its image share is applied to all of DIG In's images (the other templates have the
  same gates per region and object).
* **Not simulated, counted at N** in the paper mix: Decomposed-DIG (2.7%), word-level (0.3%), IndicTTI.

**Decisions, on the same simulated images.** Each run is decided twice:

* **fixed N**: every gate's indicator at N (the product's evidence object), judged as the gate fixture judges
  it (``gating.gate.decide`` at ``alpha / m``, ``alpha = 0.05``, ``m`` = 1,435:
  the paper preset's gate tests; an undefined indicator with a bound fails), then Holm over the run
  (``GateSession.adjust``; the 1,435 - simulated gates counted as p = 1): an inconclusive gate
  whose adjusted p-value is <= alpha fails the run;
* **sequential**: ``gating.sequential.loop.Rounds`` over each toy study (its looks nested: look ``n`` is the first ``n``
  images per prompt, or prompts per K, of the same data), each gate then judged as the gate fixture judges the
  indicator the round loop hands it (``gating.gate.decide``: an early stop's verdict, at N the sequential p-value), Holm
  over the run with the sequential p-values.

**Bounds**: (a) written by the update flow (``gating.verdicts.bound_for`` at level 0.99) from one reference run
of the null model at another seed; (b) population bounds: each gate's population value less the margin (a)
wrote; (c) borderline: bounds exactly at the population value. Population values: exact for CIS; for DIG In
the mean of ``--pop-runs`` replicate runs at N (worst-of and ratio gates from their groups' values).

**Scenarios**: ``null`` (bounds a), ``population`` (b), ``borderline`` (c); ``miss-0.05`` and ``miss-0.10`` (bounds
b; a slice of three gates missing its bound by that much: CIS_4, the rate floor (one component) and DIG In
Africa's region precision (a share of Africa's images far from every real image)); the canaries
``degrade_region:africa:0.6``, ``collapse_region:africa``, ``drop_component`` (bounds a).

Images are counted per prompt as the round loop asks for them (a prompt's images: the last look any gate
reading it needed). DIG In's default set-scope de-duplication makes every group's rows depend on the
whole template's images: its images are those of the template's last look (``DIG In``); ``DIG In group``
counts per prompt (``--t2i-dedupe-scope group``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
for _p in (REPO / "plugin", REPO / "bench"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from sequential_worlds import (CIS_KS, CIS_N, DIG_N, CisWorld, DigWorld, SimCis, SimDig, cis_run,  # noqa: E402
                               dig_run)
from simulated_canaries import REGIONS  # noqa: E402
from t2i_fairness.families.cis.study import cis_looks  # noqa: E402
from t2i_fairness.errors import GateSkipped  # noqa: E402
from t2i_fairness.gating.gate import GateContext, decide, measure  # noqa: E402
from t2i_fairness.gating.session import GateRecord, GateSession  # noqa: E402
from t2i_fairness.gating.sequential.loop import GROUP_PARAMETERS, GateCallSpec, Rounds  # noqa: E402
from t2i_fairness.gating.thresholds import Bound, ThresholdFile  # noqa: E402
from t2i_fairness.gating.verdicts import bound_for  # noqa: E402
from t2i_fairness.spine.options import T2IOptions  # noqa: E402
from t2i_fairness.metrics.sequential import round_sizes  # noqa: E402
from t2i_fairness.report.power import underpowered  # noqa: E402

ALPHA = 0.05
PAPER_GATES = 1435  # gate tests of `t2i-fairness plan --t2i-preset paper` (Holm's m)
OPTIONS = T2IOptions(alpha=ALPHA, multiplicity="holm")  # the run's options the gates are decided under
#: images per family of `t2i-fairness plan --t2i-preset paper` (2026-11-26, this branch): family rows; the
#: distinct total is 689,036 (prompts shared between families counted once)
PAPER_MIX = {"cis": 656_000, "dig_in": 30_780, "decomposed": 19_440, "word_influence": 2_160, "indic_tti": 96}
PAPER_DISTINCT = 689_036
REF, TPL = "geode", "object_in_region"
SCENARIOS = ("null", "population", "borderline", "miss-0.05", "miss-0.10", "degrade_region:africa:0.6",
             "collapse_region:africa", "drop_component")
PLANTED = ("test_cis[k4]", "test_cis_component_rate_floor", "test_region_precision[africa]")
MISSED_COMPONENT = 1  # the rate floor's planted component
DROPPED_COMPONENT = 0  # drop_component's


@dataclass(frozen=True)
class Size:
    """The simulated sizes: CIS prompts per K, components, order-test prompts; DIG In objects per region."""

    cis_prompts: int
    components: int
    order_prompts: int
    dig_objects: int

    @property
    def label(self) -> str:
        return (f"CIS {self.cis_prompts} prompts/K x {CIS_N} images, {self.components} components; DIG In "
                f"{self.dig_objects} objects x 6 regions x {DIG_N} images")


FULL = Size(10_000, 1_000, 1_000, 9)
QUICK = Size(500, 50, 50, 3)


@dataclass(frozen=True)
class Gate:
    id: str
    family: str
    method: str
    kwargs: tuple

    @property
    def spec(self) -> GateCallSpec:
        return GateCallSpec(self.id, self.method, tuple(sorted(self.kwargs)))

    @property
    def key(self) -> tuple:
        return self.method, tuple(sorted(self.kwargs))


def cis_gates() -> list[Gate]:
    return ([Gate(f"test_cis[k{k}]", "cis", "cis", (("k", k),)) for k in CIS_KS]
            + [Gate("test_cis_drop_per_component", "cis", "cis_drop_per_component", ()),
               Gate("test_cis_component_rate_floor", "cis", "cis_component_rate_floor", ())])


def dig_gates(objects: int) -> list[Gate]:
    rt = (("reference", REF), ("template", TPL))
    objs = [f"o{j}" for j in range(objects)]
    out = []
    for r in REGIONS:
        out += [Gate(f"test_region_{m}[{r}]", "dig_in", f"region_{m}", rt + (("region", r),))
                for m in ("precision", "coverage")]
        out += [Gate(f"test_object_region_{m}[{o}-{r}]", "dig_in", f"object_region_{m}",
                     rt + (("object", o), ("region", r))) for o in objs for m in ("precision", "coverage")]
    out += [Gate(f"test_worst_region_{m}", "dig_in", f"worst_region_{m}", rt) for m in ("precision", "coverage")]
    out += [Gate(f"test_object_worst_region_{m}[{o}]", "dig_in", f"object_worst_region_{m}", rt + (("object", o),))
            for o in objs for m in ("precision", "coverage")]
    out += [Gate(f"test_region_disparity_{m}", "dig_in", f"region_disparity_{m}", rt) for m in ("precision", "coverage")]
    out += [Gate(f"test_object_region_disparity_coverage[{o}]", "dig_in", "object_region_disparity_coverage",
                 rt + (("object", o),)) for o in objs]
    out += [Gate(f"test_object_consistency[{r or 'all'}]", "dig_in", "object_consistency",
                 (("template", TPL), ("region", r))) for r in (*REGIONS, None)]
    return out


# -------------------------------------------------------------------------------------------- deciding


def judge_indicator(ind, gate: Gate, thresholds: ThresholdFile) -> GateRecord | None:
    """One gate's record, decided by the product's ``gating.gate.decide`` (as the gate fixture decides it) at
    ``alpha / m``: an undefined indicator with a bound, an early stop's verdict, or the test at N (``None``: skipped)."""
    context = GateContext(gate.id, "", None, OPTIONS, thresholds, dict, family_size=PAPER_GATES)
    try:
        return decide(ind, context)
    except GateSkipped:
        return None


def holm(records: dict) -> dict:
    """gate -> failed: a fail, or an inconclusive gate the run's Holm step-down rejects (``GateSession.adjust``; the
    gates not simulated enter it as p = 1)."""
    session = GateSession(Path("thresholds.yaml"), records=[r for r in records.values() if r is not None])
    tested = [r for r in session.records if r.status in ("pass", "fail", "inconclusive") and r.p_value is not None
              and r.p_value == r.p_value]
    session.adjust("holm", ALPHA, untested=PAPER_GATES - len(tested))
    return {g: r is not None and (r.status == "fail" or r.gate in session.escalated) for g, r in records.items()}


@dataclass
class Log:
    """What the round loop asked of the studies: ``(gate key, n, reads)`` per indicator computed."""

    entries: list = field(default_factory=list)

    def raw(self, study, method: str, kwargs):
        key = (method, tuple(sorted((k, v) for k, v in kwargs.items() if k not in GROUP_PARAMETERS)))
        self.entries.append((key, study.n, study.reads(method, dict(kwargs)), kwargs.get("groups"),
                             kwargs.get("cleared")))
        return study.raw_indicator(method, kwargs)


def sequential(study, look, schedule, unit: str, gates: list[Gate], thresholds: ThresholdFile, log: Log) -> dict:
    """Every gate through ``gating.sequential.loop.Rounds`` (the fixture's wiring, fixtures/studies.py): gate -> indicator."""
    import inspect

    from t2i_fairness.families.base import indicator_methods

    methods = indicator_methods(type(study))
    params = {name: tuple(inspect.signature(m.indicator_method).parameters) for name, m in methods.items()}
    loop = Rounds(study, look, schedule, unit, [g.spec for g in gates], thresholds.gates, ALPHA / PAPER_GATES,
                  raw=log.raw, group_methods=params)
    study.round_loop = loop
    try:
        return {g.id: getattr(study, g.method)(**dict(g.kwargs)) for g in gates}
    finally:
        study.round_loop = None


def fixed(study, gates: list[Gate]) -> dict:
    return {g.id: study.raw_indicator(g.method, dict(g.kwargs)) for g in gates}


@contextmanager
def proposal(name: str | None):
    """``--propose worst-futility`` (a proposal, not the product): a worst-of gate's futility limit is its groups' own
    one-sided limits at ``beta_k`` (``min_g`` of each group's limit; ``WorstOf.limit`` divides ``beta_k`` by ``G``) and
    its open groups those whose own limit at ``beta_k`` does not clear ``bound - delta``. A model missing by ``delta``
    in one group still passes early with probability at most ``beta_k`` per look: that group's limit must clear,
    whatever the other groups do. The early-fail test (Bonferroni over the groups) is unchanged. Patched on
    ``metrics.evidence.WorstOf`` for the run of the bench (its displayed interval changes with it)."""
    if name is None:
        yield
        return
    if name != "worst-futility":
        raise ValueError(f"unknown proposal {name!r}")
    from t2i_fairness.metrics.evidence import WorstOf

    saved = WorstOf.limit, WorstOf.open_groups

    def limit(self, alpha, side):
        pick = min if self.worst == "min" else max
        return float(pick(g.limit(alpha, side) for g in self.groups))

    def open_groups(self, bound, direction, beta, delta):
        side = "low" if direction == "min" else "high"
        clear = (lambda v: v > bound - delta) if direction == "min" else (lambda v: v < bound + delta)
        return tuple(lab for lab, g in zip(self.labels, self.groups) if not clear(g.limit(beta, side)))

    WorstOf.limit, WorstOf.open_groups = limit, open_groups
    try:
        yield
    finally:
        WorstOf.limit, WorstOf.open_groups = saved


# -------------------------------------------------------------------------------------------- bounds


def pop_dig(world: DigWorld, runs: int, seed: int) -> dict:
    """DIG In gates' population values: Monte-Carlo means at N of the share, coverage and percentile gates;
    worst-of and ratio gates from their groups' means."""
    gates = dig_gates(world.objects)
    plain = [g for g in gates if not g.method.startswith(("worst", "object_worst", "region_disparity",
                                                          "object_region_disparity"))]
    sums = {g.id: 0.0 for g in plain}
    for i in range(runs):
        study = SimDig(dig_run(world, np.random.default_rng([seed, 90, i])), DIG_N)
        for g in plain:
            sums[g.id] += study.raw_indicator(g.method, dict(g.kwargs)).value / runs
    out = dict(sums)
    objs = [f"o{j}" for j in range(world.objects)]
    for m in ("precision", "coverage"):
        reg = [sums[f"test_region_{m}[{r}]"] for r in REGIONS]
        out[f"test_worst_region_{m}"] = min(reg)
        out[f"test_region_disparity_{m}"] = min(reg) / max(reg)
        for o in objs:
            groups = [sums[f"test_object_region_{m}[{o}-{r}]"] for r in REGIONS]
            out[f"test_object_worst_region_{m}[{o}]"] = min(groups)
            if m == "coverage":
                out[f"test_object_region_disparity_coverage[{o}]"] = min(groups) / max(groups)
    return out


def pop_cis(world: CisWorld) -> dict:
    p = world.population()
    out = {f"test_cis[k{k}]": p[("cis", (("k", k),))] for k in CIS_KS}
    out["test_cis_drop_per_component"] = p[("cis_drop_per_component", ())]
    out["test_cis_component_rate_floor"] = p[("cis_component_rate_floor", ())]
    return out


def written_bounds(indicators: dict, gates: list[Gate]) -> dict:
    """Gate -> Bound as the update flow writes it from a run (``bound_for`` at level 0.99)."""
    out = {}
    for g in gates:
        ind = indicators[g.id]
        m = measure(g.id, ind.value, n=ind.n, higher_is_better=ind.higher_is_better, interval=ind.evidence)
        b, margin, problem = bound_for(m, m.direction, 0.99)
        if problem is not None:
            raise RuntimeError(f"{g.id}: no bound written from the reference run: {problem}")
        out[g.id] = Bound(m.direction, b, margin=margin, level=0.99)
    return out


def moved(bounds: dict, pop: dict, margin: bool) -> dict:
    """Bounds at each gate's population value, less the update flow's margin (``margin``) or exactly on it."""
    out = {}
    for g, b in bounds.items():
        shift = (b.margin or 0.0) if margin else 0.0
        out[g] = Bound(b.direction, pop[g] - shift if b.direction == "min" else pop[g] + shift, policy=True)
    return out


# -------------------------------------------------------------------------------------------- one run


def roles(scenario: str, gate: str) -> str:
    """``slice`` (the planted gates), ``aggregate`` (gates that read the planted change) or ``other``."""
    if scenario in ("null", "population", "borderline"):
        return "other"
    if scenario.startswith("miss"):
        if gate in PLANTED:
            return "slice"
        africa = "africa" in gate or gate.startswith(("test_worst_region", "test_region_disparity",
                                                      "test_object_worst_region", "test_object_region_disparity",
                                                      "test_object_consistency[all]"))
        cis = gate.startswith(("test_cis_drop", "test_cis[k2]", "test_cis[k8]"))  # the planted component's K >= 2
        return "aggregate" if africa or cis else "other"
    if scenario == "drop_component":
        if gate == "test_cis_component_rate_floor":
            return "slice"
        return "aggregate" if gate.startswith(("test_cis_drop", "test_cis[k2]", "test_cis[k4]", "test_cis[k8]")) \
            else "other"
    if "africa" in gate:
        return "slice"
    return "aggregate" if gate.startswith(("test_worst_region", "test_region_disparity", "test_object_worst_region",
                                           "test_object_region_disparity", "test_object_consistency[all]")) \
        else "other"


@dataclass
class Worlds:
    size: Size
    cis: CisWorld
    dig: DigWorld
    cis_variant: CisWorld
    dig_variant: dict


def variant(scenario: str, cis: CisWorld, bounds: dict, dig_pop: dict) -> tuple[CisWorld, dict]:
    """The model of a scenario: the CIS world and ``dig_run`` arguments."""
    if scenario.startswith("miss"):
        delta = float(scenario.split("-")[1])
        target4 = bounds["test_cis[k4]"].value - delta
        w = cis.replace(shift={4: cis.shifted_for(4, target4)})
        floor = bounds["test_cis_component_rate_floor"].value - delta
        w.component_w[MISSED_COMPONENT] = w.component_for(MISSED_COMPONENT, floor)
        p0 = dig_pop["test_region_precision[africa]"]
        target = bounds["test_region_precision[africa]"].value - delta
        return w, {"outliers": 1.0 - target / p0}
    if scenario == "drop_component":
        return cis.replace(dropped=DROPPED_COMPONENT), {}
    if scenario.startswith("degrade_region"):
        return cis, {"degrade": float(scenario.split(":")[2])}
    if scenario.startswith("collapse_region"):
        return cis, {"collapse": True}
    return cis, {}


def run_once(size: Size, cis_world: CisWorld, dig_world: DigWorld, dig_kwargs: dict, thresholds: ThresholdFile,
             rng: np.random.Generator, batches, cis_first: int) -> dict:
    """One simulated run decided both ways: per batch, ``{"fixed", "seq"}`` -> gate -> failed, the images, the
    per-gate image use and which gates held each family's images."""
    cg, dg = cis_gates(), dig_gates(dig_world.objects)
    cdata = cis_run(cis_world, rng)
    ddata = dig_run(dig_world, rng, **dig_kwargs)
    cfull, dfull = SimCis(cdata, size.cis_prompts), SimDig(ddata, DIG_N)
    at_n = {**fixed(cfull, cg), **fixed(dfull, dg)}
    vf = {g.id: judge_indicator(at_n[g.id], g, thresholds) for g in cg + dg}
    fixed_failed = holm(vf)
    weak = [r.gate for r in underpowered(r for r in vf.values() if r is not None)]  # as the plan counts them
    clog = Log()
    cschedule = cis_looks(size.cis_prompts, first=cis_first)
    cind = sequential(cfull, lambda s, n: s.at_prompts(n), cschedule, "prompts", cg, thresholds, clog)
    cv = {g.id: judge_indicator(cind[g.id], g, thresholds) for g in cg}
    cis_use = cis_usage(clog, size, cg, cdata, order_run(size, cis_world, rng, cschedule))
    out = {}
    for batch in batches:
        dlog = Log()
        dind = sequential(dfull, lambda s, n: s.at_images(n), round_sizes(DIG_N, batch), "images per prompt", dg,
                          thresholds, dlog)
        sv = {**cv, **{g.id: judge_indicator(dind[g.id], g, thresholds) for g in dg}}
        out[batch] = {"fixed": fixed_failed, "seq": holm(sv), "cis": cis_use, "dig": dig_usage(dlog, dig_world, dg),
                      "fixed_status": {g: "skip" if r is None else r.status for g, r in vf.items()},
                      "values": {g: at_n[g].value for g in PLANTED}, "underpowered": weak,
                      "judged": sum(r is not None for r in vf.values()),
                      "seq_status": {g: "skip" if r is None else r.status for g, r in sv.items()}}
    return out


def order_run(size: Size, world: CisWorld, rng: np.random.Generator, schedule: list[int]) -> int:
    """The order prompts a sequential run's order test read (its prompts at the look where the product's futility rule
    passed it, or all): an order study with no order effect (no scenario here plants one), K = 8 inclusion by prompt
    and component from K = 8's Beta population (``bench/bench_order_futility.py``'s world and rule)."""
    from bench_order_futility import K, order_looks, stopped_at

    from t2i_fairness.metrics.cis import simulate_order_study

    a, b = world.params[8]
    rates = rng.beta(a, b, size=(size.order_prompts, K))
    looks = order_looks(size.order_prompts, schedule[-1], schedule)
    return stopped_at(*simulate_order_study(rates, CIS_N, rng, 0.0), looks) or size.order_prompts


def cis_usage(log: Log, size: Size, gates: list[Gate], data, order_used: int) -> dict:
    """CIS images of the sequential run and per gate kind: prompts per K as the round loop asked for them (the order
    test, simulated by :func:`order_run`, holds the first ``order_used`` K = 8 prompts and their shuffles); the rate
    floor's, after a look cleared components, only the prompts naming one still open (as the product reads them)."""
    per_gate = {g.key: {} for g in gates}
    for key, n, reads, *_ in log.entries:
        for k, m in reads.items():
            per_gate[key][k] = max(per_gate[key].get(k, 0), m)
    n_k = {k: max([u.get(k, 0) for u in per_gate.values()] + ([order_used] if k == 8 else [0]))
           for k in CIS_KS}
    holders = {k: [g.id for g in gates if per_gate[g.key].get(k, 0) == n_k[k]] or ["test_cis_order_invariance"]
               for k in CIS_KS}
    order = order_used * CIS_N
    kinds = {"share": [0, 0], "spread": [0, 0], "worst": [0, 0], "test": [2 * order, 2 * size.order_prompts * CIS_N]}
    kind_of = {"cis": "share", "cis_drop_per_component": "spread", "cis_component_rate_floor": "worst"}
    # the floor's prompts: at a look told what earlier looks cleared (cleared=), the product's study reads only the
    # prompts naming a counted component not yet cleared (CisStudy.component_rates); the other gates read prefixes
    floor = [(n, cleared) for key, n, _, _, cleared in log.entries if key[0] == "cis_component_rate_floor"]
    images = order
    for k in CIS_KS:
        rest = max([u.get(k, 0) for key, u in per_gate.items() if key[0] != "cis_component_rate_floor"]
                   + ([order_used] if k == 8 else [0]))
        idx = np.arange(size.cis_prompts)
        mine = np.zeros(size.cis_prompts, bool)
        if k in data.mention_comp:
            for n, cleared in floor:
                if cleared is None:
                    mine |= idx < n
                else:  # a prompt naming a component not yet cleared
                    ids = np.array([int(g[1:]) for g in cleared], dtype=int)
                    mine |= (idx < n) & (~np.isin(data.comps[k], ids)).any(axis=1)
            kinds["worst"][0] += int(mine.sum()) * CIS_N
            kinds["worst"][1] += size.cis_prompts * CIS_N
        images += int(((idx < rest) | mine).sum()) * CIS_N
    for g in gates:
        if g.method == "cis_component_rate_floor":
            continue
        u = per_gate[g.key]
        kinds[kind_of[g.method]][0] += sum(u.values()) * CIS_N
        kinds[kind_of[g.method]][1] += len(u) * size.cis_prompts * CIS_N
    # components the floor gates at N that were named by fewer than 2 prompts at its first look: a floor that went on
    # with its first look's open groups never judged them; told what it cleared (cleared=), it judges every one
    first = min((n for n, _ in floor), default=size.cis_prompts)
    went_on = False
    counts = {n: sum(np.bincount(data.mention_comp[k][: n * k], minlength=data.world.components) for k in data.mention_comp)
              for n in (first, size.cis_prompts)}
    unjudged = int(((counts[size.cis_prompts] >= 2) & (counts[first] < 2)).sum()) if went_on else 0
    return {"images": images, "planned": len(CIS_KS) * size.cis_prompts * CIS_N + size.order_prompts * CIS_N,
            "holders": holders, "kinds": kinds, "unjudged": unjudged}


DIG_KIND = {"region_precision": "share", "object_region_precision": "share", "region_coverage": "coverage",
            "object_region_coverage": "coverage", "worst_region_precision": "worst",
            "object_worst_region_precision": "worst", "worst_region_coverage": "worst",
            "object_worst_region_coverage": "worst", "region_disparity_precision": "ratio",
            "region_disparity_coverage": "ratio", "object_region_disparity_coverage": "ratio",
            "object_consistency": "percentile"}


def dig_usage(log: Log, world: DigWorld, gates: list[Gate]) -> dict:
    """DIG In images: per prompt the last look any gate read it at (group scope), the template's last look
    (set scope, DIG In's default), and per gate kind."""
    per_gate: dict = {}
    for key, n, reads, *_ in log.entries:
        u = per_gate.setdefault(key, {})
        for p in reads:
            u[p] = max(u.get(p, 0), n)
    prompts = world.objects * len(REGIONS)
    per_prompt: dict = {}
    for u in per_gate.values():
        for p, n in u.items():
            per_prompt[p] = max(per_prompt.get(p, 0), n)
    top = max(per_prompt.values())
    kinds: dict = {}
    for g in gates:
        u = per_gate.get(g.key, {})
        k = kinds.setdefault(DIG_KIND[g.method], [0, 0])
        k[0] += sum(u.values())
        k[1] += len(u) * DIG_N
    holders = sorted({g.method for g in gates if max(per_gate.get(g.key, {0: 0}).values()) == top})
    return {"set": prompts * top, "group": sum(per_prompt.values()), "planned": prompts * DIG_N, "kinds": kinds,
            "holders": holders}


# -------------------------------------------------------------------------------------------- a scenario


def new_tally() -> dict:
    return {"runs": 0, "false": [0, 0], "caught": [0, 0], "planted": {g: [0, 0, 0] for g in PLANTED},
            "differ": {"slice": 0, "aggregate": 0, "other": 0}, "images": {"cis": [0, 0], "dig": [0, 0], "dig_group": [0, 0]}, "unjudged": 0,
            "values": {g: 0.0 for g in PLANTED},
            "kinds": {}, "holders": {"cis": {}, "dig": {}}, "flips": [], "underpowered": {}, "judged": 0}


def tally(t: dict, scenario: str, r: dict, run: int) -> None:
    t["runs"] += 1
    role = {g: roles(scenario, g) for g in r["fixed"]}
    for i, design in enumerate(("fixed", "seq")):
        failed = r[design]
        t["false"][i] += any(failed[g] for g in failed if role[g] == "other")
        t["caught"][i] += any(failed[g] for g in failed if role[g] == "slice")
    for g in PLANTED:
        if role.get(g) == "slice":
            f, s = r["fixed"][g], r["seq"][g]
            t["planted"][g][0] += f
            t["planted"][g][1] += s
            t["planted"][g][2] += f != s
    for g in r["fixed"]:
        if r["fixed"][g] != r["seq"][g]:
            t["differ"][role[g]] += 1
            if len(t["flips"]) < 20:
                t["flips"].append(f"run {run} {g} ({role[g]}): fixed {r['fixed_status'][g]}, sequential "
                                  f"{r['seq_status'][g]}")
    t["judged"] += r["judged"]
    for g in r["underpowered"]:
        name = g.split("[")[0]
        t["underpowered"][name] = t["underpowered"].get(name, 0) + 1
    t["images"]["cis"][0] += r["cis"]["images"]
    t["images"]["cis"][1] += r["cis"]["planned"]
    t["unjudged"] += r["cis"]["unjudged"]
    for g in PLANTED:
        t["values"][g] += r["values"][g]
    t["images"]["dig"][0] += r["dig"]["set"]
    t["images"]["dig"][1] += r["dig"]["planned"]
    t["images"]["dig_group"][0] += r["dig"]["group"]
    t["images"]["dig_group"][1] += r["dig"]["planned"]
    for fam in ("cis", "dig"):
        for kind, (u, p) in r[fam]["kinds"].items():
            acc = t["kinds"].setdefault(("cis" if fam == "cis" else "dig_in", kind), [0, 0])
            acc[0] += u
            acc[1] += p
    for k, hs in r["cis"]["holders"].items():
        for h in hs:
            t["holders"]["cis"][f"K={k}: {h}"] = t["holders"]["cis"].get(f"K={k}: {h}", 0) + 1
    for h in r["dig"]["holders"]:
        t["holders"]["dig"][h] = t["holders"]["dig"].get(h, 0) + 1


def share(pair) -> float:
    return pair[0] / pair[1] if pair[1] else float("nan")


def paper_share(t: dict, cis: str = "cis", dig: str = "dig") -> float:
    """Images of the sequential run as a share of fixed N over the paper preset's family rows (the families not
    simulated at N). ``cis``/``dig``: which count (``dig_group``: DIG In de-duplicated per group)."""
    used = (PAPER_MIX["cis"] * share(t["images"][cis]) + PAPER_MIX["dig_in"] * share(t["images"][dig])
            + sum(v for k, v in PAPER_MIX.items() if k not in ("cis", "dig_in")))
    return used / sum(PAPER_MIX.values())


def cp(h: int, n: int) -> str:
    """``h/n [lo, hi]``: the two-sided 95% Clopper-Pearson interval."""
    from scipy.stats import beta

    lo = 0.0 if h == 0 else float(beta.ppf(0.025, h, n - h + 1))
    hi = 1.0 if h == n else float(beta.ppf(0.975, h + 1, n - h))
    return f"{h}/{n} [{lo:.3f}, {hi:.3f}]"


def simulate(size: Size, sds, scenarios, runs: int, batches, *, seed: int = 0, pop_runs: int = 100,
             cis_first: int | None = None, canary_runs: int | None = None, miss_runs: int | None = None,
             propose: str | None = None, log=print) -> list[dict]:
    """Every scenario at every between-prompt sd: rows ``{"scenario", "sd", "batch", tally}``."""
    cis_first = cis_first or max(1, size.cis_prompts // 16)
    dworld = DigWorld(size.dig_objects, seed)
    t0 = time.perf_counter()
    dpop = pop_dig(dworld, pop_runs, seed)
    log(f"# DIG In population values from {pop_runs} runs at N ({time.perf_counter() - t0:.0f} s)")
    cg, dg = cis_gates(), dig_gates(size.dig_objects)
    rows = []
    for si, sd in enumerate(sds):
        cworld = CisWorld(size.cis_prompts, size.components, sd, size.order_prompts, seed)
        ref = np.random.default_rng([seed, 1000, si])  # the update flow's reference run: another seed
        cref, dref = SimCis(cis_run(cworld, ref), size.cis_prompts), SimDig(dig_run(dworld, ref), DIG_N)
        written = {**written_bounds(fixed(cref, cg), cg), **written_bounds(fixed(dref, dg), dg)}
        pop = {**pop_cis(cworld), **dpop}
        bounds = {"a": written, "b": moved(written, pop, True), "c": moved(written, pop, False)}
        for sc in scenarios:
            which = "b" if sc == "population" or sc.startswith("miss") else "c" if sc == "borderline" else "a"
            thresholds = ThresholdFile(Path("bench_sequential.yaml"), bounds[which])
            cw, dkw = variant(sc, cworld, bounds[which], dpop)
            n_runs = (miss_runs or runs) if sc.startswith("miss") else runs if sc in ("null", "population", "borderline") \
                else (canary_runs or runs)
            tallies = {b: new_tally() for b in batches}
            t0 = time.perf_counter()
            for i in range(n_runs):
                rng = np.random.default_rng([seed, 1 + si, SCENARIOS.index(sc), i])
                with proposal(propose):
                    r = run_once(size, cw, dworld, dkw, thresholds, rng, batches, cis_first)
                for b in batches:
                    tally(tallies[b], sc, r[b], i)
            for b in batches:
                rows.append({"scenario": sc, "sd": sd, "batch": b, "bounds": which, "propose": propose,
                             "n": {"cis": size.cis_prompts, "dig_in": DIG_N},
                             "targets": {g: bounds[which][g].value for g in PLANTED}, **tallies[b]})
            log(f"# sd {sd} {sc}: {n_runs} runs, {time.perf_counter() - t0:.0f} s")
    return rows


# -------------------------------------------------------------------------------------------- tables


def _label(r: dict) -> str:
    return f"{r['scenario']} ({r['bounds']})" + (f" [{r['propose']}]" if r.get("propose") else "")


def table(rows: list[dict]) -> list[str]:
    out = ["| scenario (bounds) | sd | batch | runs | CIS images | DIG In images | paper mix | "
           "DIG In, group scope | paper mix, group scope | FWER fixed N | FWER sequential | slice "
           "caught fixed / sequential | verdicts that differ (slice / aggregate / other) | floor components unjudged "
           "per run |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        n = r["runs"]
        planted = r["scenario"] not in ("null", "population", "borderline")
        out.append(f"| {_label(r)} | {r['sd']:g} | {r['batch']} | {n} | {share(r['images']['cis']):.1%} | "
                   f"{share(r['images']['dig']):.1%} | {paper_share(r):.1%} | "
                   f"{share(r['images']['dig_group']):.1%} | {paper_share(r, 'cis', 'dig_group'):.1%} | "
                   f"{cp(r['false'][0], n)} | {cp(r['false'][1], n)} | "
                   + (f"{r['caught'][0]}/{n} / {r['caught'][1]}/{n}" if planted else "-") + " | "
                   + " / ".join(str(r["differ"][k]) for k in ("slice", "aggregate", "other"))
                   + f" | {r['unjudged'] / n:.2f} |")
    return out


def power_table(rows: list[dict]) -> list[str]:
    out = ["| scenario | sd | batch | runs | planted gate | bound | mean value at N | caught fixed N | caught sequential "
           "| runs that differ |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if not r["scenario"].startswith("miss"):
            continue
        for g, (f, s, d) in r["planted"].items():
            out.append(f"| {r['scenario']}" + (f" [{r['propose']}]" if r.get("propose") else "")
                       + f" | {r['sd']:g} | {r['batch']} | {r['runs']} | {g} | {r['targets'][g]:.4f} | "
                       f"{r['values'][g] / r['runs']:.4f} | {cp(f, r['runs'])} | {cp(s, r['runs'])} | {d} |")
    return out


def kind_table(rows: list[dict], scenario: str = "null") -> list[str]:
    null = [r for r in rows if r["scenario"] == scenario]
    cols = [(r["sd"], r["batch"], r.get("propose")) for r in null]
    out = ["| family, kind | " + " | ".join(f"sd {sd:g}, batch {b}" + (f" [{p}]" if p else "") for sd, b, p in cols) + " |",
           "|---|" + "---|" * len(cols)]
    for key in sorted({k for r in null for k in r["kinds"]}):
        out.append(f"| {key[0]}, {key[1]} | " + " | ".join(f"{share(r['kinds'][key]):.1%}" if key in r["kinds"] else "-"
                                                            for r in null) + " |")
    return out


def underpowered_lines(rows: list[dict], scenario: str = "null") -> list[str]:
    """Per null row: the fixed-N passes and inconclusives whose test would catch their kind's meaningful miss less
    than half the time (``report.power.underpowered``, what ``t2i-fairness plan`` lists from a run), per run."""
    out = []
    for r in rows:
        if r["scenario"] != scenario or not r["runs"]:
            continue
        n, weak = r["runs"], r["underpowered"]
        out.append(f"sd {r['sd']:g}, batch {r['batch']}: {sum(weak.values()) / n:.1f} of {r['judged'] / n:.0f} simulated "
                   "gates per run: " + ", ".join(f"{g} {c / n:g}" for g, c in sorted(weak.items())))
    return out


def holder_lines(rows: list[dict]) -> list[str]:
    out = []
    for r in rows:
        n = r["runs"]
        cis = ", ".join(f"{h} {c}/{n}" for h, c in sorted(r["holders"]["cis"].items(), key=lambda kv: -kv[1])[:8])
        dig = ", ".join(f"{h} {c}/{n}" for h, c in sorted(r["holders"]["dig"].items(), key=lambda kv: -kv[1])[:6])
        out.append(f"{_label(r)} sd {r['sd']:g} batch {r['batch']}: CIS held by {cis}; DIG In held by {dig}")
    return out


def null_shares(rows: list[dict]) -> dict:
    """The families' null-model image shares (``Family.null_shares``) from the null rows: per (family, kind) and
    ``(N, batch)`` (``N``: the family's in its look unit, CIS prompts per K or DIG In images per prompt) the larger
    share over the sds (the conservative figure), rounded up to the percent."""
    out: dict = {}
    for r in rows:
        if r["scenario"] != "null" or r.get("propose"):
            continue
        for key, pair in r["kinds"].items():
            v = math.ceil(100 * share(pair) - 1e-9) / 100
            at = (r["n"][key[0]], r["batch"])
            out.setdefault(key, {})[at] = max(out.get(key, {}).get(at, 0.0), v)
    return dict(sorted(out.items()))


def write_null_shares(shares: dict, source: str, root: Path = REPO / "plugin" / "t2i_fairness" / "families") -> list[Path]:
    """Merge ``shares`` (:func:`null_shares`) into each family's ``null_shares.json`` (its rows replaced per
    ``(N, batch)``, ``source`` added to its provenance) and return the files written."""
    from t2i_fairness.gating.sequential.plan import NullShares

    written = []
    for family in sorted({f for f, _ in shares}):
        path = root / family / "null_shares.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        old = NullShares.load(path) if path.exists() else NullShares({})
        table = {kind: dict(rows) for kind, rows in old.table.items()}
        for (f, kind), rows in shares.items():
            if f == family:
                table.setdefault(kind, {}).update(rows)
        sources = [x for x in (old.source, source) if x]
        path.write_text(NullShares(table, "; ".join(dict.fromkeys(sources))).dump())
        written.append(path)
    return written


def goals(rows: list[dict]) -> list[str]:
    from scipy.stats import beta

    def upper(h, n):
        return 1.0 if h == n else float(beta.ppf(0.975, h + 1, n - h))

    lines = []
    rows = [r for r in rows if not r.get("propose")]
    null = [r for r in rows if r["scenario"] == "null"]
    if null:
        worst = max(paper_share(r) for r in null)
        lines.append(f"null-model images <= 25% of fixed N over the paper mix: {'met' if worst <= 0.25 else 'MISSED'} "
                     f"(largest {worst:.1%} over sd and batch)")
    fw = [r for r in rows if r["scenario"] in ("null", "population", "borderline")]
    if fw:
        worst = max(upper(r["false"][1], r["runs"]) for r in fw)
        lines.append(f"FWER <= 5% (upper 95% bound) sequential, null / population / borderline: "
                     f"{'met' if worst <= 0.05 else 'MISSED'} (largest upper bound {worst:.3f})")
    miss = [r for r in rows if r["scenario"] == "miss-0.05"]
    if miss:
        gaps = [(r["planted"][g][0] - r["planted"][g][1]) / r["runs"] for r in miss for g in PLANTED]
        lines.append(f"a 0.05 miss caught within one point of fixed N: {'met' if max(gaps) <= 0.01 else 'MISSED'} "
                     f"(largest loss {max(gaps):.1%} of runs)")
    can = [r for r in rows if r["scenario"].startswith(("degrade", "collapse", "drop_component"))]
    if can:
        same = all(r["caught"][0] == r["caught"][1] for r in can)
        worst = max(paper_share(r) for r in can)
        lines.append(f"canaries caught as at fixed N with <= 40% of its images: "
                     f"{'met' if same and worst <= 0.40 else 'MISSED'} (caught as fixed: {same}; largest share "
                     f"{worst:.1%})")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--procedural", type=int, default=None, metavar="RUNS",
                    help="run the real suite through pytest instead (bench/bench_sequential_suite.py; its options pass on)")
    ap.add_argument("--power-curve", action="store_true",
                    help="the power curve, sequential beside fixed N: CIS_1 and CIS_8 at 10,000 prompts x 16, misses "
                         "0-0.10, three prompt laws (bench/sequential_power.py); --runs per law and miss (default 4: "
                         "minutes; the docs' figure: --runs 25)")
    ap.add_argument("--quick", action="store_true", help="a twentieth of CIS, 3 DIG In objects, 8 runs, sd 0.3: < 3 min")
    ap.add_argument("--runs", type=int, default=None, help="runs per scenario (default 200; --quick 8)")
    ap.add_argument("--canary-runs", type=int, default=None, help="runs of each canary scenario (default --runs)")
    ap.add_argument("--miss-runs", type=int, default=None, help="runs of each miss scenario (default --runs)")
    ap.add_argument("--sd", type=float, nargs="+", default=None, help="between-prompt sds (default 0.2 0.3)")
    ap.add_argument("--batch", type=int, nargs="+", default=[8, 16], help="generation batch sizes (default 8 16)")
    ap.add_argument("--scenarios", nargs="+", default=list(SCENARIOS), choices=SCENARIOS)
    ap.add_argument("--cis-prompts", type=int, default=None, help=f"CIS prompts per K (default {FULL.cis_prompts})")
    ap.add_argument("--components", type=int, default=None, help=f"CIS components (default {FULL.components})")
    ap.add_argument("--dig-objects", type=int, default=None, help=f"DIG In objects per region (default {FULL.dig_objects})")
    ap.add_argument("--cis-first", type=int, default=None, help="CIS first look, prompts per K (default M/16)")
    ap.add_argument("--pop-runs", type=int, default=None, help="DIG In runs for population values (default 100)")
    ap.add_argument("--propose", choices=("worst-futility",), default=None,
                    help="measure a proposal instead of the product: see proposal() (the rows say so)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None, help="also write the rows here")
    ap.add_argument("--write-null-shares", action="store_true",
                    help="merge the null rows' image shares into families/<paper>/null_shares.json (the plan reads them)")
    a, rest = ap.parse_known_args(argv)
    if a.procedural is not None:
        import bench_sequential_suite

        return bench_sequential_suite.main(["--runs", str(a.procedural), *rest])
    if rest:
        ap.error(f"unrecognized arguments: {' '.join(rest)}")
    if a.power_curve:
        return power_curve_main(a)
    base = QUICK if a.quick else FULL
    size = Size(a.cis_prompts or base.cis_prompts, a.components or base.components,
                max(1, round((a.cis_prompts or base.cis_prompts) * base.order_prompts / base.cis_prompts)),
                a.dig_objects or base.dig_objects)
    runs = a.runs if a.runs is not None else (8 if a.quick else 200)
    sds = a.sd or ([0.3] if a.quick else [0.2, 0.3])
    if runs < 1 or any(b < 1 for b in a.batch) or size.cis_prompts < 32 or size.components < 2:
        ap.error("--runs and --batch must be >= 1, --cis-prompts >= 32, --components >= 2")
    if any(not 0 < s < 0.4 for s in sds):
        ap.error("--sd must be in (0, 0.4): a Beta population with CIS's means has no larger sd")
    t0 = time.time()
    rows = simulate(size, sds, a.scenarios, runs, a.batch, seed=a.seed,
                    pop_runs=a.pop_runs or (10 if a.quick else 100), cis_first=a.cis_first,
                    canary_runs=a.canary_runs, miss_runs=a.miss_runs, propose=a.propose)
    print(f"# bench_sequential{' --propose ' + a.propose if a.propose else ''}: {size.label}; {runs} runs per scenario (misses {a.miss_runs or runs}, canaries {a.canary_runs or runs}), sd "
          f"{', '.join(map(str, sds))}, batch {', '.join(map(str, a.batch))}, seed {a.seed}; alpha {ALPHA} over "
          f"m = {PAPER_GATES}; {platform.node()} ({platform.machine()}, {os.cpu_count()} cores), "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {time.time() - t0:.0f} s")
    print("\n".join(table(rows)))
    print("\nPower (a slice of three gates missing its bound; bounds (b)):")
    print("\n".join(power_table(rows)))
    print("\nImages per gate kind, null scenario (the families' null_shares.json):")
    print("\n".join(kind_table(rows)))
    print("null shares =", null_shares(rows))
    if a.write_null_shares:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
        source = (f"bench/bench_sequential.py {' '.join(argv if argv is not None else sys.argv[1:])} at {rev or '?'}, "
                  f"null scenario, {time.strftime('%Y-%m-%d', time.gmtime())}")
        for path in write_null_shares(null_shares(rows), source):
            print(f"wrote {path.relative_to(REPO)}")
    print("\nUnderpowered passes at N (fixed N; below 50% against the kind's meaningful miss), null scenario:")
    print("\n".join(underpowered_lines(rows)))
    print("\nWhich gates held each family's images (the last look asked for):")
    print("\n".join(holder_lines(rows)))
    flips = [f"{r['scenario']} sd {r['sd']:g} batch {r['batch']}: {f}" for r in rows for f in r["flips"]]
    if flips:
        print("\nVerdicts that differ (first 20 per row):")
        print("\n".join(flips))
    print("\nGoals (issue #29):")
    print("\n".join(goals(rows)))
    if a.json:
        Path(a.json).write_text(json.dumps([{**r, "kinds": {f"{k[0]}:{k[1]}": v for k, v in r["kinds"].items()}}
                                            for r in rows], indent=1))
    return 0


def power_curve_main(a) -> int:
    """``--power-curve``: the sequential run's chance of failing a gate beside fixed N's (bench/sequential_power.py)."""
    import sequential_power as sp

    runs = a.runs if a.runs is not None else 4
    prompts = a.cis_prompts or FULL.cis_prompts
    if runs < 1 or prompts < 32:
        raise SystemExit("--runs must be >= 1 and --cis-prompts >= 32")
    t0 = time.time()
    rows = sp.power_curve(runs=runs, prompts=prompts, seed=a.seed)
    print(f"# bench_sequential --power-curve: CIS_1 and CIS_8, {prompts} prompts x {CIS_N} images, level {ALPHA} / "
          f"{PAPER_GATES}, prompt laws {', '.join(sp.LAWS)}; {runs} runs per law and miss ({3 * runs} per miss), "
          f"seed {a.seed}; {platform.node()} ({os.cpu_count()} cores), "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {time.time() - t0:.0f} s")
    print("\n".join(sp.curve_table(rows)))
    print("\nGoals (issue #45, item 1):")
    print("\n".join(sp.curve_goals(rows)))
    for kind in ("CIS_1", "CIS_8"):
        print(f"null model ({kind}, bound written by the update flow): {sp.null_images(rows, kind):.1%} of the fixed-N "
              f"images, mean over the laws")
    if a.json:
        Path(a.json).write_text(json.dumps([vars(r) for r in rows], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
