"""Object masks and decomposed ViT features for Decomposed-DIG, cached like every other feature.

:class:`MaskStore` segments each (image, object, segmenter) once and stores the mask bit-packed;
:func:`decomposed_features` gives Obj-only, BG-only and Full-image ViT features, each setup under
its own encoder fingerprint (ViT + setup + segmenter). ``--t2i-masks DIR`` files are named after
the image: ``reference/<path without suffix>.png`` or ``generated/<prompt>/<index>.png``; nonzero
pixels are object.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
from PIL import Image

from t2i_fairness.base.cache import CorruptEntry, content_key

ITEM_KEY = "t2i_item"  # image.info entry naming the MaskedImage an image was loaded from
_MASK_MAGIC = b"T2IM"


@dataclass(frozen=True)
class MaskedImage:
    """An image to segment and encode.

    Attributes:
        key: cache key of the image's content (as for features).
        mask_name: name of its mask file in a ``--t2i-masks`` folder (without suffix).
        object_name: words given to the segmenter ("cooking pot").
        label: what reports show (a prompt and index, or a reference path).
        prompt, seed: a generated image's (None for a reference image).
    """

    key: str
    mask_name: str
    object: str
    object_name: str
    region: str
    label: str
    opener: Callable[[], Image.Image]
    prompt: str | None = None
    seed: int | None = None

    def load(self) -> Image.Image:
        image = self.opener()
        image.info["key"] = self.mask_name  # how FolderMasks finds the mask
        image.info[ITEM_KEY] = self.key
        return image


def reference_items(ref, images: Sequence[Any], names: Callable[[str], str]) -> list[MaskedImage]:
    """:class:`MaskedImage` of each :class:`~t2i_fairness.references.library.ReferenceImage` of ``ref``.

    ``names`` maps an object code to the words the segmenter gets.
    """
    out = []
    for img in images:
        rec = img.record
        if rec.path.startswith("synthetic:"):
            mask_name = f"reference/{img.key}"
        else:
            rel = os.path.relpath(rec.path, ref.root) if ref.root else os.path.basename(rec.path)
            mask_name = "reference/" + os.path.splitext(rel)[0].replace(os.sep, "/")
        out.append(MaskedImage(img.key, mask_name, rec.object, names(rec.object), rec.region, rec.path, img.load))
    return out


def generated_items(prompt_images: Sequence[Any], names: Callable[[str], str]) -> list[MaskedImage]:
    """:class:`MaskedImage` of each generated image of ``(prompt, images)`` pairs (``PromptImages``)."""
    out = []
    for item in prompt_images:
        p = item.prompt
        for im in item.images:
            out.append(MaskedImage(im.key, f"generated/{p.text}/{im.index}", p.object, names(p.object),
                                   p.region or "", f"{p.text} #{im.index}", im.load, p.text, im.seed))
    return out


def encode_mask(mask: np.ndarray) -> bytes:
    """A bool (H, W) mask as bytes: magic, height and width, then the bits (``np.packbits``)."""
    m = np.asarray(mask, dtype=bool)
    if m.ndim != 2:
        raise ValueError(f"mask must be 2-D (height, width), got shape {m.shape}")
    return _MASK_MAGIC + struct.pack("<II", *m.shape) + np.packbits(m.ravel()).tobytes()


def decode_mask(data: bytes) -> np.ndarray:
    """Inverse of :func:`encode_mask`; raises :class:`~t2i_fairness.base.cache.CorruptEntry` on bad bytes."""
    if len(data) < 12 or data[:4] != _MASK_MAGIC:
        raise CorruptEntry("not a mask entry")
    height, width = struct.unpack("<II", data[4:12])
    bits = np.frombuffer(data[12:], dtype=np.uint8)
    if bits.size != (height * width + 7) // 8:
        raise CorruptEntry(f"mask of {height}x{width} needs {(height * width + 7) // 8} bytes, got {bits.size}")
    return np.unpackbits(bits, count=height * width).astype(bool).reshape(height, width)


class MaskStore:
    """Object masks of images, made once per (image, object name, segmenter) and cached.

    Args:
        segmenter: anything with ``fingerprint`` and ``segment(image, object_name)``.
        progress: ``progress(total, desc)`` context manager yielding ``advance(n)``.

    Example:
        >>> import tempfile
        >>> from t2i_fairness.base.cache import Cache
        >>> class Corner:
        ...     fingerprint = "Corner:v1"
        ...     def segment(self, image, object_name):
        ...         mask = np.zeros((image.height, image.width), bool); mask[:2, :2] = True
        ...         return mask
        >>> item = MaskedImage("k0", "generated/bag in Africa/0", "bag", "bag", "africa", "bag in Africa #0",
        ...                    lambda: Image.new("RGB", (8, 8)))
        >>> with tempfile.TemporaryDirectory() as root:
        ...     store = MaskStore(Cache(root), Corner())
        ...     store.ensure([item]); store.ensure([item])
        ...     int(store.get(item).sum()), store.cache.stats.computed["masks"], store.cache.stats.reused["masks"]
        (4, 1, 1)
    """

    def __init__(self, cache, segmenter, progress=None):
        from t2i_fairness.base.memo import Memo, namespace_of

        self.cache = cache
        self.segmenter = segmenter
        self.fingerprint = segmenter.fingerprint
        self.progress = progress
        self.memo = Memo(cache, "masks", namespace_of(segmenter=segmenter.fingerprint), ".mask", encode_mask, decode_mask)

    @staticmethod
    def key(item: MaskedImage) -> str:
        return content_key(image=item.key, object=item.object_name)

    def _make(self, item: MaskedImage) -> np.ndarray:
        image = item.load()
        mask = np.asarray(self.segmenter.segment(image, item.object_name), dtype=bool)
        if mask.shape != (image.height, image.width):
            raise ValueError(f"segmenter {self.fingerprint.split(':')[0]} returned a mask of shape {mask.shape} "
                             f"for {item.label} of (height, width) {(image.height, image.width)}")
        return mask

    def masks(self, items: Sequence[MaskedImage], desc: str = "segmenting") -> list[np.ndarray]:
        """The mask of every item: read from the cache, or made now (with a progress bar) and cached."""
        return self.memo.get_many([self.key(it) for it in items], lambda idx: [self._make(items[i]) for i in idx],
                                  batch_size=1, progress=self.progress, desc=desc)

    def ensure(self, items: Sequence[MaskedImage], desc: str = "segmenting") -> None:
        """Make the masks that are not in the cache yet."""
        self.masks(items, desc)

    def get(self, item: MaskedImage) -> np.ndarray:
        """The mask of ``item``: bool (H, W), from the cache (not counted again) or made now."""
        found = self.memo.lookup([self.key(item)])[0]
        return found if found is not None else self.masks([item])[0]


class SetupEncoder:
    """The feature-cache identity of one Decomposed-DIG setup: ``<vit>:<setup>:<segmenter>`` fingerprints."""

    def __init__(self, vit, setup: str, store: MaskStore):
        self.vit, self.setup, self.store = vit, setup, store
        self.fingerprint = f"{vit.fingerprint}:{setup}:{store.fingerprint}"
        self.kind = f"{vit.__class__.__name__}/{setup}"  # the label of the workbench's feature counts

    def encode_items(self, lookup: dict[str, MaskedImage]) -> Callable[[Sequence[Image.Image]], np.ndarray]:
        """The ``encode`` callable for ``Workbench.features``: masks found through ``image.info``."""

        def encode(images: Sequence[Image.Image]) -> np.ndarray:
            masks = [self.store.get(lookup[im.info[ITEM_KEY]]) for im in images]
            return self.vit.encode(images, masks, self.setup)

        return encode


def decomposed_features(bench, vit, store: MaskStore, items: Sequence[MaskedImage], desc: str) -> dict[str, np.ndarray]:
    """Obj-only, BG-only and Full-image features of ``items``: setup -> float32 (n, dim), NaN rows
    where a setup has no patch. Masks are made first (one progress bar), features then cached."""
    store.ensure(items, desc=f"segmenting {desc}")
    lookup = {it.key: it for it in items}
    out = {"full": bench.features(vit, items, desc=f"ViT full {desc}")}
    for setup in ("obj", "bg"):
        enc = SetupEncoder(vit, setup, store)
        out[setup] = bench.features(enc, items, desc=f"ViT {setup} {desc}", encode=enc.encode_items(lookup))
    dim = getattr(vit, "dim", None)
    if not items and dim:
        out = {k: np.zeros((0, dim), np.float32) for k in out}
    return out


def background_patch_counts(vit, store: MaskStore, items: Sequence[MaskedImage]) -> np.ndarray:
    """int (n,): background patches of each item's ViT input, from the cached masks (made if missing)
    and the ViT's own patch rule; an image without an object mask is all background.
    """
    store.ensure(items, desc="segmenting")
    total = int(vit.grid) * int(vit.grid)
    return np.array([total - int(np.asarray(vit.object_patches(store.get(it))).sum()) for it in items], dtype=int)
