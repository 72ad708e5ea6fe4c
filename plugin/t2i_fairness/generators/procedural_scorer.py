"""The procedural world's own scorer, ``--t2i-scorers procedural``: a CLIP that reads the truth.

Each procedural image carries what it shows (:func:`t2i_fairness.base.truth.truth_of`: the CIS
components drawn, the object and region drawn; a canary's image what the canary drew). This scorer
embeds an image as the unit sum of its concepts' axes and a text as the unit sum of the concepts
:func:`~t2i_fairness.generators.procedural.read_prompt` reads in it (CIS components; the object and
region of a DIG In prompt; ``a photo of a {group}`` names the group), so the CIS lookup-table entry it
picks is exactly the subset the image shows and a word-level group is the one drawn. With no group drawn
(a word-level prompt's own image), a tiny tilt hashed from the image picks a group at random, as a
classifier forced to answer does.

Its errors are set, not learned: ``--t2i-procedural-miss NAME=RATE,...`` makes it miss a concept the
image shows with that probability (hashed from the image's prompt, seed and the concept; ``*`` for every
concept), the scorer-bias canary of the procedural world: the generator is unchanged, the scorer is not.

Example:
    >>> from t2i_fairness.generators.procedural import ProceduralGenerator
    >>> text, world = "a photo of a crab, and a macaw.", ProceduralGenerator()
    >>> image = world.generate([text], [0])[0]
    >>> ProceduralClip().judged([image]) == [world.cis_plan(text, 0)], ProceduralClip("crab=1").judged([image])[0]
    (True, ('macaw',))
"""

from __future__ import annotations

import functools
import hashlib
from typing import Mapping, Sequence

import numpy as np

from t2i_fairness.base.truth import truth_of

__all__ = ["DIM", "ProceduralClip", "parse_miss", "procedural_scorer"]

DIM = 2048  # axes: ImageNet-CIS class names by index, other names hashed above them, the last for "nothing"
_TILT = 1e-3  # the tie-breaking tilt's norm: far below the smallest gap between two table entries (~0.05)


def parse_miss(spec: str | Mapping[str, float] | None, flag: str = "--t2i-procedural-miss") -> dict[str, float]:
    """``NAME=RATE,...`` (``*`` for every concept) as ``{name (casefolded): rate}``.

    Raises:
        ValueError: an entry without ``=``, an empty name or a rate outside ``[0, 1]``, naming ``flag``.

    Example:
        >>> parse_miss("macaw=0.5, *=0.05")
        {'macaw': 0.5, '*': 0.05}
    """
    if spec is None or spec == "":
        return {}
    if isinstance(spec, Mapping):
        items = list(spec.items())
    else:
        items = []
        for part in str(spec).split(","):
            name, sep, rate = part.strip().rpartition("=")
            if not sep or not name.strip():
                raise ValueError(f"{flag}: {part.strip()!r} must read NAME=RATE (a concept, e.g. macaw=0.5, or *=RATE)")
            items.append((name, rate))
    out = {}
    for name, rate in items:
        try:
            x = float(rate)
        except (TypeError, ValueError):
            raise ValueError(f"{flag}: the rate of {name.strip()!r} must be a number in [0, 1], got {rate!r}") from None
        if not 0.0 <= x <= 1.0:
            raise ValueError(f"{flag}: the rate of {name.strip()!r} must be in [0, 1], got {rate!r}")
        out[name.strip().casefold()] = x
    return out


def _hash(*parts: object) -> int:
    return int.from_bytes(hashlib.sha256("\x1f".join(map(str, parts)).encode("utf-8")).digest()[:8], "big")


@functools.lru_cache(maxsize=1)
def _class_index() -> dict[str, int]:
    from t2i_fairness.metrics.cis.prompts import imagenet_classnames

    return {name.casefold(): i for i, name in enumerate(imagenet_classnames())}


@functools.lru_cache(maxsize=None)
def _axis(concept: str) -> int:
    """The axis of a concept: its ImageNet-CIS class index, or a hash into the axes above them."""
    known = _class_index()
    key = concept.casefold()
    if key in known:
        return known[key]
    return len(known) + _hash("axis", key) % (DIM - 1 - len(known))


@functools.lru_cache(maxsize=1)
def _tokenizer():
    from open_clip.tokenizer import SimpleTokenizer

    return SimpleTokenizer()


class ProceduralClip:
    """The CLIP protocol (``fingerprint``, ``context_length``, ``count_tokens``, ``encode_images``,
    ``encode_texts``) over the procedural truth, with a miss rate per concept (:func:`parse_miss`).

    ``judged(images)`` gives the concepts it sees in each image (after its misses) and
    ``truth(images)`` what each shows; an image without a truth (a real one) shows nothing to it.
    """

    context_length = 77

    def __init__(self, miss: str | Mapping[str, float] | None = None):
        self.miss = parse_miss(miss)
        spec = ",".join(f"{k}={v:g}" for k, v in sorted(self.miss.items()))
        self.fingerprint = "procedural-clip:v1" + (f":miss[{spec}]" if spec else "")

    def rate(self, concept: str) -> float:
        """The probability that this scorer misses ``concept`` in an image that shows it."""
        return self.miss.get(concept.casefold(), self.miss.get("*", 0.0))

    def count_tokens(self, text: str) -> int:
        """Tokens with start and end markers, as CLIP's tokenizer counts them."""
        return len(_tokenizer().encode(text)) + 2

    def truth(self, images: Sequence) -> list[tuple[str, ...] | None]:
        """What each image shows (its attached concepts), ``None`` for an image without a truth."""
        out = []
        for im in images:
            t = truth_of(im)
            out.append(None if t is None else tuple(t["concepts"]))
        return out

    def judged(self, images: Sequence) -> list[tuple[str, ...]]:
        """The concepts this scorer sees in each image: what it shows less what it misses."""
        out = []
        for im in images:
            t = truth_of(im)
            if t is None:
                out.append(())
                continue
            ident = (t.get("prompt"), t.get("seed"))
            out.append(tuple(c for c in t["concepts"]
                             if _hash("miss", *ident, c.casefold()) / 2.0**64 >= self.rate(c)))
        return out

    def encode_images(self, images: Sequence) -> np.ndarray:
        images = list(images)
        out = np.zeros((len(images), DIM))
        for row, (im, seen) in enumerate(zip(images, self.judged(images))):
            for c in dict.fromkeys(seen):
                out[row, _axis(c)] += 1.0
            if not seen:
                out[row, DIM - 1] = 1.0
            t = truth_of(im)
            ident = (t.get("prompt"), t.get("seed")) if t is not None else (hashlib.sha256(im.tobytes()).hexdigest(),)
            tilt = np.random.default_rng(_hash("tilt", *ident)).standard_normal(DIM)
            out[row] = out[row] / np.linalg.norm(out[row]) + _TILT * tilt / np.linalg.norm(tilt)
        return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)

    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        from t2i_fairness.generators.procedural import read_prompt

        out = np.zeros((len(texts), DIM))
        for row, text in enumerate(texts):
            r = read_prompt(text) if text.strip() else None
            concepts = () if r is None else r.components or tuple(x for x in (r.object, r.region) if x)
            for c in dict.fromkeys(concepts):
                out[row, _axis(c)] += 1.0
            if not concepts:
                out[row, DIM - 1] = 1.0
        return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)


def procedural_scorer(profile: str, run, miss: str | Mapping[str, float] | None = None) -> ProceduralClip:
    """The ``clip`` kind's adapter under ``--t2i-scorers procedural`` (device and precision do not apply)."""
    return ProceduralClip(miss)
