"""A generated synthetic reference set, so the gates run offline; it is labelled synthetic everywhere."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Iterable

from PIL import Image

from t2i_fairness.base.files import atomic_write_bytes
from t2i_fairness.references.images import _SYNTHETIC_SCHEME, render_synthetic
from t2i_fairness.references.labels import GEODE_REGION_SLUGS, KNOWN_OBJECTS, REGION_SLUGS, Record, _choose
from t2i_fairness.references.reference_set import ReferenceSet
from t2i_fairness.vocab.geode import GEODE_OBJECTS



def synthetic_reference(
    objects: Iterable[str] | None = None,
    regions: Iterable[str] | None = None,
    per_group: int = 4,
    seed: int = 0,
    size: int = 64,
    *,
    folder: str | os.PathLike | None = None,
    name: str = "synthetic",
) -> ReferenceSet:
    """A small generated reference set, so the gates run offline; ``synthetic=True``, named so.

    Without ``folder`` the set is virtual; with it the PNGs are written there.

    Example:
        >>> ref = synthetic_reference(["bag", "car"], ["africa", "europe"], per_group=3, seed=7)
        >>> len(ref), ref.synthetic, ref.name
        (12, True, 'synthetic')
    """
    objs = list(GEODE_OBJECTS) if objects is None else _choose(objects, KNOWN_OBJECTS, "object", slug=True)
    regs = list(GEODE_REGION_SLUGS) if regions is None else _choose(regions, REGION_SLUGS, "region")
    if isinstance(per_group, bool) or not isinstance(per_group, int) or per_group < 1:
        raise ValueError(f"per_group must be a positive integer, got {per_group!r}")
    if not isinstance(size, int) or size < 8:
        raise ValueError(f"size must be an integer >= 8 pixels, got {size!r}")
    if "synthetic" not in name:
        name = f"{name}-synthetic"
    sub = f"seed{seed}-{size}px"
    root = Path(folder) if folder is not None else None
    records = []
    for region in regs:
        for obj in objs:
            for i in range(per_group):
                rel = f"{sub}/{region}/{obj}/{i:04d}.png"
                if root is None:
                    path = f"{_SYNTHETIC_SCHEME}/{rel}"
                else:
                    target = root / rel
                    atomic_write_bytes(target, skip_if_same=True, data=_png_bytes(render_synthetic(obj, region, i, seed, size)))
                    path = os.path.abspath(target)
                records.append(Record(path, obj, region, None))
    where = f"written to {root}" if root is not None else "rendered in memory"
    description = (
        f"SYNTHETIC stand-in reference data (not real images): {len(objs)} objects x {len(regs)} "
        f"regions x {per_group} generated {size}px images, seed {seed}, {where}"
    )
    return ReferenceSet(name, records, True, description, "synthetic",
                        os.path.abspath(root) if root is not None else _SYNTHETIC_SCHEME)


def _png_bytes(image: Image.Image) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()
