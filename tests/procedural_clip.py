"""A component-aware stand-in for CLIP on the procedural world, for tests that need a scorer that SEES
CIS components (the tiny scorers' CLIP has random weights: it cannot tell which components an image
shows, docs/decisions.md).

The procedural generator draws a CIS component as a tile whose background hue and pattern colour are
hashed from its class name (:func:`t2i_fairness.references.sets.render_synthetic` with region
``cis:<class>``). This scorer embeds an image as its smoothed hue histogram (saturated pixels) plus its
share of grey pixels, and a lookup-table text as the sum of its components' hue signatures (the
empty text as pure grey), unit-normalised, so the argmax table entry is the subset of components whose
hues the image shows. It is imperfect, as a real CLIP is (per-component agreement with the generator's
plan: about 0.94 at K = 2, 0.89 at K = 4, 0.84 at K = 8), and blind to order: a text's embedding does
not depend on the order of its components.

Installed in a pytester run by a conftest that registers it as the ``clip`` kind of
``t2i_fairness.models.registry.SCORERS``.
"""

from __future__ import annotations

import numpy as np

BINS = 90


def _smooth(hist: np.ndarray, width: int = 2) -> np.ndarray:
    kernel = np.exp(-0.5 * (np.arange(-3 * width, 3 * width + 1) / width) ** 2)
    padded = np.concatenate([hist[-3 * width:], hist, hist[:3 * width]])  # hue is circular
    return np.convolve(padded, kernel, mode="valid")


class ProceduralClip:
    """The CLIP protocol the CIS study uses: ``fingerprint``, ``context_length``, ``count_tokens``,
    ``encode_images`` and ``encode_texts`` (unit rows)."""

    fingerprint = "procedural-clip:v1"
    context_length = 77

    def __init__(self, world: int = 1):
        self.world = world
        self._signatures: dict[str, np.ndarray] = {}

    def count_tokens(self, text: str) -> int:
        return len(text.split()) + 2

    def _histogram(self, image) -> np.ndarray:
        hsv = np.asarray(image.convert("HSV"), dtype=np.float64) / 255.0
        hue, saturation = hsv[..., 0].ravel(), hsv[..., 1].ravel()
        coloured = saturation > 0.25
        hist = np.bincount((hue[coloured] * BINS).astype(int) % BINS, minlength=BINS).astype(float)
        return np.concatenate([_smooth(hist), [float((~coloured).sum())]])

    def encode_images(self, images) -> np.ndarray:
        out = np.stack([self._histogram(im) for im in images])
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)

    def _signature(self, component: str) -> np.ndarray:
        if component not in self._signatures:
            from t2i_fairness.references.sets import render_synthetic

            sig = sum(self._histogram(render_synthetic(component, f"cis:{component}", i, self.world, 64)) for i in range(4))
            sig[-1] = 0.0
            self._signatures[component] = sig / np.linalg.norm(sig)
        return self._signatures[component]

    def encode_texts(self, texts) -> np.ndarray:
        from t2i_fairness.generators.procedural import read_prompt

        out = []
        for text in texts:
            components = read_prompt(text).components if text.strip() else ()
            if components:
                vec = sum(self._signature(c) for c in components)
            else:
                vec = np.zeros(BINS + 1)
                vec[-1] = 1.0
            out.append(vec / np.linalg.norm(vec))
        return np.stack(out)
