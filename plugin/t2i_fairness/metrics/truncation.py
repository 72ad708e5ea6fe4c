"""How much of each prompt a generator's text encoder never sees: token counts in, truncation figures out.

diffusers truncates at ``tokenizer.model_max_length`` with only a logger warning. With ``n``
tokens (specials included): truncated when ``n > limit``, ``n - limit`` lost, kept fraction
``(limit - specials) / (n - specials)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

__all__ = ["Truncation", "truncation_report", "worst_truncation"]


@dataclass(frozen=True)
class Truncation:
    """Truncation of a set of prompts by one text encoder; ``lost_by_prompt``: tokens lost per truncated prompt."""

    encoder: str
    limit: int
    prompts: int
    truncated: int = 0
    max_lost: int = 0
    min_kept_fraction: float = 1.0
    lost_by_prompt: dict[str, int] = field(default_factory=dict)
    counted: bool = True

    @classmethod
    def not_counted(cls, why: str, prompts: int = 0) -> "Truncation":
        """A placeholder for a generator without a tokenizer (``images:``, a python factory, ...)."""
        return cls(why, 0, prompts, counted=False)

    def cell(self) -> str:
        """``3/40`` (truncated of prompts), or ``not counted``."""
        return f"{self.truncated}/{self.prompts}" if self.counted else "not counted"

    def details(self) -> dict[str, Any]:
        """The figures a gate's details carry."""
        if not self.counted:
            return {"truncation": "not counted", "tokenizer": self.encoder}
        return {"truncated_prompts": self.truncated, "prompts": self.prompts, "max_lost_tokens": self.max_lost,
                "min_kept_fraction": self.min_kept_fraction, "tokenizer": self.encoder}

    def message(self, what: str) -> str:
        """The warning for ``what`` (``tel_Telu``, ``CIS K=8``) when prompts are truncated."""
        return (f"{what}: {self.truncated} of {self.prompts} prompts exceed the generator's {self.limit}-token context "
                f"({self.encoder}); up to {self.max_lost} tokens ({1 - self.min_kept_fraction:.0%} of a prompt) "
                "dropped: these images come from truncated prompts")


def truncation_report(counts: Sequence[int], limit: int, texts: Sequence[str] | None = None, *,
                      specials: int = 2, encoder: str = "tokenizer") -> Truncation:
    """Truncation figures of prompts whose full token counts are ``counts``.

    Args:
        counts: tokens per prompt, special tokens included (``len(tokenizer(text).input_ids)``).
        specials: special tokens each count includes (2 for CLIP's BOS and EOS).

    Example:
        >>> t = truncation_report([77, 78, 182, 10], 77)
        >>> t.truncated, t.max_lost, round(t.min_kept_fraction, 3), t.lost_by_prompt
        (2, 105, 0.417, {'1': 1, '2': 105})
    """
    counts = [int(c) for c in counts]
    limit = int(limit)
    if limit <= specials:
        raise ValueError(f"limit must exceed the {specials} special tokens, got {limit}")
    if texts is not None and len(texts) != len(counts):
        raise ValueError(f"texts has {len(texts)} prompts for {len(counts)} counts")
    bad = [c for c in counts if c < specials]
    if bad:
        raise ValueError(f"a token count includes the {specials} special tokens, so it is >= {specials}; got {bad[:5]}")
    names = [str(i) for i in range(len(counts))] if texts is None else [str(t) for t in texts]
    lost = {name: c - limit for name, c in zip(names, counts) if c > limit}
    kept = [min(1.0, (limit - specials) / (c - specials)) if c > specials else 1.0 for c in counts]
    return Truncation(encoder, limit, len(counts), len(lost), max(lost.values(), default=0),
                      min(kept, default=1.0), lost)


def worst_truncation(reports: Mapping[str, Truncation] | Sequence[Truncation]) -> Truncation:
    """One figure from several encoders of one generator (SDXL has two): the encoder that truncates the
    most prompts, then drops the most tokens (a ValueError when there is none).
    """
    items = list(reports.values()) if isinstance(reports, Mapping) else list(reports)
    if not items:
        raise ValueError("worst_truncation needs at least one report")
    counted = [t for t in items if t.counted]
    if not counted:
        return items[0]
    return max(counted, key=lambda t: (t.truncated, t.max_lost))
