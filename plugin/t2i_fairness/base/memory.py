"""What a model needs, what the machine has free, and the one-line refusal when it does not fit.

A run loads a model only when a gate needs it and checks first that it fits: :class:`MemoryNeed`
(weights counted on torch's ``meta`` device, activations from the config's ``_memory`` note, a
fixed overhead), :func:`free_memory` (available RAM, ``ulimit -v``, cgroup limits, CUDA free
memory) and :func:`check_fits`, which raises :class:`~t2i_fairness.errors.NotEnoughMemoryError`
saying what to change. :func:`peak_rss`, :func:`current_rss` and :func:`give_back` serve the
summary. docs/memory.md explains the figures. torch is imported only for CUDA.
"""

from __future__ import annotations

import gc
import os
import resource
import sys
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["GiB", "OVERHEAD", "Free", "MemoryNeed", "check_fits", "current_rss", "fmt", "free_memory", "give_back",
           "peak_rss", "refusal"]

GiB = 1024 ** 3
# What loading a model adds beyond its tensors: its library's import, configs, Python objects and allocator
# slack (docs/memory.md).
OVERHEAD = int(0.3 * GiB)
BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


def fmt(n: float) -> str:
    """Bytes in GB, one decimal (two below 1 GB): ``4.3 GB``, ``0.25 GB``."""
    gb = n / GiB
    return f"{gb:.1f} GB" if gb >= 1 else f"{gb:.2f} GB"


@dataclass(frozen=True)
class MemoryNeed:
    """What a model needs to be built and run, counted before it is built.

    Attributes:
        model: how messages name it (``generator sd15-random``).
        parameters: parameters and floating buffers (elements).
        activations: bytes of activations at ``batch`` (0 when its config has no figure).
        built_in_float32: weights are made in float32 and then cast (random weights).
        per_item: activation bytes per batch item (what a smaller batch saves).
        flags: the options that change this model's need.
    """

    model: str
    parameters: int
    precision: str = "float32"
    activations: int = 0
    batch: int = 1
    built_in_float32: bool = False
    per_item: int = 0
    detail: str = ""
    flags: tuple[str, ...] = ("--t2i-precision", "--t2i-device")

    @property
    def weights(self) -> int:
        return self.parameters * BYTES.get(self.precision, 4)

    @property
    def total(self) -> int:
        """Bytes: the larger of building it and running it, plus the fixed overhead.

        Example:
            >>> need = MemoryNeed("m", parameters=10**9, precision="bfloat16", activations=GiB, built_in_float32=True)
            >>> fmt(need.weights), fmt(need.total)  # built at 4 bytes a parameter: 3.7 GB + 0.3 GB
            ('1.9 GB', '4.0 GB')
        """
        build = self.parameters * 4 if self.built_in_float32 else self.weights
        return max(build, self.weights + self.activations) + OVERHEAD

    def at(self, *, precision: str | None = None, batch: int | None = None) -> "MemoryNeed":
        """The same model at another precision or batch size (activations scale with the batch and the
        bytes of the precision)."""
        import dataclasses

        precision = precision or self.precision
        batch = self.batch if batch is None else batch
        fixed = max(self.activations - self.per_item * self.batch, 0)
        scale = BYTES.get(precision, 4) / BYTES.get(self.precision, 4)
        return dataclasses.replace(self, precision=precision, batch=batch, per_item=int(self.per_item * scale),
                                   activations=int((fixed + self.per_item * batch) * scale))

    def describe(self) -> str:
        """``4.3 GB (1,067 M parameters at float32 = 4.0 GB, activations 0.2 GB at batch 2, ...)``."""
        parts = [f"{self.parameters / 1e6:,.0f} M parameters at {self.precision} = {fmt(self.weights)}"]
        if self.built_in_float32 and self.precision != "float32":
            parts.append(f"built in float32: {fmt(self.parameters * 4)}")
        parts.append(f"activations {fmt(self.activations)} at batch {self.batch}" if self.activations
                     else "activations not measured")
        parts.append(f"{fmt(OVERHEAD)} overhead")
        return f"{fmt(self.total)} ({', '.join(parts)}{'; ' + self.detail if self.detail else ''})"


@dataclass(frozen=True)
class Free:
    """One bound on what this process may still take: ``bytes`` free, and ``what`` bound it is."""

    bytes: int
    what: str


def _status() -> dict[str, int]:
    """``/proc/self/status`` sizes in bytes (VmRSS, VmHWM, VmSize); empty where there is none."""
    out = {}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.startswith("Vm") and value.strip().endswith("kB"):
                out[key] = int(value.split()[0]) * 1024
    except OSError:
        pass
    return out


def current_rss() -> int:
    """This process's resident memory now, in bytes."""
    return _status().get("VmRSS") or peak_rss()


def peak_rss() -> int:
    """The most resident memory this process has held, in bytes."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def _meminfo() -> dict[str, int]:
    try:
        return {k: int(v.split()[0]) * 1024 for k, _, v in
                (line.partition(":") for line in Path("/proc/meminfo").read_text().splitlines()) if v.strip().endswith("kB")}
    except OSError:
        return {}


def _cgroup_free() -> Free | None:
    """What the process's memory cgroup (v2, or v1) still allows, when it sets a limit."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2
            folder = Path("/sys/fs/cgroup") / path.lstrip("/")
            limit_file, used_file = folder / "memory.max", folder / "memory.current"
        elif "memory" in controllers.split(","):  # v1
            folder = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
            limit_file, used_file = folder / "memory.limit_in_bytes", folder / "memory.usage_in_bytes"
        else:
            continue
        try:
            text = limit_file.read_text().strip()
            if text == "max" or int(text) >= 1 << 60:
                continue
            return Free(int(text) - int(used_file.read_text().strip()), f"the cgroup's memory limit of {fmt(int(text))}")
        except (OSError, ValueError):
            continue
    return None


def free_memory(device: str = "cpu") -> list[Free]:
    """Every bound on the memory this process may still take, smallest first (on CUDA the device's).

    Example:
        >>> bounds = free_memory()
        >>> all(b.bytes >= 0 or "limit" in b.what for b in bounds), bounds == sorted(bounds, key=lambda b: b.bytes)
        (True, True)
    """
    bounds: list[Free] = []
    available = _meminfo().get("MemAvailable")
    if available is not None:
        bounds.append(Free(available, "RAM available"))
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        size = _status().get("VmSize", 0)
        bounds.append(Free(soft - size, f"the address-space limit of {fmt(soft)} (ulimit -v) less this process's "
                                        f"{fmt(size)}"))
    cgroup = _cgroup_free()
    if cgroup is not None:
        bounds.append(cgroup)
    bounds.sort(key=lambda b: b.bytes)
    if str(device).startswith("cuda"):
        import torch

        free, total = torch.cuda.mem_get_info(torch.device(device))
        bounds.insert(0, Free(int(free), f"free on {device} ({fmt(total)} in all)"))
    return bounds


def refusal(need: MemoryNeed, free: Free, device: str, fits=None) -> str:
    """The one line that stops a run before loading ``need``: the model, its need, what is free and what to change.

    Args:
        free: the bound it misses.
        fits: ``fits(need) -> bool`` for another precision or batch size (default: under ``free``).

    Example:
        >>> need = MemoryNeed("generator sd15-random", parameters=1_067_000_000, activations=int(0.2 * GiB), batch=8,
        ...                   per_item=int(0.025 * GiB), flags=("--t2i-batch-size", "--t2i-precision", "--t2i-device"))
        >>> print(refusal(need, Free(3 * GiB, "RAM available"), "cpu"))  # doctest: +NORMALIZE_WHITESPACE
        not enough memory to load the generator sd15-random on cpu: it needs 4.5 GB (1,067 M parameters at float32
        = 4.0 GB, activations 0.20 GB at batch 8, 0.30 GB overhead) and 3.0 GB is free (RAM available). To fit:
        --t2i-precision bfloat16 (needs 2.4 GB), --t2i-device cuda (on a machine with a GPU), or a narrower -k
        (fewer families at once), or free memory on this machine
    """
    fits = fits or (lambda n: n.total <= free.bytes)
    ways = []
    if "--t2i-batch-size" in need.flags and need.batch > 1 and need.per_item:
        smaller = next((b for b in range(need.batch - 1, 0, -1) if fits(need.at(batch=b))), None)
        if smaller:
            ways.append(f"--t2i-batch-size {smaller} (needs {fmt(need.at(batch=smaller).total)})")
    if "--t2i-precision" in need.flags and need.precision == "float32" and fits(need.at(precision="bfloat16")):
        ways.append(f"--t2i-precision bfloat16 (needs {fmt(need.at(precision='bfloat16').total)})")
    if "--t2i-device" in need.flags and not str(device).startswith("cuda"):
        ways.append("--t2i-device cuda (on a machine with a GPU)")
    if "--t2i-fixed-n" in need.flags:  # a scorer loaded while a sequential run holds the generator
        ways.append("--t2i-fixed-n (every image made first and the generator released before the scorers load)")
    ways.append("or a narrower -k (fewer families at once), or free memory on this machine")
    return (f"not enough memory to load the {need.model} on {device}: it needs {need.describe()} and {fmt(free.bytes)} "
            f"is free ({free.what}). To fit: {', '.join(ways)}")


def check_fits(need: MemoryNeed | None, device: str = "cpu", bounds: list[Free] | None = None) -> None:
    """Raise before loading a model that cannot fit (``need`` None: nothing is checked).

    Args:
        device: on CUDA the device's free memory bounds the weights and activations, the host's the
            weights while they load.
        bounds: what is free (default: :func:`free_memory`).

    Raises:
        NotEnoughMemoryError: it does not fit (:func:`refusal`'s one line).
    """
    if need is None:
        return
    from t2i_fairness.errors import NotEnoughMemoryError

    bounds = free_memory(device) if bounds is None else bounds
    for bound in bounds:
        on_device = str(device).startswith("cuda") and bound.what.startswith(f"free on {device}")
        wanted = (need.weights + need.activations) if on_device else (
            need.total if not str(device).startswith("cuda") else max(need.total - need.activations, 0))
        if wanted > bound.bytes:
            raise NotEnoughMemoryError(refusal(need, bound, device, fits=lambda n: n.total <= bound.bytes))


def give_back() -> None:
    """Return the memory of released models to the system: collect cycles, trim glibc's heap, empty CUDA's cache."""
    gc.collect()
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):
            pass
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


@dataclass
class ModelUse:
    """What a process loaded and released, for the run's summary."""

    events: list[str] = field(default_factory=list)  # "+model" loaded, "-model" released, in order
    needs: dict[str, int] = field(default_factory=dict)  # model -> its estimated need (bytes)
    notes: list[str] = field(default_factory=list)

    def load(self, model: str) -> None:
        self.events.append(f"+{model}")

    def release(self, model: str) -> None:
        self.events.append(f"-{model}")

    def payload(self) -> dict:
        return {"events": list(self.events), "needs": dict(self.needs), "notes": list(self.notes),
                "peak_rss": peak_rss(), "pid": os.getpid()}
