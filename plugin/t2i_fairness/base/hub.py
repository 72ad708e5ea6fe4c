"""Fail fast (not after ~46 s of retries) when model weights are not on disk and the hub cannot be reached."""

from __future__ import annotations

import os
import socket
from urllib.parse import urlparse


def hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() not in ("", "0", "false", "no")


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether a TCP connection to the Hugging Face endpoint opens within ``timeout`` seconds."""
    if hub_offline():
        return False
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    url = urlparse(endpoint)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname, port), timeout=timeout):
            return True
    except OSError:
        return False


def how_to_fix(model: str) -> str:
    return (
        f"Without network access, download it once on a connected machine (`huggingface-cli download {model}`), "
        "copy the cache and point HF_HOME at it, or pass a local folder instead of the hub id."
    )


class offline_unless_reachable:
    """Within the block, the hub client works offline (local cache only) unless the hub answers; both
    ``HF_HUB_OFFLINE`` and huggingface_hub's ``constants`` are set, then restored.
    """

    def __enter__(self):
        self._env = os.environ.get("HF_HUB_OFFLINE")
        self._const = None
        if hub_reachable():
            return self
        os.environ["HF_HUB_OFFLINE"] = "1"
        try:
            from huggingface_hub import constants

            self._const = constants.HF_HUB_OFFLINE
            constants.HF_HUB_OFFLINE = True
        except ImportError:
            pass
        return self

    def __exit__(self, *exc):
        if self._env is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = self._env
        if self._const is not None:
            from huggingface_hub import constants

            constants.HF_HUB_OFFLINE = self._const
        return False
