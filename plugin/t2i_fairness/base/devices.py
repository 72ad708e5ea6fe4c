"""One pytest-xdist worker per accelerator, each pinned to its device before CUDA initialises."""

from __future__ import annotations

import os
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


def pin_worker(worker_id: str, env: MutableMapping[str, str] = os.environ, count: int | None = None) -> str | None:
    """Restrict worker ``gwN`` to one device: the N-th of the caller's CUDA_VISIBLE_DEVICES (round robin).

    Returns the device id it pinned, or None on a machine without accelerators (CPU fallback).

    Example:
        >>> env = {"CUDA_VISIBLE_DEVICES": "2,5"}
        >>> pin_worker("gw0", env), pin_worker("gw3", {"CUDA_VISIBLE_DEVICES": "2,5"})
        ('2', '5')
        >>> env["CUDA_VISIBLE_DEVICES"]
        '2'
        >>> pin_worker("gw1", {}, count=0) is None
        True
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
