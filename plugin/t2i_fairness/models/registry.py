"""The scorer registry: every scorer model a study can ask the workbench for, by name.

A :class:`ScorerKind` names an adapter whose ``from_profile(profile, device, precision, **options)``
builds it from ``model_configs/<kind>-<profile>.json``; the workbench builds it with the run's
context after checking what it needs (:func:`t2i_fairness.models.memory.scorer_need`).

Example:
    >>> scorer_kind("vit").adapter
    't2i_fairness.models.vit:MaskedViTFeatures'
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

__all__ = ["SCORERS", "ScorerKind", "config_profile", "scorer_kind"]

#: The profile whose scorers read the procedural world's truth; kinds without such an adapter build ``tiny``.
PROCEDURAL = "procedural"


def config_profile(profile: str) -> str:
    """The configs' profile behind ``profile`` (``procedural`` builds the kinds it does not replace as ``tiny``)."""
    return "tiny" if profile == PROCEDURAL else profile


def _imported(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class ScorerKind:
    """A kind of scorer model: ``name`` is also its precision kind and its configs' stem; ``adapter``
    is ``module:Class``, imported on first use.
    """

    name: str
    adapter: str
    procedural: str | None = None  # ``module:function(profile, run, miss=...)``: the kind under ``--t2i-scorers procedural``

    def adapter_class(self) -> Any:
        return _imported(self.adapter)

    def build(self, profile: str, run: Any, miss: Any = None, **options: Any) -> Any:
        """The adapter of ``profile`` on the run's device and precision (a :class:`RunContext`); under the
        ``procedural`` profile, the kind's truth-reading adapter with its miss rates (``tiny`` for a kind without one)."""
        if profile == PROCEDURAL and self.procedural is not None:
            return _imported(self.procedural)(profile, run, miss=miss)
        return self.adapter_class().from_profile(config_profile(profile), run.device, run.precision, **options)


SCORERS: dict[str, ScorerKind] = {k.name: k for k in (
    ScorerKind("clip", "t2i_fairness.models.clip:ClipModel", "t2i_fairness.generators.procedural_scorer:procedural_scorer"),
    ScorerKind("inception", "t2i_fairness.models.inception:InceptionFeatures"),
    ScorerKind("vit", "t2i_fairness.models.vit:MaskedViTFeatures"),
    ScorerKind("segmenter", "t2i_fairness.models.segmenter:LangSAMSegmenter"),
    ScorerKind("captioner", "t2i_fairness.models.captioner:Blip2Captioner"),
    ScorerKind("masked_lm", "t2i_fairness.models.masked_lm:MaskedLMReplacer"),
    ScorerKind("sentence", "t2i_fairness.models.sentence:SentenceEncoder"),
)}


def scorer_kind(name: str) -> ScorerKind:
    """The registered kind ``name`` (a ValueError listing the registered ones otherwise)."""
    if name not in SCORERS:
        raise ValueError(f"unknown scorer {name!r}; registered: {', '.join(sorted(SCORERS))}")
    return SCORERS[name]
