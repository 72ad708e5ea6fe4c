"""A fast stand-in generator for the plugin's tests: ``--t2i-model python:fakegen:make``.

Each image is a flat 8x8 colour computed from the seed alone, so runs take milliseconds and the
gated values are deterministic. ``CALLS`` counts generate() calls and images for tests that
check what was (re)generated; ``FAKEGEN_BATCH`` sets the batch size the ImageFactory uses.
"""

from __future__ import annotations

import os

from PIL import Image

CALLS = {"calls": 0, "images": 0}


class FakeGenerator:
    def __init__(self, batch_size: int = 4):
        self.fingerprint = "fakegen:v1"
        self.batch_size = batch_size

    def generate(self, prompts, seeds):
        CALLS["calls"] += 1
        CALLS["images"] += len(prompts)
        return [Image.new("RGB", (8, 8), (s % 256, (s >> 8) % 256, (s >> 16) % 256)) for s in seeds]


def make() -> FakeGenerator:
    return FakeGenerator(int(os.environ.get("FAKEGEN_BATCH", "4")))
