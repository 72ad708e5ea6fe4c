"""Measured generation rates, and what a selection will cost before it runs.

A generating run (and the generation benchmark) stores the seconds per image it measured in the
cache, keyed by device (``cpu``, ``cuda:<GPU name>``), model fingerprint and settings, the last
measurement winning. ``t2i-fairness plan`` multiplies (:func:`estimate_hours`). Where this cache has no
measurement, the package's reference rates (``data/reference_rates.json``: the README's commands measured on
the project's own machine, written by ``tools/reference_rates.py``) stand in, named as such; with neither it
says so instead of guessing.

Example:
    >>> import tempfile
    >>> from t2i_fairness.base.cache import Cache
    >>> cache, settings = Cache(tempfile.mkdtemp()), {"steps": 20, "height": 512, "width": 512, "batch_size": 8}
    >>> _ = store_rate(cache, Rate(0.172, 128, "cuda:NVIDIA H100", "sd15:fp16", settings, "bench"))
    >>> round(estimate_hours(30_000, lookup_rate(cache, "cuda:NVIDIA H100", "sd15:fp16", settings)), 2)
    1.43
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from t2i_fairness.base.cache import Cache, CorruptEntry, content_key

__all__ = ["REFERENCE", "Rate", "RunClock", "StepClock", "device_label", "duration", "estimate_hours", "lookup_rate",
           "lookup_steps", "rate_key", "reference_machine", "reference_rates", "selection_key", "step_settings", "steps_estimate", "store_rate",
           "store_steps"]

REFERENCE = "reference"  # a Rate's source when it comes from the package's reference rates


@dataclass(frozen=True)
class Rate:
    """Seconds per generated image, measured on ``device`` for ``model`` at ``settings``.

    ``seconds_per_image`` is wall time of generation per image made (whole batches; PNG encoding and
    cache writes included, model loading excluded); ``source`` is ``run`` or ``bench``.
    """

    seconds_per_image: float
    images: int
    device: str
    model: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    source: str = "run"
    measured_at: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))

    def describe(self) -> str:
        """``0.172 s/image on cuda:NVIDIA H100 (bench, 128 images, 2026-11-25T20:00:00Z)``."""
        return (f"{self.seconds_per_image:.3g} s/image on {self.device} ({self.origin()}, {self.images} images, "
                f"{self.measured_at})")

    def origin(self) -> str:
        """``run``, ``bench``, or, for a package reference rate, the machine it was measured on."""
        if self.source != REFERENCE:
            return self.source
        return f"reference rate of {reference_machine()}, not this machine's yet"


def device_label(device: str) -> str:
    """Where a rate was measured: ``cpu``, ``mps``, or ``cuda:<GPU name>`` (GPUs differ by model)."""
    from t2i_fairness.base.identity import device_class, gpu_name

    kind = device_class(device)
    name = gpu_name(device) if kind == "cuda" else None
    return f"{kind}:{name}" if name else kind


def rate_key(device: str, model: str, settings: Mapping[str, Any]) -> str:
    """The cache key of a rate: device, model fingerprint and settings."""
    return content_key(device=device, model=model, settings=dict(settings))


def _path(cache: Cache, key: str, folder: str = "rates"):
    return cache.path(folder, key, ".json")  # generation's rates in rates/, the other steps' in steps/


def store_rate(cache: Cache, rate: Rate, folder: str = "rates"):
    """Store a measured rate (replacing the last one for its device, model and settings); returns its path."""
    path = _path(cache, rate_key(rate.device, rate.model, rate.settings), folder)
    cache.write(path, json.dumps(dataclasses.asdict(rate), sort_keys=True, default=str).encode("utf-8"), checksum=True)
    return path


@functools.lru_cache(maxsize=1)
def reference_rates() -> dict[str, Any]:
    """The package's reference rates: ``{"machine": ..., "entries": {"<folder>/<key>": entry}}`` (``{}`` without
    the file), each entry as this cache stores it (a :class:`Rate`, or a selection's step record)."""
    from importlib import resources

    try:
        return json.loads((resources.files("t2i_fairness") / "data" / "reference_rates.json").read_text("utf-8"))
    except (OSError, ValueError):
        return {}


def reference_machine() -> str:
    """The machine the package's reference rates were measured on, as lines that use them name it."""
    return reference_rates().get("machine", "the project machine")


def _reference_entry(folder: str, key: str) -> Any:
    return reference_rates().get("entries", {}).get(f"{folder}/{key}")


def lookup_rate(cache: Cache, device: str, model: str, settings: Mapping[str, Any], folder: str = "rates") -> Rate | None:
    """The last rate measured for exactly this device, model and settings; else the package's reference rate for
    them (``source`` :data:`REFERENCE`); else ``None`` (also for a damaged entry, which is reported and removed).
    """

    def decode(data: bytes) -> Rate:
        try:
            return Rate(**json.loads(data))
        except (ValueError, TypeError) as exc:
            raise CorruptEntry(f"not a rate: {exc}") from exc

    key = rate_key(device, model, settings)
    found = cache.read(_path(cache, key, folder), decode, checksum=True)
    reference = _reference_entry(folder, key) if found is None else None
    return dataclasses.replace(Rate(**reference), source=REFERENCE) if reference else found


def estimate_hours(images: int, rate: "Rate | float") -> float:
    """Hours to generate ``images`` at ``rate`` (a :class:`Rate` or seconds per image); a ValueError
    for a negative count or a rate that is not positive and finite.
    """
    seconds = rate.seconds_per_image if isinstance(rate, Rate) else float(rate)
    if not (seconds > 0 and seconds != float("inf")):
        raise ValueError(f"a rate must be a positive number of seconds per image, got {seconds!r}")
    if images < 0:
        raise ValueError(f"images must be >= 0, got {images}")
    return images * seconds / 3600.0


def duration(seconds: float) -> str:
    """``1 h 05 min``, ``12 min``, ``40 s``: a duration for people."""
    seconds = max(0.0, float(seconds))
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes = int(round(seconds / 60))
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"


class RunClock:
    """How long a run's generation has left: ``planned`` images at the stored ``rate`` until the run has
    measured its own.

    Example:
        >>> RunClock(1000, 2.0).describe((0.0, 0))
        'run: 0 of 1000 images made, about 33 min left at 2 s/image (stored rate)'
    """

    def __init__(self, planned: int, rate: float | None):
        self.planned = int(planned)
        self.rate = rate
        self.written = 0  # images of the run written so far (the factory's progress adds them)

    def describe(self, measured) -> str:
        seconds, generated = float(measured[0]), int(measured[1])
        head = f"run: {self.written} of {self.planned} images made"
        left = max(0, self.planned - self.written)
        if generated:
            per, source = seconds / generated, "this run"
        elif self.rate:
            per, source = float(self.rate), "stored rate"
        else:
            return f"{head}, time left unknown until a batch is made"
        return f"{head}, about {duration(left * per)} left at {per:.3g} s/image ({source})"


REST = "the rest (collection, loading models, the gates' arithmetic)"  # StepClock.account_rest's step
STEPS = "steps"  # the cache folder of the computing steps' rates and of each selection's step record


def step_settings(kind: str) -> dict[str, str]:
    """The settings part of a computing step's rate key: the step's kind (``features``, ``masks``, ``captions``);
    the model is the step's namespace (its model's fingerprint, digested), as in the step's cache folder."""
    return {"step": kind}


class StepClock:
    """The workbench's progress bars, each computing step announced with its expected time.

    A step that names itself (``step=(kind, namespace)``: what its cache folder is keyed by) shows, in its
    bar's description from before its first item, the expected time of its ``total`` items at the rate
    stored for that step on this device, or that the bar's clock starts after its first items; after it,
    its measured rate is stored (items after the first call, so a model's loading is not counted). The bar
    itself (tqdm) shows elapsed, remaining and seconds per item while it runs.

    Example:
        >>> import contextlib, tempfile
        >>> shown = []
        >>> @contextlib.contextmanager
        ... def bar(total, desc):
        ...     shown.append(desc)
        ...     yield lambda n: None
        >>> clock = StepClock(bar, Cache(tempfile.mkdtemp()), "cpu")
        >>> with clock(3, "masks", step=("masks", "ns")) as advance:
        ...     advance(1); advance(2)
        >>> shown[0]
        'masks (no stored rate on cpu: the clock starts after the first items)'
        >>> clock.expected(6, ("masks", "ns")) > 0
        True
    """

    takes_step = True  # base.memo tells it each step's (kind, namespace)

    def __init__(self, progress, cache: Cache, device: str, now=time.perf_counter):
        self.progress, self.cache, self.device, self.now = progress, cache, device, now
        self.steps: list[dict[str, Any]] = []  # what this run computed, step by step (store_steps keeps it)

    def rate(self, step: tuple[str, str]) -> Rate | None:
        """The stored rate of ``step`` on this device (``None`` without one)."""
        kind, namespace = step
        return lookup_rate(self.cache, self.device, namespace, step_settings(kind), STEPS)

    def expected(self, total: int, step: tuple[str, str]) -> float | None:
        """Seconds ``total`` items of ``step`` take at its stored rate (``None`` without one)."""
        rate = self.rate(step)
        return None if rate is None else total * rate.seconds_per_image

    def describe(self, total: int, step: tuple[str, str]) -> str:
        """``expected 4 min at 4.1 s/item (stored rate, cpu, <when>)`` or why there is no estimate yet."""
        rate = self.rate(step)
        if rate is None:
            return f"no stored rate on {self.device}: the clock starts after the first items"
        source = "stored rate" if rate.source != REFERENCE else rate.origin()
        return (f"expected {duration(total * rate.seconds_per_image)} at {rate.seconds_per_image:.3g} s/item "
                f"({source}, {self.device}, {rate.measured_at})")

    @contextlib.contextmanager
    def __call__(self, total: int, desc: str, step: tuple[str, str] | None = None):
        if step is None or total <= 0:
            with self.progress(total, desc) as advance:
                yield advance
            return
        marks: list[tuple[float, int]] = [(self.now(), 0)]

        def counted(n: int) -> None:
            marks.append((self.now(), marks[-1][1] + int(n)))
            advance(n)

        with self.progress(total, f"{desc} ({self.describe(total, step)})") as advance:
            yield counted
        self._store(step, marks, desc)

    def account_rest(self, elapsed: float, generating: float) -> None:
        """Add the run's time that no step measured (``elapsed`` less ``generating`` and the steps: collection,
        loading models, the gates' own arithmetic) as one step, so the next run's expected time covers the whole
        run; nothing when no step computed anything (a warm run keeps the last record that did)."""
        if not any(step["items"] for step in self.steps):
            return
        rest = elapsed - generating - sum(step["seconds"] for step in self.steps)
        if rest > 0:
            self.steps.append({"desc": REST, "kind": "rest", "namespace": "run", "items": 1, "seconds": rest})

    def _store(self, step: tuple[str, str], marks: list[tuple[float, int]], desc: str) -> None:
        """The step's seconds per item, after its first call where there were more (a load is not an item)."""
        (t0, _), (t1, n1), (tn, n) = marks[0], marks[min(1, len(marks) - 1)], marks[-1]
        seconds, items = (tn - t1, n - n1) if n > n1 > 0 else (tn - t0, n)
        kind, namespace = step
        self.steps.append({"desc": desc, "kind": kind, "namespace": namespace, "items": n, "seconds": tn - t0})
        if items <= 0 or seconds <= 0:
            return
        store_rate(self.cache, Rate(seconds / items, items, self.device, namespace, step_settings(kind), "run"), STEPS)


# options that change no step's item count or rate (where files go, what is shown or written)
_NOT_KEYED = frozenset({"cache_dir", "cache_mirror", "thresholds", "update_thresholds", "allow_loosen", "artifacts",
                        "report", "progress", "canary_spec", "design", "families", "history", "history_off", "mlflow",
                        "scorer_check", "audit"})
_PACKAGE = str(Path(__file__).resolve().parents[1])  # a bundled file's path names this clone: keyed without it


def _portable(text: str) -> str:
    return text.replace(_PACKAGE, "t2i_fairness")


def _set_values(options, skip=frozenset()) -> dict[str, str]:
    """A frozen options record's fields that are set (not ``None``), as portable text: an option added later with
    no value leaves earlier keys (and the package's reference record) as they were."""
    if not dataclasses.is_dataclass(options):
        return {"value": _portable(repr(options))}
    return {f.name: _portable(str(value)) for f in dataclasses.fields(options)
            if f.name not in skip and (value := getattr(options, f.name)) is not None}


def selection_key(calls, options) -> str:
    """Which selection a step record belongs to: the selected tests (function and parameters) and the options
    that change what is computed (each family's by its set values)."""
    tests = sorted(f"{c.test}{sorted((k, str(v)) for k, v in c.params.items())}" for c in calls)
    values = _set_values(options, _NOT_KEYED)
    values["families"] = sorted((k, sorted(_set_values(v).items())) for k, v in dict(options.families).items())
    return content_key(tests=tests, options=values)


def _steps_key(device: str, key: str) -> str:
    return content_key(device=device, steps=key)


def _steps_path(cache: Cache, device: str, key: str):
    return cache.path(STEPS, _steps_key(device, key), ".json")


def store_steps(cache: Cache, device: str, key: str, steps: list[dict[str, Any]]):
    """Keep the computing steps of a run of selection ``key`` (:func:`selection_key`) on ``device``; a run
    that computed nothing (a warm cache) keeps the last record that did. Returns the path or ``None``."""
    if not any(step["items"] for step in steps):
        return None
    path = _steps_path(cache, device, key)
    cache.write(path, json.dumps({"device": device, "steps": steps}, sort_keys=True).encode("utf-8"), checksum=True)
    return path


def lookup_steps(cache: Cache, device: str, key: str) -> list[dict[str, Any]] | None:
    """The steps :func:`store_steps` kept for selection ``key`` on ``device``, else the package's reference record
    of them (``None`` without either)."""
    return _steps_record(cache, device, key)[0]


def _steps_record(cache: Cache, device: str, key: str) -> tuple[list[dict[str, Any]] | None, bool]:
    """:func:`lookup_steps`'s steps and whether they are the package's reference record."""

    def decode(data: bytes) -> list:
        try:
            return list(json.loads(data)["steps"])
        except (ValueError, TypeError, KeyError) as exc:
            raise CorruptEntry(f"not a step record: {exc}") from exc

    found = cache.read(_steps_path(cache, device, key), decode, checksum=True)
    reference = _reference_entry(STEPS, _steps_key(device, key)) if found is None else None
    return (list(reference["steps"]), True) if reference else (found, False)


def steps_estimate(cache: Cache, device: str, key: str) -> tuple[float | None, str]:
    """Seconds the computing steps of selection ``key`` take (segmentation, features, captions: every step
    but generation), at each step's stored rate and its item count in the last run that computed it, and
    the header's words; ``(None, why)`` without a record.

    Example:
        >>> import tempfile
        >>> cache = Cache(tempfile.mkdtemp())
        >>> _ = store_rate(cache, Rate(2.0, 10, "cpu", "ns", step_settings("masks"), "run"), STEPS)
        >>> _ = store_steps(cache, "cpu", "k", [{"desc": "masks", "kind": "masks", "namespace": "ns", "items": 60,
        ...                                     "seconds": 130.0}])
        >>> steps_estimate(cache, "cpu", "k")
        (120.0, 'masks 2 min (60 at 2 s/item)')
    """
    steps, reference = _steps_record(cache, device, key)
    if not steps:
        return None, f"no run of this selection on {device} has stored its steps yet"
    total, said = 0.0, []
    for step in steps:
        if not step["items"]:
            continue
        rate = lookup_rate(cache, device, step["namespace"], step_settings(step["kind"]), STEPS)
        per = rate.seconds_per_image if rate is not None else step["seconds"] / step["items"]
        total += per * step["items"]
        said.append(f"{step['desc']} {duration(per)}" if step["kind"] == "rest" else
                    f"{step['desc']} {duration(per * step['items'])} ({step['items']} at {per:.3g} s/item)")
    head = f"measured on {reference_machine()}, not this machine yet: " if reference else ""
    return total, head + "; ".join(said)
