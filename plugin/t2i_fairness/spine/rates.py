"""Measured generation rates, and what a selection will cost before it runs.

A generating run (and the generation benchmark) stores the seconds per image it measured in the
cache, keyed by device (``cpu``, ``cuda:<GPU name>``), model fingerprint and settings, the last
measurement winning. ``t2i-fairness plan`` multiplies (:func:`estimate_hours`); with no
measurement it says so instead of guessing.

Example:
    >>> import tempfile
    >>> from t2i_fairness.base.cache import Cache
    >>> cache, settings = Cache(tempfile.mkdtemp()), {"steps": 20, "height": 512, "width": 512, "batch_size": 8}
    >>> _ = store_rate(cache, Rate(0.172, 128, "cuda:NVIDIA H100", "sd15:fp16", settings, "bench"))
    >>> round(estimate_hours(30_000, lookup_rate(cache, "cuda:NVIDIA H100", "sd15:fp16", settings)), 2)
    1.43
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

from t2i_fairness.base.cache import Cache, CorruptEntry, content_key

__all__ = ["Rate", "RunClock", "device_label", "duration", "estimate_hours", "lookup_rate", "rate_key", "store_rate"]


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
        return (f"{self.seconds_per_image:.3g} s/image on {self.device} ({self.source}, {self.images} images, "
                f"{self.measured_at})")


def device_label(device: str) -> str:
    """Where a rate was measured: ``cpu``, ``mps``, or ``cuda:<GPU name>`` (GPUs differ by model)."""
    from t2i_fairness.base.identity import device_class, gpu_name

    kind = device_class(device)
    name = gpu_name(device) if kind == "cuda" else None
    return f"{kind}:{name}" if name else kind


def rate_key(device: str, model: str, settings: Mapping[str, Any]) -> str:
    """The cache key of a rate: device, model fingerprint and settings."""
    return content_key(device=device, model=model, settings=dict(settings))


def _path(cache: Cache, key: str):
    return cache.path("rates", key, ".json")


def store_rate(cache: Cache, rate: Rate):
    """Store a measured rate (replacing the last one for its device, model and settings); returns its path."""
    path = _path(cache, rate_key(rate.device, rate.model, rate.settings))
    cache.write(path, json.dumps(dataclasses.asdict(rate), sort_keys=True, default=str).encode("utf-8"), checksum=True)
    return path


def lookup_rate(cache: Cache, device: str, model: str, settings: Mapping[str, Any]) -> Rate | None:
    """The last rate measured for exactly this device, model and settings, or ``None`` (also for a
    damaged entry, which is reported and removed).
    """

    def decode(data: bytes) -> Rate:
        try:
            return Rate(**json.loads(data))
        except (ValueError, TypeError) as exc:
            raise CorruptEntry(f"not a rate: {exc}") from exc

    return cache.read(_path(cache, rate_key(device, model, settings)), decode, checksum=True)


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
