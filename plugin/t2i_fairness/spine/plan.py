"""What a selection of gates will ask the generator for, as data, and the canonical batches that make it.

A study asks for ``n`` images of each prompt with ``bench.images(prompts, n)``; a plan lists those
calls before any is made: :class:`ImageRequest` (one prompt and its ``n``), :class:`Need` (one
slice of a study a gate reads, with the requests the study's own code makes for it) and
:func:`batch_jobs` (the batches a run would generate on the current cache, by the rules of
``ImageFactory.images``: a batch is generated whole, and not at all when every image is cached).
Jobs are computed per stretch of batches, never per image, and are independent, so any engine can
run them in any order (:func:`run_job`) and write the pytest path's bytes. No pytest, no family.
"""

from __future__ import annotations

import bisect
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Sequence

from t2i_fairness.spine.options import T2IOptions

__all__ = ["BatchJob", "GateCall", "ImageRequest", "Jobs", "Need", "batch_jobs", "cached_indices", "request_tops", "role_options",
           "run_job", "unique_requests"]

ROLES = ("baseline", "candidate")


@dataclass(frozen=True)
class ImageRequest:
    """``n`` images of ``prompt`` (image indices ``0 .. n-1``), as a study asks ``bench.images([prompt], n)``."""

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
    """The requests of several ``bench.images(texts, n)`` calls, given as ``(texts, n)`` pairs."""
    return tuple(r for texts, n in calls for r in requests_of(list(texts), n))


@dataclass(frozen=True)
class GateCall:
    """A selected test as a plan sees it: its function name and pytest parameters (``callspec.params``)."""

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
        args: the method's arguments (plain values, so a need can be sent to another process).
        images: the image requests the study makes for it, in order.
        first: computed before the other needs by ``generate --stage features`` (shared features).
        widened: why ``images`` is wider than the gate's own slice, in words ("" when it is not);
            ``narrow`` is then the gate's own slice.
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
    """Requests in first-asked order, each (prompt, n) once (asking again is a no-op for the factory)."""
    return list(dict.fromkeys(requests))


class Jobs(Sequence):
    """The batch jobs of a plan, in run order, stored per stretch of whole batches.

    A stretch is a prompt's consecutive all-missing canonical batches; a batch holding a cached image
    is its own :class:`BatchJob`. Iterating yields every batch's :class:`BatchJob` in run order.

    Example:
        >>> jobs = Jobs(); jobs.add_stretch("a", 0, 10, 4); jobs.add(BatchJob("a", (8, 9, 10, 11), (10, 11)))
        >>> len(jobs), jobs.images, [j.write for j in jobs][-2:], jobs[1].indices
        (4, 12, [(8, 9), (10, 11)], (4, 5, 6, 7))
    """

    def __init__(self, role: str = "candidate"):
        self.role = role
        self._items: list = []  # BatchJob, or (prompt, start, stop, size): batches [s, min(s + size, stop)) from start
        self._ends: list[int] = []  # cumulative batch count at the end of each item
        self.images = 0  # images the jobs write

    def add(self, job: BatchJob) -> None:
        self._items.append(job)
        self._ends.append(len(self) + 1)
        self.images += len(job.write)

    def add_stretch(self, prompt: str, start: int, stop: int, size: int) -> None:
        """The whole batches of ``prompt`` from ``start`` (a multiple of ``size``) up to ``stop`` (the last cut at ``stop``)."""
        if stop <= start:
            return
        self._items.append((prompt, start, stop, size))
        self._ends.append(len(self) + -(-(stop - start) // size))
        self.images += stop - start

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else 0

    def _expand(self, item) -> Iterator[BatchJob]:
        if isinstance(item, BatchJob):
            yield item
            return
        prompt, start, stop, size = item
        for s in range(start, stop, size):
            batch = tuple(range(s, min(s + size, stop)))
            yield BatchJob(prompt, batch, batch, self.role)

    def __iter__(self) -> Iterator[BatchJob]:
        for item in self._items:
            yield from self._expand(item)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"job {i} of {n}")
        k = bisect.bisect_right(self._ends, i)
        item, first = self._items[k], (self._ends[k - 1] if k else 0)
        if isinstance(item, BatchJob):
            return item
        prompt, start, stop, size = item
        s = start + (i - first) * size
        batch = tuple(range(s, min(s + size, stop)))
        return BatchJob(prompt, batch, batch, self.role)


def request_tops(requests: Iterable[ImageRequest]) -> dict[str, int]:
    """Per prompt, the most images any request asks for (the images asked for are indices ``0 .. top-1``)."""
    tops: dict[str, int] = {}
    for r in requests:
        tops[r.prompt] = max(tops.get(r.prompt, 0), r.n)
    return tops


def batch_jobs(requests: Iterable[ImageRequest], factory, role: str = "candidate", cached=None) -> Jobs:
    """The batches a run of ``requests`` (in order) generates on the factory's cache, as the pytest path would.

    Args:
        factory: the :class:`~t2i_fairness.spine.generation.ImageFactory` (its batch size and cache).
        role: carried into the jobs (``baseline`` / ``candidate``).
        cached: ``cached(prompt, n)`` -> the indices below ``n`` already cached and sound (default:
            :func:`cached_indices` of the factory).

    Example:
        >>> from types import SimpleNamespace
        >>> jobs = batch_jobs([ImageRequest("a", 6), ImageRequest("a", 8)], SimpleNamespace(batch_size=4), cached=lambda p, n: ())
        >>> [(j.indices, j.write) for j in jobs]
        [((0, 1, 2, 3), (0, 1, 2, 3)), ((4, 5), (4, 5)), ((4, 5, 6, 7), (6, 7))]
    """
    requests = list(requests)
    if cached is None:
        cached = cached_indices(factory)
    size = int(factory.batch_size)
    tops = request_tops(requests)
    have: dict[str, list[int]] = {}
    done: dict[str, int] = {}  # per prompt: indices 0 .. done-1 are there (cached, or written by a job before)
    jobs = Jobs(role)
    for req in requests:
        p, n = req.prompt, req.n
        if p not in have:
            have[p] = sorted(set(i for i in cached(p, tops[p]) if 0 <= i < tops[p]))
        known = done.get(p, 0)
        if n <= known:
            continue
        hits, s = have[p], (known // size) * size
        while s < n:
            e = min(s + size, n)
            lo = max(s, known)
            j = bisect.bisect_left(hits, lo)
            nxt = hits[j] if j < len(hits) else n
            if lo == s and nxt >= e:  # whole batches up to the one holding the next cached image
                stop = n if nxt >= n else (nxt // size) * size
                jobs.add_stretch(p, s, stop, size)
                s = stop
                continue
            gone = set(hits[j:bisect.bisect_left(hits, e)])
            missing = tuple(i for i in range(lo, e) if i not in gone)
            if missing:
                jobs.add(BatchJob(p, tuple(range(s, e)), missing, role))
            s += size
        done[p] = n
    return jobs


def cached_indices(factory):
    """``cached(prompt, n)``: the indices below ``n`` of the prompt's images in the factory's cache and sound.

    The image folder is listed once, so a cold cache computes no image key; keys are computed per
    image only while listed files remain unaccounted for (always, behind a shared store).
    """
    names = factory.cache.listed("images") if factory.cache.remote is None else None
    left = [len(names) if names is not None else -1]

    def cached(prompt: str, n: int) -> list[int]:
        if left[0] == 0:
            return []
        there = []
        for i, key in enumerate(factory.keys(prompt, n)):
            if names is not None:
                if key not in names:
                    continue
                left[0] -= 1
            there.append(i)
            if left[0] == 0:
                break
        out = []
        for start in range(0, len(there), 256):  # checked against the images' index a chunk at a time
            chunk = there[start:start + 256]
            refs = [factory.ref(prompt, i) for i in chunk]
            for i, r, ok in zip(chunk, refs, factory.states(refs)):
                if ok:
                    out.append(i)
                elif ok is False:  # there but corrupt: planned as missing, made again and counted in the summary
                    factory.cache.stats.corrupt.append(str(r.path))
        return out

    return cached


def run_job(factory, job: BatchJob, wait: bool = True) -> int | None:
    """Generate one job's batch and write its still-missing images; returns how many were written, or
    ``None`` when ``wait`` is false and another process holds the batch's lock.
    """
    refs = [factory.ref(job.prompt, i) for i in job.indices]
    only = [r for r in refs if r.index in set(job.write)]
    return factory.make_batch(refs, only, wait=wait)


def role_options(options: T2IOptions, role: str) -> T2IOptions:
    """The options of a role under ``--t2i-baseline-model``: the baseline's model and seed, or the run's."""
    if role != "baseline":
        return options
    seed = options.seed if options.baseline_seed is None else options.baseline_seed
    return dataclasses.replace(options, model=options.baseline_model, model_revision=None, seed=seed)
