"""A selection's plan: the images its tests will ask for, per family and role, and the batches that make them.

Each selected test is handed to its family's ``needs`` (the family of its suite module, or of the
study fixtures it uses), which answers with study slices and their image requests, computed by the
study's own code without generating anything. The requests of every slice, in pytest's order, are
then cut into canonical batch jobs against the cache (:func:`~t2i_fairness.spine.plan.batch_jobs`):
what a ``pytest`` run of the same selection would generate, batch for batch.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from t2i_fairness.distributed.selection import Selection
from t2i_fairness.spine.options import T2IOptions
from t2i_fairness.spine.plan import BatchJob, ImageRequest, Need, batch_jobs, role_options, unique_requests

__all__ = ["Plan", "RolePlan", "build_plan", "plan_json", "plan_lines", "sequential_plan", "widening"]


@dataclass
class RolePlan:
    """The plan of one model (``candidate``, or ``baseline`` under ``--t2i-baseline-model``)."""

    role: str
    options: T2IOptions
    bench: Any  # the role's Workbench (its generator is never loaded by planning)
    needs: list[tuple[str, Need]] = field(default_factory=list)  # (family, need), each once, in pytest's order
    requests: list[ImageRequest] = field(default_factory=list)  # each (prompt, n) once, in the order asked
    by_family: dict[str, list[ImageRequest]] = field(default_factory=dict)
    jobs: list[BatchJob] = field(default_factory=list)
    generate_on: str = "cpu"  # the device kind the image keys name (workers generate on it)
    readers: dict[tuple[str, tuple], list] = field(default_factory=dict)  # (family, need key) -> GateCalls reading it
    studies: dict[str, Any] = field(default_factory=dict)  # family -> its study (what ``needs`` was asked of)

    @property
    def images(self) -> set[tuple[str, int]]:
        """Distinct (prompt, image index) pairs asked for."""
        return {(r.prompt, i) for r in self.requests for i in r.indices}

    @property
    def to_make(self) -> set[tuple[str, int]]:
        return {(j.prompt, i) for j in self.jobs for i in j.write}

    def image_keys(self) -> list[str]:
        """Cache keys of every image asked for (what a run leaves under ``images/``)."""
        factory = self.bench.factory
        return sorted({factory.ref(p, i).key for p, i in self.images})


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
               read_only: bool = False, run=None, benches: dict | None = None) -> Plan:
    """The plan of a selection: needs per family and role, image requests, and the jobs that make the missing ones.

    Args:
        selection: from :func:`~t2i_fairness.distributed.selection.collect`.
        check_cache: cut jobs against the cache (False: as if it were empty).
        progress: the workbenches' progress display (None: silent).
        generate_on: the device the images will be made on, when not this machine's (a Ray
            cluster's GPUs); it enters the image keys (CUDA images are fp16).
        read_only: look at the cache and create nothing (``t2i-fairness plan``); ``generate`` makes images
            with the plan's workbenches, so it plans writable.
        run: the run's :class:`~t2i_fairness.base.devices.RunContext` (device and precision), handed to both
            roles' workbenches (default: decided here from the selection's options).
        benches: role -> the workbench to plan on (a pytest run's own); the other roles get new ones.

    Raises:
        OptionError, ModelLoadError, OSError: as a pytest run of the selection would (a bad option,
            a model spec that cannot be resolved, a cache folder that cannot be written).
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
        rp = roles[role]
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
        present = None if check_cache else (lambda ref: False)
        rp.jobs = batch_jobs(rp.requests, rp.bench.factory, rp.role, present=present)
    plan.roles = [roles[r] for r in ("baseline", "candidate") if r in roles]
    return plan


def _family_title(name: str) -> str:
    from t2i_fairness.families import FAMILIES

    return next((f.title for f in FAMILIES if f.name == name), name)


def family_counts(rp: RolePlan) -> list[dict]:
    """Per family: prompts, images asked for, already cached, to make (images shared by families count in each).

    Args:
        rp: a role's plan (its ``by_family`` requests and its ``jobs``).

    Example:
        >>> from t2i_fairness.spine.plan import BatchJob, ImageRequest
        >>> rp = RolePlan("candidate", T2IOptions(), None, by_family={"dig_in": [ImageRequest("bag in Africa", 4)]},
        ...               jobs=[BatchJob("bag in Africa", (2, 3), (2, 3))])
        >>> family_counts(rp)
        [{'family': 'dig_in', 'prompts': 1, 'images': 4, 'cached': 2, 'to_make': 2}]
    """
    from t2i_fairness.families import REGISTERED

    make = rp.to_make
    out = []
    order = {name: i for i, name in enumerate(REGISTERED)}
    for name, reqs in sorted(rp.by_family.items(), key=lambda kv: order.get(kv[0], len(order))):
        images = {(r.prompt, i) for r in reqs for i in r.indices}
        out.append({"family": name, "prompts": len({r.prompt for r in reqs}), "images": len(images),
                    "cached": len(images - make), "to_make": len(images & make)})
    return out


def widening(rp: RolePlan) -> dict | None:
    """What set-scope de-duplication costs the selection: ``None`` when no need was widened, else ``why``,
    ``gates`` (widened needs) and ``narrow_images`` (distinct images if every widened need asked only
    for its own slice, the other needs unchanged).

    A ``-k`` selection of one region still reads every region's images of its template under
    ``--t2i-dedupe-scope set`` (DIG In's code): an image is dropped when it duplicates an image of
    *another* region, which only those images can show. Planning less would change the gated value
    (or make it depend on what happens to be cached), so the plan says what it costs instead.

    Example:
        >>> from t2i_fairness.spine.plan import ImageRequest, Need
        >>> wide = Need("g", ("a",), (ImageRequest("bag in Africa", 2), ImageRequest("bag in Europe", 2)),
        ...             widened="set-scope", narrow=(ImageRequest("bag in Africa", 2),))
        >>> rp = RolePlan("candidate", T2IOptions(), None, needs=[("dig_in", wide)])
        >>> widening(rp)
        {'why': 'set-scope', 'gates': 1, 'narrow_images': 2}
    """
    wide = [n for _, n in rp.needs if n.widened]
    if not wide:
        return None
    narrow = {(r.prompt, i) for _, n in rp.needs for r in (n.narrow if n.widened else n.images) for i in r.indices}
    return {"why": wide[0].widened, "gates": len(wide), "narrow_images": len(narrow)}


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
        images, make = rp.images, rp.to_make
        lines.append(f"  {'all (distinct)':<28} {sum(plan.tests_by_family.values()):>6} "
                     f"{len({p for p, _ in images}):>8} {len(images):>7} {len(images - make):>7} {len(make):>8}")
        lines.append(f"  {len(make)} image(s) to make in {len(rp.jobs)} batch(es)")
        widened = widening(rp)
        if widened:
            lines.append(f"  {widened['why']}: {widened['gates']} selected slice(s) plan {len(images)} images where "
                         f"their own prompts need {widened['narrow_images']} (--t2i-dedupe-scope group plans only "
                         "those, and looks for duplicates within each group only)")
        lines.append("  " + cost_line(rp, len(make)))
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
            "requests": [{"prompt": r.prompt, "n": r.n, "keys": [rp.bench.factory.ref(r.prompt, i).key for i in r.indices]}
                         for r in rp.requests],
            "jobs": [j.to_dict() for j in rp.jobs],
            "estimate": _estimate_json(rp),
        })
        if rp.options.sequential:
            out["roles"][-1]["sequential"] = sequential_plan(rp)
    return out


def _estimate_json(rp: RolePlan) -> dict:
    """The cost estimate of a role for ``plan --output``: device, seconds per image and hours (``None`` without a rate)."""
    import dataclasses

    from t2i_fairness.spine.rates import estimate_hours

    images = len(rp.to_make)
    if rp.bench.source.spec.startswith("images:"):
        return {"device": None, "seconds_per_image": None, "hours": 0.0 if not images else None, "rate": None}
    device, rate = role_rate(rp)
    return {"device": device, "images": images, "seconds_per_image": rate.seconds_per_image if rate else None,
            "hours": estimate_hours(images, rate) if rate else None, "rate": dataclasses.asdict(rate) if rate else None}


# -- --t2i-sequential: what a run in rounds would cost -------------------------------------------------


def _call_id(family: str, call) -> tuple:
    return (family, call.test, call.nodeid or repr(sorted(call.params.items(), key=lambda kv: kv[0])))


def _early(family, call, rp: RolePlan, batch: int, looks: dict) -> tuple[str | None, str | None, dict | None]:
    """``(kind, why it runs to N or None, {need key: {prompt: images at the first round}})`` of one selected test."""
    from t2i_fairness.metrics.sequential import KINDS

    kind = family.sequential.get(call.test)
    if kind is None or kind not in KINDS:
        return kind, f"{family.title}: no sequential kind declared for {call.test}", None
    if KINDS[kind] == "fixed":
        return kind, f"{family.title}: {kind} gates have no valid early stop", None
    if family.look is None:
        return kind, f"{family.title}: no look at fewer images yet (its {kind} gates run to N)", None
    if call.role == "baseline":
        return kind, "baseline role: runs to N", None
    if family.runs_to_n is not None:
        why = family.runs_to_n(call, rp.options)
        if why:
            return kind, f"{family.title} {kind}: {why}", None
    if family.name not in looks:
        try:
            looks[family.name] = family.look(rp.studies[family.name], batch)
        except ValueError:  # the batch is not below N: the round driver's single look
            looks[family.name] = None
    if looks[family.name] is None:
        return kind, f"--t2i-batch-size {batch} gives one look for N <= {batch}", None
    first = {n.key: {r.prompt: r.n for r in n.images} for n in family.needs(call, looks[family.name])}
    full = {n.key: {r.prompt: r.n for r in n.images} for n in family.needs(call, rp.studies[family.name])}
    if all(first.get(key, {}).get(p, n) >= n for key, prompts in full.items() for p, n in prompts.items()):
        return kind, f"--t2i-batch-size {batch} gives one look for N <= {batch}", None  # the look is the fixed-N study
    return kind, None, first


def sequential_plan(rp: RolePlan) -> dict:
    """What a ``--t2i-sequential`` run of a role's plan would make: worst, expected and best case images.

    Each selected test is matched with the prompts it reads (its family's ``needs``). A test can stop
    early when its function's kind (``Family.sequential``) has an early stop (``share``, ``coverage``),
    its family has a look (``Family.look``), nothing in these options makes it run to ``N``
    (``Family.runs_to_n``) and the batch size is below ``N`` (rounds are multiples of the batch size:
    ``--t2i-batch-size B`` gives one look for ``N <= B``). Its first round is what its ``needs`` ask of
    the family's look at one batch per prompt, the round driver's first look; its expected images are
    the null-model share of :func:`~t2i_fairness.gating.sequential.null_share`. Every other test
    holds its prompts at ``N``. Arithmetic: :func:`~t2i_fairness.gating.sequential.sequential_images`.

    Args:
        rp: a role's plan from :func:`build_plan` (its needs, the tests reading each, its studies).

    Returns:
        the counts of ``sequential_images``, ``<case>_hours`` (from the role's measured rate; ``None``
        without one) and ``batch``, ``gates``, ``early_gates``, ``runs_to_n``
        (reason -> number of tests), ``bench_batches`` (the bench batch sizes whose shares were used),
        ``source``.

    Raises:
        what a family's ``needs`` or ``look`` raises (a look's ``ValueError``, the batch not below
        ``N``, is the single look, not an error).

    Example:
        >>> from types import SimpleNamespace
        >>> from t2i_fairness.spine.plan import GateCall, ImageRequest, Need
        >>> need = Need("rows", (), (ImageRequest("a doctor", 4),))
        >>> bench = SimpleNamespace(factory=SimpleNamespace(batch_size=2), source=SimpleNamespace(spec="images:x"))
        >>> rp = RolePlan("candidate", T2IOptions(), bench, needs=[("word_influence", need)], requests=list(need.images),
        ...               readers={("word_influence", need.key): [GateCall("test_word_influence")]})
        >>> s = sequential_plan(rp)
        >>> s["worst"], s["expected"], s["best"], s["runs_to_n"]
        (4, 4, 4, {'Word-level explanations: hoeffding gates have no valid early stop': 1})
    """
    from collections import Counter

    from t2i_fairness.families import FAMILIES
    from t2i_fairness.gating.sequential import NULL_SHARES_SOURCE, PromptUse, null_share, sequential_images
    from t2i_fairness.spine.rates import estimate_hours

    families = {f.name: f for f in FAMILIES}
    batch = int(rp.bench.factory.batch_size)
    looks: dict[str, Any] = {}
    decided: dict[tuple, tuple] = {}
    uses: list[PromptUse] = []
    bench_batches: set[int] = set()
    for fname, need in rp.needs:
        full: dict[str, int] = {}
        for r in need.images:
            full[r.prompt] = max(full.get(r.prompt, 0), r.n)
        for call in rp.readers.get((fname, need.key), ()):
            cid = _call_id(fname, call)
            if cid not in decided:
                decided[cid] = _early(families[fname], call, rp, batch, looks)
            kind, why, first = decided[cid]
            share, at = (1.0, None) if why else null_share(fname, kind, batch)
            if at is not None:
                bench_batches.add(at)
            at_first = {} if first is None else first.get(need.key, {})
            for prompt, n in full.items():
                f = min(n, at_first.get(prompt, n)) if why is None else n
                uses.append(PromptUse(prompt, n, f, share if why is None else 1.0))
    cached: dict[str, set[int]] = {}
    for p, i in rp.images - rp.to_make:
        cached.setdefault(p, set()).add(i)
    out = sequential_images(uses, cached)
    reasons = Counter(why for _, why, _ in decided.values() if why)
    rate = None if rp.bench.source.spec.startswith("images:") else role_rate(rp)[1]
    for case in ("worst", "expected", "best"):
        out[f"{case}_hours"] = estimate_hours(out[f"{case}_to_make"], rate) if rate else None
    out.update(batch=batch, gates=len(decided), early_gates=sum(1 for _, why, _ in decided.values() if why is None),
               runs_to_n=dict(reasons.most_common()), bench_batches=sorted(bench_batches), source=NULL_SHARES_SOURCE)
    return out


def _case_hours(rp: RolePlan, images: int) -> str:
    from t2i_fairness.spine.rates import estimate_hours

    if not images:
        return "0 h"
    if rp.bench.source.spec.startswith("images:"):
        return "none (images read from a manifest)"
    device, rate = role_rate(rp)
    return f"{estimate_hours(images, rate):.2f} h" if rate else "no rate"


def _sequential_lines(rp: RolePlan, seq: dict | None = None) -> list[str]:
    """The plan's ``--t2i-sequential`` section of a role (``t2i-fairness plan --t2i-sequential``)."""
    seq = seq or sequential_plan(rp)
    device, rate = (None, None) if rp.bench.source.spec.startswith("images:") else role_rate(rp)
    kind = "GPU" if (device or "").startswith("cuda") else (device or "generation")
    lines = [f"  --t2i-sequential (docs/sequential-plan.md): images of a run in rounds (multiples of the batch size "
             f"{seq['batch']}), {kind} time from the rate above"]
    lines.append(f"    {'case':<11} {'images':>7} {'to make':>8} {'time':>9}")
    bench = ", ".join(f"batch {b}" + ("" if b == seq["batch"] else f" (the bench's nearest to {seq['batch']})")
                      for b in seq["bench_batches"]) or "none used: no gate stops early"
    for case, what in (("worst", "the fixed-N plan: no gate uses more than N images per prompt"),
                       ("expected", f"null model (did not regress): per-gate image shares measured at {bench}"),
                       ("best", "every gate that can stop early stops after its first round (one batch per prompt)")):
        label = "expected" if case == "expected" else f"{case} case"
        lines.append(f"    {label:<11} {seq[case]:>7} {seq[case + '_to_make']:>8} {_case_hours(rp, seq[case + '_to_make']):>9}"
                     f"  {what}")
    lines.append(f"    expected: the null-model expectation of {seq['source']}; a regressed or borderline model costs "
                 "more, up to the worst case. Prompts read by a gate that runs to N count at N in every case.")
    if rate is None and device is not None and seq["worst_to_make"]:
        lines.append(f"    no measured rate for this model and settings on {device}: no hours "
                     "(a generating run stores one; or run bench/bench_generation.py)")
    lines.append(f"    {seq['early_prompts']} of {seq['prompts']} prompt(s) can stop before N (every gate reading them can); "
                 f"{seq['early_gates']} of {seq['gates']} planned gate test(s) can stop early"
                 + ("; the others run to N:" if seq["runs_to_n"] else ""))
    for why, count in seq["runs_to_n"].items():
        lines.append(f"      {count:>5}  {why}")
    return lines
