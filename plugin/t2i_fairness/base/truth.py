"""What a simulated image shows, carried with the image: the procedural world's ground truth.

A generator that knows what it drew (``--t2i-model procedural``) attaches it to each image as a small
JSON record under :data:`TRUTH_KEY` in ``image.info``; the cache writes it as a PNG text chunk, so it
comes back with the image (a canary's image carries what the canary drew). Scorers that read the truth
(``--t2i-scorers procedural``) and audits drawn from the truth read it with :func:`truth_of`.

Example:
    >>> from PIL import Image
    >>> im = attach_truth(Image.new("RGB", (4, 4)), {"concepts": ["crab"], "prompt": "a crab", "seed": 3})
    >>> truth_of(im)["concepts"], truth_of(Image.new("RGB", (4, 4)))
    (['crab'], None)
"""

from __future__ import annotations

import json
from typing import Iterable

__all__ = ["TRUTH_KEY", "attach_truth", "merged_truth", "truth_of"]

#: The ``image.info`` key (and PNG text chunk) holding an image's truth.
TRUTH_KEY = "t2i-truth"


def attach_truth(image, truth: dict):
    """``image`` with ``truth`` (a JSON-able dict; ``concepts``: the names it shows) attached; returns it."""
    image.info[TRUTH_KEY] = json.dumps(truth, sort_keys=True, separators=(",", ":"))
    return image


def truth_of(image) -> dict | None:
    """The truth attached to ``image``, or ``None`` when it carries none (a real or another model's image).

    Raises:
        ValueError: the attached record is not a JSON object with a ``concepts`` list.
    """
    text = getattr(image, "info", {}).get(TRUTH_KEY)
    if text is None:
        return None
    try:
        truth = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"image truth ({TRUTH_KEY} chunk) is not JSON: {exc}") from None
    if not isinstance(truth, dict) or not isinstance(truth.get("concepts"), list):
        raise ValueError(f"image truth ({TRUTH_KEY} chunk) must be an object with a 'concepts' list, got {text[:80]!r}")
    return truth


def merged_truth(images: Iterable, composite):
    """``composite`` (an image made of ``images``, e.g. tiles) showing what they show: the union of their
    concepts, attached when every one of them carries a truth; returns ``composite``."""
    truths = [truth_of(im) for im in images]
    if truths and all(t is not None for t in truths):
        concepts = list(dict.fromkeys(c for t in truths for c in t["concepts"]))
        ids = [f"{t.get('prompt')}#{t.get('seed')}" for t in truths]
        attach_truth(composite, {"concepts": concepts, "prompt": "composite:" + "|".join(ids), "seed": 0})
    return composite
