"""Which prompts the generator under test truncates, counted with the generator's own tokenizers."""

from __future__ import annotations

import warnings
from typing import Sequence

from t2i_fairness.errors import ModelLoadError, T2ITruncationWarning
from t2i_fairness.metrics.truncation import Truncation, worst_truncation

__all__ = ["counted_truncation", "prompt_truncation", "token_counter_for", "warn_truncation"]

_COUNTERS: dict[str, tuple[object | None, str]] = {}


def token_counter_for(source) -> tuple[object | None, str]:
    """``(counter, why)`` for a generator source: its :class:`~t2i_fairness.generators.diffusers_pipe.TokenCounter`
    (or ``None`` and the reason), made once per fingerprint and process.
    """
    key = str(source.fingerprint)
    if key not in _COUNTERS:
        _COUNTERS[key] = _make_counter(source)
    return _COUNTERS[key]


def _make_counter(source) -> tuple[object | None, str]:
    from t2i_fairness.generators.diffusers_pipe import RANDOM_MODELS, TokenCounter

    spec = str(source.spec)
    if getattr(source, "loaded", False) or spec.startswith(("python:", "images:", "procedural")):
        gen = source.get()
        counter = getattr(gen, "token_counter", None)
        if callable(counter) and counter() is not None:
            return counter(), ""
        return None, f"{spec}: the generator exposes no tokenizer (token_counter())"
    if spec == "tiny" or spec in RANDOM_MODELS:  # built offline with the offline CLIP tokenizer (build_tiny_pipeline)
        from t2i_fairness.models.clip_tokenizer import CONTEXT_LENGTH, offline_clip_tokenizer

        return TokenCounter({"tokenizer": (offline_clip_tokenizer(), CONTEXT_LENGTH)}), ""
    try:
        return TokenCounter.from_pretrained(spec), ""
    except ModelLoadError as exc:
        return None, str(exc)


def prompt_truncation(source, texts: Sequence[str]) -> Truncation:
    """How the generator's tokenizers truncate ``texts`` (the worst encoder), or why nothing was counted."""
    texts = list(texts)
    counter, why = token_counter_for(source)
    if counter is None:
        return Truncation.not_counted(why, len(texts))
    if not texts:
        name, limit = next(iter(counter.names().items()))
        return Truncation(limit, counter.limits[name], 0)
    return worst_truncation(counter.report(texts))


def warn_truncation(truncation: Truncation, what: str) -> None:
    """One :class:`~t2i_fairness.errors.T2ITruncationWarning` when any prompt of ``what`` is truncated."""
    if truncation.counted and truncation.truncated:
        warnings.warn(T2ITruncationWarning(truncation.message(what)), stacklevel=2)


def counted_truncation(source, texts: Sequence[str], what: str) -> Truncation:
    """:func:`prompt_truncation`, then :func:`warn_truncation` about ``what`` (one call for the shared
    study helpers, e.g. :func:`~t2i_fairness.references.grouping.template_truncation`)."""
    found = prompt_truncation(source, texts)
    if found.counted and found.truncated:
        warnings.warn(T2ITruncationWarning(found.message(what)), stacklevel=3)
    return found
