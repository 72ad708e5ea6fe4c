"""Engines that run a plan: in this process (``local``) or on a Ray cluster (``ray``, Ray Data).

Both run the same jobs with :func:`~t2i_fairness.spine.plan.run_job`, so the bytes are the pytest
path's whichever engine made them, and a job whose images exist writes nothing. A failing job is
reported with its prompt and indices while the others go on; a model that cannot be loaded is
reported once; Ray restarts dead actors and retries their tasks. With ``--stage features`` the
plan's study slices are then computed, reference-side first.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from t2i_fairness.base.cache import is_url
from t2i_fairness.spine.options import T2IOptions
from t2i_fairness.spine.plan import BatchJob, Need, run_job

__all__ = ["EngineUnavailable", "Outcome", "RAY_INSTALL", "features_local", "features_ray", "generate_first", "generate_local",
           "generate_ray", "portable_options"]

RAY_INSTALL = "pip install 't2i-fairness[ray]'  (or: pip install 'ray[data]')"


class EngineUnavailable(RuntimeError):
    """The engine asked for is not installed (the message says how to install it)."""


@dataclass
class Outcome:
    """What an engine run did."""

    written: int = 0  # images (or slices, for features) made
    jobs: int = 0  # jobs finished (with or without writing)
    failures: list[tuple[str, str]] = field(default_factory=list)  # (what, error)
    computed: dict[str, int] = field(default_factory=dict)  # features: kind -> entries computed
    reused: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def add_counts(self, computed: dict, reused: dict) -> None:
        for mine, theirs in ((self.computed, computed), (self.reused, reused)):
            for k, v in theirs.items():
                mine[k] = mine.get(k, 0) + int(v)


# ------------------------------------------------------------------------------------------ shared pieces
def job_label(job: BatchJob) -> str:
    """How a failing job names itself: role, prompt and image indices."""
    return f"{job.prompt!r} images {job.indices[0]}..{job.indices[-1]} ({job.role})"


def _error(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:500]


def _is_model_error(exc: BaseException) -> bool:
    from t2i_fairness.errors import ModelLoadError

    return isinstance(exc, ModelLoadError)


@contextlib.contextmanager
def progress_bar(total: int, desc: str, enabled: bool = True, unit: str = "img"):
    """A bar with the rate (images/s) and the time left; yields ``advance(n)``."""
    if not enabled or total <= 0:
        yield lambda n: None
        return
    from tqdm import tqdm

    with tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True, mininterval=0.5,
              smoothing=0.1) as bar:
        yield bar.update


def portable_options(options: T2IOptions, device: str | None = None) -> T2IOptions:
    """Options another process can rebuild a Workbench from: families as a plain dict (picklable),
    cache paths absolute (workers run in other folders), a fixed device when given, no progress bars."""
    changes: dict[str, Any] = {"families": dict(options.families), "progress": False}
    if not is_url(options.cache_dir):
        changes["cache_dir"] = Path(options.cache_dir).resolve()
    changes["cache_mirror"] = Path(options.cache_mirror).resolve()
    if device is not None:
        changes["device"] = device
    return dataclasses.replace(options, **changes)


def run_jobs(factory, jobs: Iterable[BatchJob], advance: Callable[[int], None], outcome: Outcome) -> None:
    """Run jobs in order (a batch another process holds comes last, after waiting for it); failures are recorded."""
    deferred = []
    model_error = None
    for wait, batch in ((False, list(jobs)), (True, deferred)):
        for job in batch:
            if model_error is not None:
                break
            try:
                written = run_job(factory, job, wait=wait)
            except Exception as exc:  # noqa: BLE001 - a failing job names itself; the others go on
                if _is_model_error(exc):
                    model_error = _error(exc)
                    outcome.failures.append((f"model {factory.source.spec!r}", model_error))
                else:
                    outcome.failures.append((job_label(job), _error(exc)))
                continue
            if written is None:
                deferred.append(job)
                continue
            outcome.written += written
            outcome.jobs += 1
            advance(len(job.write))


# ------------------------------------------------------------------------------------------ local engine
def generate_local(plan, progress: bool = True) -> Outcome:
    """Make the plan's missing images in this process (each role's jobs in plan order)."""
    outcome = Outcome()
    start = time.perf_counter()
    for rp in plan.roles:
        with progress_bar(rp.n_to_make, f"generating ({rp.role})", progress) as advance:
            run_jobs(rp.bench.factory, rp.jobs, advance, outcome)
    outcome.seconds = time.perf_counter() - start
    return outcome


def generate_first(bench, tests) -> Outcome:
    """Generation first (a pytest run's): make every image the selected ``tests`` of the workbench's role
    will ask for, in canonical batches, then release the generator and whatever planning loaded.

    Raises:
        ModelLoadError: the generator cannot be loaded or does not fit.
    """
    from t2i_fairness.distributed.planner import build_plan
    from t2i_fairness.distributed.selection import Selection

    from t2i_fairness.errors import ModelLoadError, OptionError

    role = getattr(bench, "role", "candidate")
    selection = Selection(bench.options, [t for t in tests if t.call.role == role])
    try:
        plan = build_plan(selection, run=bench.run, benches={role: bench})
    except (ModelLoadError, OptionError, OSError):
        raise
    except Exception as exc:  # noqa: BLE001 - a study that cannot plan: its gates generate as they run
        bench.use.notes.append(f"generation first skipped: planning the {role}'s images raised {_error(exc)}; "
                               "images are generated as the gates ask, with the generator held until the last")
        return Outcome()
    outcome = Outcome()
    start = time.perf_counter()
    for rp in plan.roles:
        bench.release(generator=False)  # what planning loaded (a masked LM to plan word-level prompts): not now
        if rp.jobs:
            bench.factory.source.get()  # loaded here, so a model that cannot be loaded stops the run at once
            clock = getattr(bench.factory, "clock", None)  # the run's time left, as the gates' own generation shows it
            desc = f"generating first ({role})" + (f" [{clock.describe(bench.factory.measured)}]" if clock else "")
            with bench.progress(rp.n_to_make, desc) as shown:
                def advance(n: int) -> None:
                    shown(n)
                    if clock is not None:
                        clock.written += n

                run_jobs(bench.factory, rp.jobs, advance, outcome)
    bench.generated_first = True
    bench.release(keep=None)  # the generator: every planned image is made
    outcome.seconds = time.perf_counter() - start
    return outcome


def compute_needs(bench, families: dict, needs: Iterable[tuple[str, Need]], studies: dict, outcome: Outcome,
                  advance: Callable[[int], None]) -> None:
    """Compute study slices on ``bench`` (the families' own study methods); failures are recorded."""
    for family_name, need in needs:
        try:
            if family_name not in studies:
                family = families[family_name]
                studies[family_name] = family.study(bench, bench.options.family(family_name))
            need.compute(studies[family_name])
            outcome.written += 1
            outcome.jobs += 1
        except Exception as exc:  # noqa: BLE001
            outcome.failures.append((f"{family_name}.{need.method}{tuple(need.args)!r}", _error(exc)))
        finally:
            bench.close()  # rows flushed (and uploaded to a shared cache) as each slice ends
        advance(1)


def features_local(plan, progress: bool = True) -> Outcome:
    """Compute the plan's study slices in this process: reference-side ones first, then the rest."""
    from t2i_fairness.families import FAMILIES

    families = {f.name: f for f in FAMILIES}
    outcome = Outcome()
    start = time.perf_counter()
    for rp in plan.roles:
        ordered = [x for x in rp.needs if x[1].first] + [x for x in rp.needs if not x[1].first]
        before = dataclasses.asdict(rp.bench.cache.stats)
        with progress_bar(len(ordered), f"features ({rp.role})", progress, unit="slice") as advance:
            compute_needs(rp.bench, families, ordered, {}, outcome, advance)
        after = dataclasses.asdict(rp.bench.cache.stats)
        outcome.add_counts(_delta(after["computed"], before["computed"]), _delta(after["reused"], before["reused"]))
    outcome.seconds = time.perf_counter() - start
    return outcome


def _delta(after: dict, before: dict) -> dict:
    return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}


# ------------------------------------------------------------------------------------------ Ray engine
def import_ray():
    """``ray`` with Ray Data, or :class:`EngineUnavailable` saying how to install it."""
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as exc:
        raise EngineUnavailable(f"--engine ray needs Ray Data, which is not installed ({exc}); install it with: "
                                f"{RAY_INSTALL}") from None
    return ray


def init_ray(address: str | None = None, num_cpus: int | None = None):
    """Connect to the cluster at ``address`` (``auto``: the one this machine belongs to), or start a
    local instance (``num_cpus`` CPUs). Returns the ``ray`` module."""
    ray = import_ray()
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": True, "logging_level": logging.WARNING}
        if address:
            kwargs["address"] = address
        else:
            if num_cpus:
                kwargs["num_cpus"] = int(num_cpus)
            # a local instance's workers import the same modules the driver can (python:module:factory models)
            path = os.pathsep.join(p for p in [os.getcwd(), os.environ.get("PYTHONPATH", "")] if p)
            kwargs["runtime_env"] = {"env_vars": {"PYTHONPATH": path}}
        ray.init(**kwargs)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    return ray


def cluster_gpus(ray) -> int:
    return int(ray.cluster_resources().get("GPU", 0))


def _workers(ray, workers: int | None, jobs: int) -> tuple[int, dict]:
    """How many actors, and the resources of each: one per GPU, else ``workers`` (default: CPUs) on one CPU each."""
    gpus = cluster_gpus(ray)
    if gpus:
        n, resources = (workers or gpus), {"num_gpus": 1}
    else:
        n, resources = (workers or max(1, int(ray.cluster_resources().get("CPU", 1)))), {"num_cpus": 1}
    return max(1, min(n, jobs)), resources


def _worker_run(worker):
    """A worker actor's run context: its roles' options share one ``--t2i-device`` and ``--t2i-precision``,
    decided once per actor, on its machine (:meth:`~t2i_fairness.base.devices.RunContext.decide`), and
    handed to each role's workbench."""
    if getattr(worker, "_run", None) is None:
        from t2i_fairness.base.devices import RunContext

        options = next(iter(worker.options.values()))
        worker._run = RunContext.decide(options.device, options.precision)
    return worker._run


class ImageWorker:
    """A Ray Data actor: one Workbench per role (the generator loaded once, on first job), jobs run one
    canonical batch per call, as the pytest path cuts them."""

    def __init__(self, options: dict):
        self.options = options  # role -> portable T2IOptions
        self.benches: dict = {}
        self.broken: dict[str, str] = {}

    def _factory(self, role: str):
        if role not in self.benches:
            from t2i_fairness.base.memo import no_progress
            from t2i_fairness.spine.workbench import Workbench

            self.benches[role] = Workbench(self.options[role], no_progress, run=_worker_run(self))
        return self.benches[role].factory

    def __call__(self, batch: dict) -> dict:
        out: dict[str, list] = {"job": [], "written": [], "failed": [], "error": []}
        for text in batch["job"]:
            job = BatchJob.from_dict(json.loads(str(text)))
            written, failed, error = 0, "", ""
            if job.role in self.broken:
                failed, error = f"model {self.options[job.role].model!r}", self.broken[job.role]
            else:
                try:
                    written = run_job(self._factory(job.role), job) or 0
                except Exception as exc:  # noqa: BLE001 - reported by the driver, the other jobs go on
                    error = _error(exc)
                    if _is_model_error(exc):
                        self.broken[job.role] = error
                        failed = f"model {self.options[job.role].model!r}"
                    else:
                        failed = job_label(job)
            out["job"].append(str(text))
            out["written"].append(int(written))
            out["failed"].append(failed)
            out["error"].append(error)
        return out


class FeatureWorker:
    """A Ray Data actor computing study slices (``--stage features``): one Workbench and study per role and family."""

    def __init__(self, options: dict):
        from t2i_fairness.families import FAMILIES

        self.options = options
        self.families = {f.name: f for f in FAMILIES}
        self.benches: dict = {}
        self.studies: dict = {}

    def __call__(self, batch: dict) -> dict:
        from t2i_fairness.base.memo import no_progress
        from t2i_fairness.spine.workbench import Workbench

        out: dict[str, list] = {"need": [], "done": [], "failed": [], "error": [], "computed": [], "reused": []}
        for text in batch["need"]:
            d = json.loads(str(text))
            role = d["role"]
            if role not in self.benches:
                self.benches[role] = Workbench(self.options[role], no_progress, run=_worker_run(self))
                self.studies[role] = {}
            bench = self.benches[role]
            before = dataclasses.asdict(bench.cache.stats)
            outcome = Outcome()
            need = Need(d["method"], tuple(_tuples(a) for a in d["args"]))
            compute_needs(bench, self.families, [(d["family"], need)], self.studies[role], outcome, lambda n: None)
            after = dataclasses.asdict(bench.cache.stats)
            out["need"].append(str(text))
            out["done"].append(outcome.jobs)
            out["failed"].append(outcome.failures[0][0] if outcome.failures else "")
            out["error"].append(outcome.failures[0][1] if outcome.failures else "")
            out["computed"].append(json.dumps(_delta(after["computed"], before["computed"])))
            out["reused"].append(json.dumps(_delta(after["reused"], before["reused"])))
        return out


def _tuples(value):
    """JSON lists back to the tuples study arguments were (``("bag", "car")`` prompts, ...)."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _ray_map(ray, rows: list[dict], worker, options: dict, workers: int | None, advance, on_row) -> None:
    n, resources = _workers(ray, workers, len(rows))
    ds = ray.data.from_items(rows, override_num_blocks=min(len(rows), 1000))
    out = ds.map_batches(worker, fn_constructor_kwargs={"options": options}, batch_size=1, concurrency=n,
                         **resources)
    for row in out.iter_rows():
        on_row(row)
        advance(row)


def generate_ray(plan, address: str | None = None, workers: int | None = None, num_cpus: int | None = None,
                 progress: bool = True) -> Outcome:
    """Make the plan's missing images on Ray Data: one actor per GPU (or ``workers`` CPU actors), one
    canonical batch per call (EngineUnavailable when Ray is not installed).
    """
    ray = init_ray(address, num_cpus)
    outcome = Outcome()
    rows = [{"job": json.dumps(job.to_dict())} for rp in plan.roles for job in rp.jobs]
    if not rows:
        return outcome
    device = plan_device(plan)
    options = {rp.role: portable_options(rp.options, device) for rp in plan.roles}
    start = time.perf_counter()

    def on_row(row) -> None:
        outcome.written += int(row["written"])
        if row["failed"]:
            outcome.failures.append((str(row["failed"]), str(row["error"])))
        else:
            outcome.jobs += 1

    total = sum(rp.n_to_make for rp in plan.roles)
    with progress_bar(total, "generating (ray)", progress) as advance:
        _ray_map(ray, rows, ImageWorker, options, workers,
                 lambda row: advance(len(json.loads(str(row["job"]))["write"])), on_row)
    outcome.seconds = time.perf_counter() - start
    return outcome


def features_ray(plan, address: str | None = None, workers: int | None = None, num_cpus: int | None = None,
                 progress: bool = True) -> Outcome:
    """Compute the plan's study slices on Ray Data actors, reference-side slices first, so no two actors
    encode the same reference set (EngineUnavailable when Ray is not installed).
    """
    ray = init_ray(address, num_cpus)
    outcome = Outcome()
    device = plan_device(plan)
    options = {rp.role: portable_options(rp.options, device) for rp in plan.roles}
    start = time.perf_counter()

    def on_row(row) -> None:
        outcome.jobs += int(row["done"])
        outcome.written += int(row["done"])
        if row["failed"]:
            outcome.failures.append((str(row["failed"]), str(row["error"])))
        outcome.add_counts(json.loads(str(row["computed"])), json.loads(str(row["reused"])))

    for first in (True, False):
        rows = [{"need": json.dumps({"role": rp.role, "family": f, "method": n.method, "args": list(n.args)})}
                for rp in plan.roles for f, n in rp.needs if n.first == first]
        if not rows:
            continue
        with progress_bar(len(rows), "features (ray)" + (": reference sets" if first else ""), progress,
                          unit="slice") as advance:
            _ray_map(ray, rows, FeatureWorker, options, workers, lambda row: advance(1), on_row)
    outcome.seconds = time.perf_counter() - start
    return outcome


def plan_device(plan) -> str | None:
    """The device kind the plan named its images for (the workers must generate on it)."""
    return next((rp.generate_on for rp in plan.roles), None)
