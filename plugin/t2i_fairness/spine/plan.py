"""What a selection of gates will ask the generator for, as data, and the canonical batches that make it.

A study asks for images with ``bench.images(prompts, n)``: ``n`` images of each prompt, made in
the canonical batches of :class:`~t2i_fairness.spine.generation.ImageFactory` (indices
``[b * batch_size, (b + 1) * batch_size)`` of one prompt, cut at ``n``). A plan lists those calls
before any is made:

* :class:`ImageRequest`: one prompt and its ``n`` (indices ``0 .. n-1``);
* :class:`Need`: one slice of a family's study that a gate reads (``study.<method>(*args)``), with
  the image requests the study makes for it, computed by the study's own code (each family's
  ``needs`` in its :class:`~t2i_fairness.families.base.Family` record);
* :func:`batch_jobs`: the batches that a run of the requests, in order, would generate on the
  current cache, each with the images it writes, as the pytest path would make them. A batch is
  always generated whole (batched kernels round pixels differently with batch composition), and a
  batch whose images are all present is not generated: the same rules as ``ImageFactory.images``.

Jobs are independent (each writes images no other job writes), so any engine can run them in any
order or in parallel (:func:`run_job`), and the bytes are those of the pytest path.

Nothing here imports pytest or a family.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from t2i_fairness.spine.options import T2IOptions

__all__ = ["BatchJob", "GateCall", "ImageRequest", "Need", "batch_jobs", "role_options", "run_job", "unique_requests"]

ROLES = ("baseline", "candidate")


@dataclass(frozen=True)
class ImageRequest:
    """``n`` images of ``prompt`` (image indices ``0 .. n-1``), as a study asks ``bench.images([prompt], n)``.

    Example:
        >>> ImageRequest("bag in Africa", 6).indices
        range(0, 6)
    """

    prompt: str
    n: int

    def __post_init__(self) -> None:
        if not isinstance(self.prompt, str) or not self.prompt:
            raise ValueError(f"ImageRequest: prompt must be a non-empty string, got {self.prompt!r}")
        if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 1:
            raise ValueError(f"ImageRequest {self.prompt!r}: n must be an integer >= 1, got {self.n!r}")

    @property
    def indices(self) -> range:
        return range(self.n)


def requests_of(prompts: Sequence[str], n: int) -> tuple[ImageRequest, ...]:
    """The requests of one ``bench.images(prompts, n)`` call (repeated prompts once, in order).

    Example:
        >>> [(r.prompt, r.n) for r in requests_of(["a", "b", "a"], 2)]
        [('a', 2), ('b', 2)]
    """
    return tuple(ImageRequest(p, n) for p in dict.fromkeys(prompts))


def requests_of_calls(calls: Iterable[tuple[Sequence[str], int]]) -> tuple[ImageRequest, ...]:
    """The requests of several ``bench.images(texts, n)`` calls, given as ``(texts, n)`` pairs.

    Example:
        >>> [(r.prompt, r.n) for r in requests_of_calls([(["a", "b"], 2), (["c"], 1)])]
        [('a', 2), ('b', 2), ('c', 1)]
    """
    return tuple(r for texts, n in calls for r in requests_of(list(texts), n))


@dataclass(frozen=True)
class GateCall:
    """A selected test as a plan sees it: its function name and pytest parameters (``callspec.params``).

    Example:
        >>> call = GateCall("test_region_coverage", {"reference": "synthetic", "template": "object", "region": "africa"})
        >>> call.get("region"), call.get("object"), call.role
        ('africa', None, 'candidate')
    """

    test: str
    params: Mapping[str, Any] = field(default_factory=dict)
    nodeid: str = ""

    def get(self, name: str, default: Any = None) -> Any:
        return self.params.get(name, default)

    @property
    def role(self) -> str:
        """``baseline`` or ``candidate`` (the ``t2i`` parameter under ``--t2i-baseline-model``)."""
        role = self.params.get("t2i", "candidate")
        return role if role in ROLES else "candidate"


@dataclass(frozen=True)
class Need:
    """A slice of a study that a gate reads: ``study.<method>(*args)`` and the images it asks for.

    Attributes:
        method: the study's method the gate calls (``region_score``, ``scores``, ...).
        args: its arguments (plain values, so a need can be sent to another process).
        images: the image requests the study makes for it, in the order it makes them.
        first: computed before the other needs by ``generate --stage features`` (a reference set's
            features, shared by many slices).
        widened: why ``images`` is wider than the gate's own slice (set-scope de-duplication reads the
            whole template), in words; empty when it is not.
        narrow: the gate's own slice when ``widened``: what a plan without the widening asks for.
    """

    method: str
    args: tuple = ()
    images: tuple[ImageRequest, ...] = ()
    first: bool = False
    widened: str = ""
    narrow: tuple[ImageRequest, ...] = ()

    @property
    def key(self) -> tuple:
        return (self.method, self.args)

    def compute(self, study) -> Any:
        """Run the slice on ``study`` (what ``generate --stage features`` does to warm the cache)."""
        return getattr(study, self.method)(*self.args)


@dataclass(frozen=True)
class BatchJob:
    """One canonical batch to generate: a prompt's ``indices`` (the whole batch) and the ones it writes."""

    prompt: str
    indices: tuple[int, ...]
    write: tuple[int, ...]
    role: str = "candidate"

    def to_dict(self) -> dict:
        return {"prompt": self.prompt, "indices": list(self.indices), "write": list(self.write), "role": self.role}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "BatchJob":
        return cls(str(d["prompt"]), tuple(int(i) for i in d["indices"]), tuple(int(i) for i in d["write"]),
                   str(d.get("role", "candidate")))


def unique_requests(requests: Iterable[ImageRequest]) -> list[ImageRequest]:
    """Requests in first-asked order, each (prompt, n) once (asking again is a no-op for the factory).

    Example:
        >>> [(r.prompt, r.n) for r in unique_requests([ImageRequest("a", 2), ImageRequest("a", 2), ImageRequest("a", 4)])]
        [('a', 2), ('a', 4)]
    """
    return list(dict.fromkeys(requests))


def batch_jobs(requests: Iterable[ImageRequest], factory, role: str = "candidate", present=None) -> list[BatchJob]:
    """The batches a run of ``requests`` (in order) generates on the factory's cache, as the pytest path would.

    Args:
        requests: image requests in the order the studies make them.
        factory: the :class:`~t2i_fairness.spine.generation.ImageFactory` (batch size, seeds, cache).
        role: carried into the jobs (``baseline`` / ``candidate``).
        present: ``present(ref) -> bool`` whether an image is already cached and sound (default:
            fetched from the shared store if needed and decoded, as the factory checks).

    Example:
        >>> from types import SimpleNamespace
        >>> factory = SimpleNamespace(batch_size=4, ref=lambda p, i: (p, i))
        >>> jobs = batch_jobs([ImageRequest("a", 6), ImageRequest("a", 8)], factory, present=lambda ref: False)
        >>> [(j.indices, j.write) for j in jobs]
        [((0, 1, 2, 3), (0, 1, 2, 3)), ((4, 5), (4, 5)), ((4, 5, 6, 7), (6, 7))]
    """
    if present is None:
        present = _sound(factory)
    have: dict[str, dict[int, bool]] = {}
    jobs = []
    for req in requests:
        known = have.setdefault(req.prompt, {})
        for start in range(0, req.n, factory.batch_size):
            batch = tuple(range(start, min(start + factory.batch_size, req.n)))
            for i in batch:
                if i not in known:
                    known[i] = bool(present(factory.ref(req.prompt, i)))
            missing = tuple(i for i in batch if not known[i])
            if missing:
                jobs.append(BatchJob(req.prompt, batch, missing, role))
                for i in missing:
                    known[i] = True
    return jobs


def _sound(factory):
    from t2i_fairness.spine.generation import _image_is_sound

    def present(ref) -> bool:
        return bool(factory.cache.fetch(ref.path)) and _image_is_sound(ref.path) is True

    return present


def run_job(factory, job: BatchJob, wait: bool = True) -> int | None:
    """Generate one job's batch and write its images (those still missing); returns how many were written,
    or ``None`` when ``wait`` is false and another process holds the batch's lock.

    Raises:
        ModelLoadError: the generator cannot be loaded; anything the generator raises.
    """
    refs = [factory.ref(job.prompt, i) for i in job.indices]
    only = [r for r in refs if r.index in set(job.write)]
    return factory.make_batch(refs, only, wait=wait)


def role_options(options: T2IOptions, role: str) -> T2IOptions:
    """The options of a role under ``--t2i-baseline-model``: the baseline's model and seed, or the run's.

    Example:
        >>> o = T2IOptions(model="tiny", seed=3, baseline_model="org/sd", baseline_seed=None)
        >>> role_options(o, "baseline").model, role_options(o, "baseline").seed, role_options(o, "candidate").model
        ('org/sd', 3, 'tiny')
    """
    if role != "baseline":
        return options
    seed = options.seed if options.baseline_seed is None else options.baseline_seed
    return dataclasses.replace(options, model=options.baseline_model, model_revision=None, seed=seed)
