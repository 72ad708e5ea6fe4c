"""CIS scoring: the lookup table, each image's score from CLIP logits, per-component rates."""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from t2i_fairness.metrics.cis.prompts import _LOOKUP_PREFIX, _check_components, _check_pos_int, _render



def lookup_subsets(components: Sequence[str]) -> list[tuple[str, ...]]:
    """The component subset behind each lookup-table entry, in :func:`lookup_table` order."""
    items = _check_components(components)
    if not items:
        raise ValueError("`components` must name at least one component, but got none")
    positions = range(len(items))
    subsets = [
        tuple(items[i] for i in idx)
        for size in range(1, len(items) + 1)
        for idx in itertools.combinations(positions, size)
    ]
    return subsets + [()]


def lookup_table(components: Sequence[str]) -> list[tuple[str, int]]:
    """The CIS lookup table of a prompt: ``2**K`` ``(text, component count)`` entries.

    Non-empty subsets by size, then ``("", 0)`` last (the prototype's order, docs/cis.md).

    Example:
        >>> [count for _, count in lookup_table(["crab", "macaw"])]
        [1, 1, 2, 0]
    """
    return [(_render(s, _LOOKUP_PREFIX) if s else "", len(s)) for s in lookup_subsets(components)]


def _check_logits_counts(logits: object, counts: object) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(logits, dtype=float)
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(
            f"`logits` must have shape (images, table entries) with both > 0, but got shape {x.shape}"
        )
    if not np.all(np.isfinite(x)):
        raise ValueError("`logits` must be finite, but contains NaN or infinity")
    c = np.asarray(counts)
    if c.ndim != 1 or c.shape[0] != x.shape[1]:
        raise ValueError(
            f"`counts` must have one entry per logits column ({x.shape[1]}), but got shape {c.shape}"
        )
    if c.dtype.kind not in "iu":
        if c.dtype.kind == "f" and np.all(np.isfinite(c)) and np.all(c == np.round(c)):
            c = c.astype(int)
        else:
            raise ValueError(f"`counts` must hold non-negative integers, but got {c.tolist()}")
    if np.any(c < 0) or c.max() < 1:
        raise ValueError(
            f"`counts` must be non-negative with max(counts) = K >= 1, but got {c.tolist()}"
        )
    return x, c.astype(int)


def image_scores(logits: object, counts: Sequence[int]) -> np.ndarray:
    """Per-image score ``S = counts[argmax(logits)] / K`` with ``K = max(counts)`` (paper Eq. 1); ties: first entry.

    Example:
        >>> image_scores([[0.1, 0.2, 0.9, 0.3], [1.0, 1.0, 1.0, 5.0]], [1, 1, 2, 0]).tolist()
        [1.0, 0.0]
    """
    x, c = _check_logits_counts(logits, counts)
    return c[np.argmax(x, axis=1)] / c.max()


def components_inclusion_score(logits: object, counts: Sequence[int]) -> float:
    """``CIS_K``: the mean of :func:`image_scores` over all images of the prompts with ``K`` components (Eq. 1-2)."""
    return float(np.mean(image_scores(logits, counts)))


def detected_subsets(logits: object, components: Sequence[str]) -> list[tuple[str, ...]]:
    """Components present in each image: the subset of its argmax lookup-table entry.

    Example:
        >>> detected_subsets([[0, 9, 0, 0], [0, 0, 9, 0], [0, 0, 0, 9]], ["crab", "macaw"])
        [('macaw',), ('crab', 'macaw'), ()]
    """
    subsets = lookup_subsets(components)
    x, _ = _check_logits_counts(logits, [len(s) for s in subsets])
    return [subsets[int(j)] for j in np.argmax(x, axis=1)]


@dataclass(frozen=True)
class ComponentRate:
    """How often a component was detected among the images whose prompt asked for it."""

    component: str
    requested: int  # images whose prompt named the component
    detected: int  # of those, images in which it was detected

    @property
    def rate(self) -> float:
        """``detected / requested`` (generation rate, paper section 8.2)."""
        return self.detected / self.requested


def component_generation_rates(
    requested: Sequence[Sequence[str]], detected: Sequence[Sequence[str]]
) -> dict[str, ComponentRate]:
    """Per-component generation rate (paper section 8.2): detected among the images that requested it.

    Example:
        >>> rates = component_generation_rates([("crab", "sock"), ("crab", "vase")], [("crab",), ()])
        >>> {c: r.rate for c, r in rates.items()}
        {'crab': 0.5, 'sock': 0.0, 'vase': 0.0}
    """
    if len(requested) != len(detected):
        raise ValueError(
            f"`requested` and `detected` must have one entry per image, but got {len(requested)} and {len(detected)}"
        )
    asked: Counter[str] = Counter()
    found: Counter[str] = Counter()
    for i, (req, det) in enumerate(zip(requested, detected)):
        req_items = _check_components(req, f"requested[{i}]")
        det_items = _check_components(det, f"detected[{i}]")
        extra = sorted(set(det_items) - set(req_items))
        if extra:
            raise ValueError(f"`detected[{i}]` has components not requested for that image: {extra}")
        asked.update(req_items)
        found.update(det_items)
    return {c: ComponentRate(c, n, found[c]) for c, n in asked.items()}


def component_rate_intervals(
    prompts: Sequence[Sequence[str]], detected: Sequence[Sequence[Sequence[str]]], *, min_requested: int = 1,
    confidence: float = 0.95,
) -> tuple[dict[str, "object"], list[str]]:
    """Each component's generation rate with a cluster interval over the prompts that asked for it.

    Returns:
        ``({component: Interval}, [components named by one prompt only])``; the latter have no interval.
    """
    from t2i_fairness.metrics.intervals import cluster_mean_interval

    if len(prompts) != len(detected):
        raise ValueError(f"`prompts` and `detected` must have one entry per prompt, but got {len(prompts)} and "
                         f"{len(detected)}")
    hits: dict[str, list[float]] = {}
    labels: dict[str, list[int]] = {}
    for i, (comps, rows) in enumerate(zip(prompts, detected)):
        comps = _check_components(comps, f"prompts[{i}]")
        for j, det in enumerate(rows):
            det = set(_check_components(det, f"detected[{i}][{j}]"))
            if det - set(comps):
                raise ValueError(f"`detected[{i}][{j}]` has components not requested by its prompt: {sorted(det - set(comps))}")
            for c in comps:
                hits.setdefault(c, []).append(float(c in det))
                labels.setdefault(c, []).append(i)
    out, single = {}, []
    for c, values in hits.items():
        if len(values) < min_requested:
            continue
        if len(set(labels[c])) < 2:
            single.append(c)
            continue
        out[c] = cluster_mean_interval(values, labels[c], confidence=confidence)
    return out, single


def counted_components(
    prompts: Sequence[Sequence[str]], images_per_prompt: int, *, min_requested: int = 1
) -> tuple[list[str], list[str]]:
    """Components requested in at least ``min_requested`` images by at least two prompts, and those named by one prompt."""
    if isinstance(images_per_prompt, bool) or not isinstance(images_per_prompt, int) or images_per_prompt < 1:
        raise ValueError(f"`images_per_prompt` must be a positive integer, but got {images_per_prompt!r}")
    named: Counter[str] = Counter()
    for i, comps in enumerate(prompts):
        named.update(_check_components(comps, f"prompts[{i}]"))
    counted = [c for c, m in named.items() if m * images_per_prompt >= min_requested and m >= 2]
    single = [c for c, m in named.items() if m * images_per_prompt >= min_requested and m < 2]
    return counted, single


def extreme_components(
    rates: Mapping[str, ComponentRate], n: int = 10, min_requested: int = 1
) -> tuple[list[ComponentRate], list[ComponentRate]]:
    """The ``n`` most ignored (ascending) and ``n`` most prominent (descending) components."""
    n = _check_pos_int("n", n)
    min_requested = _check_pos_int("min_requested", min_requested)
    kept = [r for r in rates.values() if r.requested >= min_requested]
    ignored = sorted(kept, key=lambda r: (r.rate, -r.requested, r.component))[:n]
    prominent = sorted(kept, key=lambda r: (-r.rate, -r.requested, r.component))[:n]
    return ignored, prominent
