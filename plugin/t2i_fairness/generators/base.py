"""What every generator shares: generation settings and their part of the cache key."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class GenerationSettings:
    """Settings that change the pixels, all in the image cache key; ``None`` is the model's default,
    which generators resolve and name in their fingerprint.
    """

    steps: int | None = None
    guidance: float | None = None
    height: int | None = None
    width: int | None = None
    batch_size: int | None = None

    def resolved(self, defaults: dict) -> "GenerationSettings":
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return GenerationSettings(**{k: (defaults.get(k) if v is None else v) for k, v in values.items()})

    def key(self) -> dict:
        """The part of a cache key: everything but the batch size (batching never changes an image's identity)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "batch_size"}


from t2i_fairness.errors import ModelLoadError  # noqa: E402,F401  (re-exported for generator code)
