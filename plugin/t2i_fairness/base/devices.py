"""The run's device and precision, decided once: a frozen :class:`RunContext`.

:func:`decide_device` turns ``--t2i-device`` (``auto``, ``cpu``, ``cuda``, ``cuda:N``, ``mps``)
into a device; :meth:`RunContext.decide` is its one caller. The context is passed explicitly to
each workbench, generator and scorer; each model resolves the precision request for its kind.
:func:`pin_worker` gives each pytest-xdist worker one accelerator before CUDA initialises.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import MutableMapping


def accelerator_count() -> int:
    """CUDA devices this process may use (respects a CUDA_VISIBLE_DEVICES the caller set)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip() and d.strip() != "-1"])
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def cuda_count() -> int:
    """CUDA devices torch sees in this process (0 without torch or without CUDA)."""
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def decide_device(requested: str = "auto", *, count: int | None = None) -> str:
    """The device a ``--t2i-device`` request means on this machine (or a cluster of ``count`` GPUs).

    ``auto`` is ``cuda`` when there is one, else ``cpu``; other requests are kept as given.

    Raises:
        OptionError: ``cuda``/``cuda:N`` where there is no such device (naming ``--t2i-device``).

    Example:
        >>> decide_device("auto", count=0), decide_device("auto", count=2), decide_device("cuda:1", count=2)
        ('cpu', 'cuda', 'cuda:1')
    """
    from t2i_fairness.errors import OptionError

    if requested == "auto":
        return "cuda" if (cuda_count() if count is None else count) > 0 else "cpu"
    if requested.startswith("cuda"):
        have = cuda_count() if count is None else count
        index = int(requested.split(":", 1)[1]) if ":" in requested else 0
        if index >= have:
            what = f"{have} CUDA device(s) (cuda:0..cuda:{have - 1})" if have else "no CUDA device"
            raise OptionError("--t2i-device", f"{requested!r}: this machine has {what}; use cpu or auto")
    return requested


@dataclass(frozen=True)
class RunContext:
    """Where and at what precision a run's models run, decided once and passed explicitly.

    ``device`` is never ``auto``; ``precision`` is the ``--t2i-precision`` request, which each model
    resolves for its kind and this device.

    Example:
        >>> RunContext.decide("auto", "bfloat16", count=0)
        RunContext(device='cpu', precision='bfloat16')
    """

    device: str
    precision: str = "auto"

    @classmethod
    def decide(cls, device: str = "auto", precision: str = "auto", *, count: int | None = None) -> "RunContext":
        """The context of a run that asks for ``device`` and ``precision`` (``count``: CUDA devices to
        decide for, default this process's).

        Raises:
            OptionError: ``cuda``/``cuda:N`` where there is no such device.
        """
        return cls(decide_device(device, count=count), precision)


def pins_workers(requested: str) -> bool:
    """Whether xdist workers get one accelerator each (``auto`` and ``cuda``: the request leaves the GPU to the suite)."""
    return requested in ("auto", "cuda")


def pin_worker(worker_id: str, env: MutableMapping[str, str] = os.environ, count: int | None = None) -> str | None:
    """Restrict worker ``gwN`` to one device, the N-th of the caller's CUDA_VISIBLE_DEVICES (round
    robin); returns the device id pinned, or None on a machine without accelerators.

    Example:
        >>> pin_worker("gw0", {"CUDA_VISIBLE_DEVICES": "2,5"}), pin_worker("gw3", {"CUDA_VISIBLE_DEVICES": "2,5"})
        ('2', '5')
    """
    index = int(worker_id.lstrip("gw") or 0)
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        devices = [d.strip() for d in visible.split(",") if d.strip() and d.strip() != "-1"]
    else:
        n = accelerator_count() if count is None else count
        devices = [str(i) for i in range(n)]
    if not devices:
        return None
    env["CUDA_VISIBLE_DEVICES"] = devices[index % len(devices)]
    return env["CUDA_VISIBLE_DEVICES"]
