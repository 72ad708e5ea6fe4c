"""A selection's plan: the images its tests will ask for, per family and role, and the batches that make them.

Each selected test's family answers ``needs`` with study slices and image requests (no
generation); the requests, in pytest's order, are cut into canonical batch jobs against the cache:
what a ``pytest`` run of the same selection would generate, batch for batch.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from t2i_fairness.distributed.selection import Selection
from t2i_fairness.spine.options import T2IOptions
from t2i_fairness.spine.plan import ImageRequest, Jobs, Need, batch_jobs, cached_indices, request_tops, role_options, unique_requests

__all__ = ["Plan", "RolePlan", "build_plan", "cost_warning", "header_lines", "plan_json", "plan_lines", "run_header",
           "sequential_plan", "widening"]


@dataclass
class RolePlan:
    """The plan of one model (``candidate``, or ``baseline`` under ``--t2i-baseline-model``)."""

    role: str
    options: T2IOptions
    bench: Any  # the role's Workbench (its generator is never loaded by planning)
    needs: list[tuple[str, Need]] = field(default_factory=list)  # (family, need), each once, in pytest's order
    requests: list[ImageRequest] = field(default_factory=list)  # each (prompt, n) once, in the order asked
    by_family: dict[str, list[ImageRequest]] = field(default_factory=dict)
    jobs: Jobs = field(default_factory=Jobs)
    cached: dict[str, list[int]] = field(default_factory=dict)  # prompt -> sorted indices asked for and already cached
    generate_on: str = "cpu"  # the device kind the image keys name (workers generate on it)
    readers: dict[tuple[str, tuple], list] = field(default_factory=dict)  # (family, need key) -> GateCalls reading it
    studies: dict[str, Any] = field(default_factory=dict)  # family -> its study (what ``needs`` was asked of)
    rated: bool = True  # planned (build_plan's rated_only plans only roles with a stored generation rate)

    @property
    def tops(self) -> dict[str, int]:
        """Per prompt, the images asked for (indices ``0 .. top-1``)."""
        return request_tops(self.requests)

    @property
    def n_images(self) -> int:
        """Distinct (prompt, image index) pairs asked for."""
        return sum(self.tops.values())

    @property
    def n_cached(self) -> int:
        """Of those, the images already in the cache (the others are what the jobs write)."""
        return sum(len(v) for v in self.cached.values())

    @property
    def n_to_make(self) -> int:
        return self.n_images - self.n_cached

    def image_keys(self) -> list[str]:
        """Cache keys of every image asked for (what a run leaves under ``images/``)."""
        factory = self.bench.factory
        return sorted({k for p, n in self.tops.items() for k in factory.keys(p, n)})


@dataclass
class Plan:
    """What a selection will generate."""

    selection: Selection
    roles: list[RolePlan]
    tests_by_family: Counter = field(default_factory=Counter)
    unplanned: list[str] = field(default_factory=list)  # node ids of selected tests that generate as they run

    @property
    def options(self) -> T2IOptions:
        return self.selection.options


def _families_of(test) -> list:
    from t2i_fairness.families import FAMILIES, family_of_module

    own = family_of_module(test.module)
    if own is not None:
        return [own]
    return [f for f in FAMILIES if f.fixture in test.fixtures]


def build_plan(selection: Selection, check_cache: bool = True, progress=None, generate_on: str | None = None,
               read_only: bool = False, run=None, benches: dict | None = None, rated_only: bool = False) -> Plan:
    """The plan of a selection: needs per family and role, image requests, and the jobs that make the missing ones.

    Args:
        check_cache: cut jobs against the cache (False: as if it were empty).
        generate_on: the device the images will be made on when not this machine's (a Ray cluster's
            GPUs); it enters the image keys.
        read_only: look at the cache and create nothing (``t2i-fairness plan``).
        run: the run's device and precision for both roles' workbenches (default: from the options).
        benches: role -> the workbench to plan on (a pytest run's own); the other roles get new ones.
        rated_only: plan only the roles whose generation rate is stored (the run header's estimate).

    Raises:
        OptionError, ModelLoadError, OSError: as a pytest run of the selection would.
    """
    from t2i_fairness.base.devices import RunContext
    from t2i_fairness.base.memo import no_progress
    from t2i_fairness.spine.workbench import Workbench

    options = selection.options
    run = run if run is not None else RunContext.decide(options.device, options.precision)  # once, for both roles
    roles: dict[str, RolePlan] = {}
    studies: dict[tuple[str, str], Any] = {}
    seen: set[tuple[str, str, tuple]] = set()
    plan = Plan(selection, [])
    for test in selection.tests:
        families = _families_of(test)
        if not families:
            if "t2i" in test.fixtures:
                plan.unplanned.append(test.call.nodeid)
            continue
        role = test.call.role
        if role not in roles:
            opts = role_options(options, role)
            bench = (benches or {}).get(role) or Workbench(opts, progress or no_progress, generate_on=generate_on, run=run,
                                                            read_only=read_only)
            opts = bench.options
            roles[role] = RolePlan(role, opts, bench, generate_on=(generate_on or bench.device).split(":")[0])
            if rated_only:
                roles[role].rated = not bench.source.spec.startswith("images:") and role_rate(roles[role])[1] is not None
        rp = roles[role]
        if not rp.rated:
            continue
        for family in families:
            plan.tests_by_family[family.name] += 1
            if family.needs is None:
                plan.unplanned.append(test.call.nodeid)
                continue
            key = (role, family.name)
            if key not in studies:
                studies[key] = family.study(rp.bench, rp.options.family(family.name))
                rp.studies[family.name] = studies[key]
            for need in family.needs(test.call, studies[key]):
                rp.readers.setdefault((family.name, need.key), []).append(test.call)
                if (role, family.name, need.key) in seen:
                    continue
                seen.add((role, family.name, need.key))
                rp.needs.append((family.name, need))
                rp.requests += need.images
                rp.by_family.setdefault(family.name, []).extend(need.images)
    for rp in roles.values():
        rp.requests = unique_requests(rp.requests)
        rp.by_family = {f: unique_requests(r) for f, r in rp.by_family.items()}
        tops = request_tops(rp.requests)
        if check_cache:
            cached = cached_indices(rp.bench.factory)
            rp.cached = {p: idx for p, idx in ((p, sorted(cached(p, n))) for p, n in tops.items()) if idx}
        rp.jobs = batch_jobs(rp.requests, rp.bench.factory, rp.role, cached=lambda p, n: rp.cached.get(p, ()))
    plan.roles = [roles[r] for r in ("baseline", "candidate") if r in roles]
    return plan


def _family_title(name: str) -> str:
    from t2i_fairness.families import FAMILIES

    return next((f.title for f in FAMILIES if f.name == name), name)


def family_counts(rp: RolePlan) -> list[dict]:
    """Per family: prompts, images asked for, already cached, to make (shared images count in each family).

    Example:
        >>> from t2i_fairness.spine.plan import ImageRequest
        >>> rp = RolePlan("candidate", T2IOptions(), None, by_family={"dig_in": [ImageRequest("bag in Africa", 4)]},
        ...               cached={"bag in Africa": [0, 1, 7]})
        >>> family_counts(rp)
        [{'family': 'dig_in', 'prompts': 1, 'images': 4, 'cached': 2, 'to_make': 2}]
    """
    import bisect

    from t2i_fairness.families import REGISTERED

    out = []
    order = {name: i for i, name in enumerate(REGISTERED)}
    for name, reqs in sorted(rp.by_family.items(), key=lambda kv: order.get(kv[0], len(order))):
        tops = request_tops(reqs)
        images = sum(tops.values())
        cached = sum(bisect.bisect_left(rp.cached.get(p, ()), n) for p, n in tops.items())
        out.append({"family": name, "prompts": len(tops), "images": images, "cached": cached, "to_make": images - cached})
    return out


def widening(rp: RolePlan) -> dict | None:
    """What set-scope de-duplication costs the selection: ``None``, or ``why``, ``gates`` (widened needs)
    and ``narrow_images`` (the distinct images if each widened need asked only for its own slice).

    Under ``--t2i-dedupe-scope set`` one region's gate reads every region's images (a duplicate of
    another region is dropped); planning less would change the gated value, so the plan says the cost.
    """
    wide = [n for _, n in rp.needs if n.widened]
    if not wide:
        return None
    narrow = request_tops(r for _, n in rp.needs for r in (n.narrow if n.widened else n.images))
    return {"why": wide[0].widened, "gates": len(wide), "narrow_images": sum(narrow.values())}


def plan_lines(plan: Plan, tests_total: int | None = None, sequential: bool = True) -> list[str]:
    """The plan for people: selection, per-family counts and what is cached, per role; under
    ``--t2i-sequential`` (and ``sequential``) the worst, expected and best case of a run in rounds."""
    sel = plan.selection
    lines = [f"t2i-fairness plan: {len(sel.tests)} of {sel.collected} tests selected "
             f"(pytest {' '.join(sel.args)})"]
    if not plan.roles:
        lines.append("no selected test asks for generated images")
    for rp in plan.roles:
        o, source = rp.options, rp.bench.source
        s = source.settings
        lines.append(f"{rp.role}: model {o.model} ({source.fingerprint}); {s.steps} steps, guidance {s.guidance}, "
                     f"{s.height}x{s.width}, batch size {rp.bench.factory.batch_size}, seed {o.seed}; cache {o.cache_dir}")
        lines.append(f"  {'family':<28} {'tests':>6} {'prompts':>8} {'images':>7} {'cached':>7} {'to make':>8}")
        for row in family_counts(rp):
            lines.append(f"  {_family_title(row['family']):<28} {plan.tests_by_family[row['family']]:>6} "
                         f"{row['prompts']:>8} {row['images']:>7} {row['cached']:>7} {row['to_make']:>8}")
        images, make = rp.n_images, rp.n_to_make
        lines.append(f"  {'all (distinct)':<28} {sum(plan.tests_by_family.values()):>6} "
                     f"{len(rp.tops):>8} {images:>7} {rp.n_cached:>7} {make:>8}")
        lines.append(f"  {make} image(s) to make in {len(rp.jobs)} batch(es)")
        widened = widening(rp)
        if widened:
            lines.append(f"  {widened['why']}: {widened['gates']} selected slice(s) plan {images} images where "
                         f"their own prompts need {widened['narrow_images']} (--t2i-dedupe-scope group plans only "
                         "those, and looks for duplicates within each group only)")
        lines.append("  " + cost_line(rp, make))
        lines.append("  " + steps_line(plan, rp)[1])
        warning = cost_warning(rp, make)
        if warning:
            lines.append("  " + warning)
        if rp.options.sequential and sequential:
            lines += _sequential_lines(rp)
    if plan.unplanned:
        lines.append(f"{len(plan.unplanned)} selected test(s) generate as they run (no family plans them), e.g. "
                     f"{plan.unplanned[0]}")
    return lines


def role_rate(rp: RolePlan):
    """The generation rate measured for a role's device, model and settings (``None`` without one)."""
    import dataclasses

    from t2i_fairness.spine.rates import device_label, lookup_rate

    source = rp.bench.source
    device = device_label(getattr(rp.bench, "rate_device", None) or rp.generate_on)
    return device, lookup_rate(rp.bench.cache, device, source.fingerprint, dataclasses.asdict(source.settings))


def cost_line(rp: RolePlan, images: int) -> str:
    """``estimated generation time: 0.52 h for 10880 image(s) at 0.172 s/image on cuda:... (run, ...)``,
    or why there is no estimate."""
    from t2i_fairness.spine.rates import estimate_hours

    if not images:
        return "estimated generation time: 0 h (nothing to make)"
    if rp.bench.source.spec.startswith("images:"):
        return "estimated generation time: none (the images are read from a manifest, not generated)"
    device, rate = role_rate(rp)
    if rate is None:
        return (f"estimated generation time: no measured rate for this model and settings on {device} "
                "(a generating run stores one; or run bench/bench_generation.py)")
    hours = estimate_hours(images, rate)
    return f"estimated {'GPU' if device.startswith('cuda') else device} time: {hours:.2f} h for {images} image(s) at {rate.describe()}"


def steps_line(plan: Plan, rp: RolePlan) -> tuple[float | None, str]:
    """Seconds of a role's computing steps (segmentation, features, captions) and their line: each step's
    stored rate times its items in the last run of this selection that computed it (``None``: unknown)."""
    from t2i_fairness.spine.rates import device_label, duration, selection_key, steps_estimate

    device = device_label(rp.bench.device)
    key = selection_key([t.call for t in plan.selection.tests], rp.options)
    seconds, said = steps_estimate(rp.bench.cache, device, key)
    if seconds is None:
        return None, (f"expected time of segmentation, features and captions: unknown, {said} (each step's bar "
                      "shows its own from its first items)")
    return seconds, (f"expected time of segmentation, features and captions: up to {duration(seconds)} (the last "
                     f"run of this selection on {device} that computed them; a warm cache skips what it holds): {said}")


def header_lines(plan: Plan) -> tuple[list[str], dict[str, Any]]:
    """The run header's estimate per role (images to make, and how long at the stored rate) and a
    :class:`~t2i_fairness.spine.rates.RunClock` per rated role; ``plan`` from ``build_plan(rated_only=True)``.
    """
    from t2i_fairness.spine.rates import RunClock, duration, estimate_hours

    lines, clocks = [], {}
    for rp in plan.roles:
        who = f"t2i-fairness: {rp.role} {rp.options.model}: " if len(plan.roles) > 1 else "t2i-fairness: "
        if rp.bench.source.spec.startswith("images:"):
            continue  # read from a manifest: nothing generated
        device, rate = role_rate(rp)
        steps, said_steps = steps_line(plan, rp)
        if rate is None:
            lines.append(f"{who}expected generation time: unknown, no measured rate for this model and settings on "
                         f"{device} yet (this run stores one; `t2i-fairness plan` counts the images)")
            lines.append(f"{who}{said_steps}")
            continue
        make = rp.n_to_make
        clocks[rp.role] = RunClock(make, rate.seconds_per_image)
        hours = estimate_hours(make, rate)
        cached = f"{rp.n_cached} of {rp.n_images} cached"
        said = f"{duration(hours * 3600)} for {make} image(s) to make ({cached})"
        if rp.options.sequential:  # rounds stop early: the fixed-N plan is the worst case
            expect = sequential_plan(rp)["expected_to_make"]
            said = (f"{duration(estimate_hours(expect, rate) * 3600)} for {expect} image(s) to make if the model did "
                    f"not regress (sequential; at most {duration(hours * 3600)} for {make}, the fixed-N plan, {cached})")
        lines.append(f"{who}expected generation time: {said} at {rate.describe()}")
        lines.append(f"{who}{said_steps}")
        if steps is not None:
            lines.append(f"{who}expected time in all: up to {duration(hours * 3600 + steps)} ({hours * 3600 + steps:.0f} s: "
                         "generation and the steps above)")
        warning = cost_warning(rp, make)
        if warning:
            lines.append(f"{who}{warning}")
    return lines, clocks


def run_header(items, options: T2IOptions) -> tuple[list[str], dict[str, Any]]:
    """:func:`header_lines` of the items a run selected; it never raises (what stops it is said in one line)."""
    from t2i_fairness.distributed.selection import selection_of

    try:
        return header_lines(build_plan(selection_of(items, options), read_only=True, rated_only=True))
    except Exception as exc:  # noqa: BLE001 - an estimate must never stop the run it estimates
        first = (str(exc).strip().splitlines() or [""])[0]
        return [f"t2i-fairness: expected generation time: not estimated ({type(exc).__name__}: {first})"], {}


WARN_HOURS = 8.0  # a plan above this many hours of generation on its device is said to be large
WARN_IMAGES = 100_000  # without a measured rate: a plan above this many images to make is said to be large


def cost_warning(rp: RolePlan, images: int) -> str | None:
    """A line in words when a role's plan costs more than :data:`WARN_HOURS` hours at its measured rate
    (or, without a rate, more than :data:`WARN_IMAGES` images); ``None`` below.
    """
    from t2i_fairness.spine.rates import estimate_hours

    narrow = ("narrow it (-k, --t2i-images-per-prompt, --t2i-objects, a family's options) or spread it over GPUs "
              "(t2i-fairness generate --engine ray)")
    rate = None if rp.bench.source.spec.startswith("images:") else role_rate(rp)
    if rate is not None and rate[1] is not None:
        device, r = rate
        hours = estimate_hours(images, r)
        if hours <= WARN_HOURS:
            return None
        kind = "GPU" if device.startswith("cuda") else device
        return (f"large plan: about {hours:.1f} h of {kind} time ({hours / 24:.1f} days) for {images} images, above "
                f"the {WARN_HOURS:g} h this tool calls large: {narrow}")
    if images <= WARN_IMAGES:
        return None
    return (f"large plan: {images} images to make (above the {WARN_IMAGES} this tool calls large without a measured "
            f"rate to turn them into hours): {narrow}")


def plan_json(plan: Plan) -> dict:
    """The plan as JSON-ready data (``t2i-fairness plan --output plan.json``)."""
    sel = plan.selection
    out = {"args": list(sel.args), "selected": len(sel.tests), "collected": sel.collected,
           "tests_by_family": dict(plan.tests_by_family), "unplanned": plan.unplanned, "roles": []}
    for rp in plan.roles:
        source = rp.bench.source
        out["roles"].append({
            "role": rp.role, "model": rp.options.model, "fingerprint": source.fingerprint,
            "settings": source.settings.key(), "seed": rp.options.seed, "cache": str(rp.options.cache_dir),
            "batch_size": rp.bench.factory.batch_size,
            "families": family_counts(rp),
            "widened": widening(rp),
            "needs": [{"family": f, "method": n.method, "args": list(n.args), "images": len(n.images)}
                      for f, n in rp.needs],
            "requests": [{"prompt": r.prompt, "n": r.n, "keys": list(rp.bench.factory.keys(r.prompt, r.n))}
                         for r in rp.requests],
            "jobs": [j.to_dict() for j in rp.jobs],
            "estimate": _estimate_json(rp),
            "steps_seconds": steps_line(plan, rp)[0],  # segmentation, features, captions (None: unknown)
        })
        if rp.options.sequential:
            out["roles"][-1]["sequential"] = sequential_plan(rp)
    return out


def _estimate_json(rp: RolePlan) -> dict:
    """The cost estimate of a role for ``plan --output``: device, seconds per image and hours (``None`` without a rate)."""
    import dataclasses

    from t2i_fairness.spine.rates import estimate_hours

    images = rp.n_to_make
    if rp.bench.source.spec.startswith("images:"):
        return {"device": None, "seconds_per_image": None, "hours": 0.0 if not images else None, "rate": None}
    device, rate = role_rate(rp)
    return {"device": device, "images": images, "seconds_per_image": rate.seconds_per_image if rate else None,
            "hours": estimate_hours(images, rate) if rate else None, "rate": dataclasses.asdict(rate) if rate else None,
            "warning": cost_warning(rp, images)}


# -- --t2i-sequential: what a run in rounds would cost -------------------------------------------------


def _call_id(family: str, call) -> tuple:
    return (family, call.test, call.nodeid or repr(sorted(call.params.items(), key=lambda kv: kv[0])))


_ABSENT = "images at the first look of a prompt it does not name"  # a key of _early's first-look map
_REPORT = "report"  # _early's kind of a test that reads no indicator method


def _early(family, call, rp: RolePlan, batch: int, looks: dict) -> tuple[str | None, str | None, dict | None]:
    """``(kind, why it runs to N or None, {need key: {prompt: images at the first look}})`` of one selected test:
    its kind is its study's indicator method's (``test_<method>``), its first look the family's first planned
    look (``Family.rounds``)."""
    from t2i_fairness.families.base import indicator_methods
    from t2i_fairness.gating.indicator import KINDS

    study = rp.studies.get(family.name)
    if study is None:
        return None, f"{family.title}: no study in this plan", None
    method = indicator_methods(type(study)).get(call.test.removeprefix("test_"))
    if method is None:
        return _REPORT, f"{family.title}: {call.test} reads no indicator method of its study (a report, or not a gate)", None
    kind = method.indicator_kind
    if not KINDS[kind]:
        return kind, f"{family.title}: a {kind} (no effect size, no early stop: decided at N)", None
    if family.look is None:
        return kind, f"{family.title}: no look at fewer images yet (its gates run to N)", None
    if call.role == "baseline":
        return kind, "baseline role: runs to N", None
    if family.name not in looks:
        schedule, unit = family.rounds(study)
        looks[family.name] = (family.look(study, int(schedule[0])) if len(schedule) > 1 else None), unit, schedule[-1]
    look, unit, size = looks[family.name]
    if look is None:
        return kind, (f"{family.title}: one planned look ({size} {unit}: too few for an earlier one)" if unit == "prompts"
                      else f"{family.title}: one planned look (--t2i-batch-size {batch} is not below N)"), None
    first = {n.key: {r.prompt: r.n for r in n.images} for n in family.needs(call, look)}
    if unit == "prompts":  # a look over prompts (a sample of them: CIS) asks nothing of those after its prefix
        first[_ABSENT] = 0
    return kind, None, first


def _drawn(family, call, rp: RolePlan, share: float, size: int, prefixes: dict) -> dict:
    """``{need key: {prompt: images}}`` a test reads at the prompt prefix holding ``share`` of its family's ``size``
    planned prompts (looks over prompts: a gate that stops after a fraction ``f`` of the drawn prompts has read the
    first ``f M`` of them, each with all its images; the union of several gates' prefixes is the longest)."""
    m = min(int(size), max(1, math.ceil(share * int(size))))
    if (family.name, m) not in prefixes:
        prefixes[family.name, m] = family.look(rp.studies[family.name], m)
    return {n.key: {r.prompt: r.n for r in n.images} for n in family.needs(call, prefixes[family.name, m])}


def sequential_plan(rp: RolePlan) -> dict:
    """What a ``--t2i-sequential`` run of a role's plan would make: worst, expected and best case images.

    A gate can stop early when its family has looks and more than one is planned. Best case: its
    ``needs`` at the first look; expected: the family's null-model shares (``Family.null_shares``) at
    the bench's ``N`` and batch size nearest the run's (arithmetic:
    :func:`~t2i_fairness.gating.sequential.plan.sequential_images`).

    Returns:
        the counts of ``sequential_images``, ``<case>_hours`` (``None`` without a rate), ``batch``,
        ``gates``, ``early_gates``, ``reports``, ``runs_to_n`` (reason -> tests), ``bench_batches``,
        ``bench_sizes`` and ``source``.

    Example:
        >>> from types import SimpleNamespace
        >>> from t2i_fairness.spine.plan import GateCall, ImageRequest, Need
        >>> need = Need("rows", (), (ImageRequest("a doctor", 4),))
        >>> bench = SimpleNamespace(factory=SimpleNamespace(batch_size=2), source=SimpleNamespace(spec="images:x"))
        >>> rp = RolePlan("candidate", T2IOptions(), bench, needs=[("word_influence", need)], requests=list(need.images),
        ...               readers={("word_influence", need.key): [GateCall("test_word_influence")]})
        >>> s = sequential_plan(rp)
        >>> s["worst"], s["expected"], s["best"], sorted(s["runs_to_n"].values())
        (4, 4, 4, [1])
    """
    from collections import Counter

    from t2i_fairness.families import FAMILIES
    from t2i_fairness.families.base import null_shares
    from t2i_fairness.gating.sequential.plan import PromptUse, null_share, sequential_images
    from t2i_fairness.spine.rates import estimate_hours

    families = {f.name: f for f in FAMILIES}
    tables = {f.name: null_shares(f) for f in FAMILIES}
    batch = int(rp.bench.factory.batch_size)
    looks: dict[str, Any] = {}
    decided: dict[tuple, tuple] = {}
    uses: list[PromptUse] = []
    prefixes: dict[tuple[str, int], Any] = {}
    bench_batches: set[int] = set()
    bench_sizes: dict[str, list] = {}
    for fname, need in rp.needs:
        for call in rp.readers.get((fname, need.key), ()):
            cid = _call_id(fname, call)
            if cid not in decided:
                decided[cid] = _early(families[fname], call, rp, batch, looks)
    # a report (no indicator) of a family whose round loop has a gate reads the look its gates reached (Rounds.reached):
    # it holds no prompt; alone, it reads N
    looped = {cid[0] for cid, (kind, why, _) in decided.items() if why is None}
    reports = {cid for cid, (kind, _, _) in decided.items() if kind == _REPORT and cid[0] in looped}
    for fname, need in rp.needs:
        full: dict[str, int] = {}
        for r in need.images:
            full[r.prompt] = max(full.get(r.prompt, 0), r.n)
        for call in rp.readers.get((fname, need.key), ()):
            cid = _call_id(fname, call)
            if cid in reports:
                continue
            kind, why, first = decided[cid]
            # a test that can stop early has its family's look in `looks` (_early put it there): (look, unit, N)
            share, at = (1.0, None) if why else null_share(tables[fname], kind, batch, looks[fname][2])
            if at is not None:
                bench_batches.add(at[1])
                bench_sizes[fname] = [at[0], looks[fname][1]]
            at_first = {} if first is None else first.get(need.key, {})
            absent = None if first is None else first.get(_ABSENT)
            # looks over prompts: the expected images are those of the prefix holding the share of the drawn prompts
            # (each draw with all its images; a text drawn twice, its draws' images), not a share of every prompt's
            # images, which counted the first look's prompts twice
            drawn = (_drawn(families[fname], call, rp, share, looks[fname][2], prefixes).get(need.key, {})
                     if why is None and absent is not None else None)
            for prompt, n in full.items():
                f = min(n, at_first.get(prompt, n if absent is None else absent)) if why is None else n
                s = 1.0 if why is not None else share if drawn is None else min(1.0, drawn.get(prompt, 0) / n)
                uses.append(PromptUse(prompt, n, f, s))
    out = sequential_images(uses, {p: set(idx) for p, idx in rp.cached.items()})
    reasons = Counter(why for cid, (_, why, _) in decided.items() if why and cid not in reports)
    rate = None if rp.bench.source.spec.startswith("images:") else role_rate(rp)[1]
    for case in ("worst", "expected", "best"):
        out[f"{case}_hours"] = estimate_hours(out[f"{case}_to_make"], rate) if rate else None
    out.update(batch=batch, gates=len(decided), early_gates=sum(1 for _, why, _ in decided.values() if why is None),
               reports=len(reports),
               runs_to_n=dict(reasons.most_common()), bench_batches=sorted(bench_batches),
               bench_sizes=dict(sorted(bench_sizes.items())),
               source="; ".join(dict.fromkeys(t.source for t in tables.values() if t is not None)))
    return out


def _case_hours(rp: RolePlan, images: int) -> str:
    from t2i_fairness.spine.rates import estimate_hours

    if not images:
        return "0 h"
    if rp.bench.source.spec.startswith("images:"):
        return "none (images read from a manifest)"
    device, rate = role_rate(rp)
    return f"{estimate_hours(images, rate):.2f} h" if rate else "no rate"


def _sequential_lines(rp: RolePlan, cost: dict | None = None) -> list[str]:
    """The plan's ``--t2i-sequential`` section of a role (``t2i-fairness plan --t2i-sequential``)."""
    cost = cost or sequential_plan(rp)
    device, rate = (None, None) if rp.bench.source.spec.startswith("images:") else role_rate(rp)
    kind = "GPU" if (device or "").startswith("cuda") else (device or "generation")
    lines = [f"  --t2i-sequential (docs/sequential-plan.md): images of a run in rounds (multiples of the batch size "
             f"{cost['batch']}), {kind} time from the rate above; design {rp.options.design}"]
    lines.append(f"    {'case':<11} {'images':>7} {'to make':>8} {'time':>9}")
    bench = ", ".join(f"batch {b}" + ("" if b == cost["batch"] else f" (the bench's nearest to {cost['batch']})")
                      for b in cost["bench_batches"]) or "none used: no gate stops early"
    if cost.get("bench_sizes"):
        bench += " and the bench's N of " + ", ".join(f"{n:,} {unit or 'per prompt'} ({fam})"
                                                    for fam, (n, unit) in cost["bench_sizes"].items())
    for case, what in (("worst", "the fixed-N plan: no gate uses more than N images per prompt"),
                       ("expected", f"null model (did not regress): per-gate image shares measured at {bench}"),
                       ("best", "every gate that can stop early stops after its first round (one batch per prompt)")):
        label = "expected" if case == "expected" else f"{case} case"
        lines.append(f"    {label:<11} {cost[case]:>7} {cost[case + '_to_make']:>8} {_case_hours(rp, cost[case + '_to_make']):>9}"
                     f"  {what}")
    lines.append(f"    expected: the null-model expectation of {cost['source']}; a regressed or borderline model costs "
                 "more, up to the worst case. Prompts read by a gate that runs to N count at N in every case.")
    lines.append("    early passes keep the fixed-N power: a gate passes early only once any miss its look leaves possible "
                 "is one the fixed-N test at N would catch at most 0.5% of the time (misses from 0.01 up are looked for "
                 "as at fixed N; docs/sequential.md)")
    lines += _indifference_lines(rp.options)
    if rate is None and device is not None and cost["worst_to_make"]:
        lines.append(f"    no measured rate for this model and settings on {device}: no hours "
                     "(a generating run stores one; or run bench/bench_generation.py)")
    lines.append(f"    {cost['early_prompts']} of {cost['prompts']} prompt(s) can stop before N (every gate reading them can); "
                 f"{cost['early_gates']} of {cost['gates']} planned gate test(s) can stop early"
                 + ("; the others run to N:" if cost["runs_to_n"] else ""))
    for why, count in cost["runs_to_n"].items():
        lines.append(f"      {count:>5}  {why}")
    if cost.get("reports"):
        lines.append(f"    {cost['reports']} report test(s) (no indicator) read the images their families' gates make (the last "
                     "look a gate needed): they hold no prompt")
    return lines


def _indifference_lines(options: T2IOptions) -> list[str]:
    """The plan's statement of a team's indifference margins (the thresholds file's): fewer images, less power."""
    from t2i_fairness.gating.thresholds import ThresholdFile, ThresholdFileError

    path = options.thresholds
    try:
        t = ThresholdFile.load(path) if path is not None else None
    except (ThresholdFileError, OSError):
        return []
    if t is None:
        return []
    gates = {g: b.indifference for g, b in t.gates.items() if b.indifference}
    if not t.indifference and not gates:
        return []
    kinds = ", ".join(f"{k} {m:g}" for k, m in sorted(t.indifference.items()))
    return [f"    indifference margins ({path}): "
            + (f"per kind {kinds}" if kinds else "")
            + ("; " if kinds and gates else "") + (f"{len(gates)} gate(s) their own" if gates else "")
            + ": such a gate passes early once any miss is below its margin, so a smaller miss the fixed-N run "
            "would fail can pass (each early pass says so); the expected images above are the default rule's"]
