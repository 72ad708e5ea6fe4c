"""The small protocols every model adapter implements; each has a ``fingerprint`` naming its
architecture, weights and preprocessing, which every cache key includes.
"""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np
from PIL import Image

PROFILES = ("tiny", "paper", "paper-random")
# paper-random: each paper scorer's architecture, input size, preprocessing and precision with seeded
# random weights, built offline (BLIP-2 and SAM's image encoder with fewer layers, see their configs).


@runtime_checkable
class Generator(Protocol):
    """A text-to-image model: the same (prompt, seed) must give the same image."""

    fingerprint: str

    def generate(self, prompts: Sequence[str], seeds: Sequence[int]) -> list[Image.Image]: ...


@runtime_checkable
class ImageEncoder(Protocol):
    fingerprint: str

    def encode_images(self, images: Sequence[Image.Image]) -> np.ndarray:
        """Float32 array (n_images, dim)."""
        ...


@runtime_checkable
class TextEncoder(Protocol):
    fingerprint: str

    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        """Float32 array (n_texts, dim)."""
        ...


@runtime_checkable
class Segmenter(Protocol):
    fingerprint: str

    def segment(self, image: Image.Image, object_name: str) -> np.ndarray:
        """Boolean mask (height, width) of the named object; all False when it is not found."""
        ...


@runtime_checkable
class Captioner(Protocol):
    fingerprint: str

    def caption(self, images: Sequence[Image.Image]) -> list[str]: ...


@runtime_checkable
class MaskedLM(Protocol):
    fingerprint: str

    def replacements(self, words: Sequence[str], index: int, m: int) -> list[str]:
        """Top-m whole-word candidates for ``words[index]``, excluding the original word."""
        ...


def check_profile(profile: str) -> str:
    if profile not in PROFILES:
        raise ValueError(f"unknown scorer profile {profile!r}; choose from {list(PROFILES)}")
    return profile
