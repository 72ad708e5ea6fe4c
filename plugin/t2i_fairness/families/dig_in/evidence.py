"""Evidence beside a failing DIG In precision or coverage gate: the group's images in Inception space.

:func:`group_evidence` gathers one group from the session's cache as a
:class:`~t2i_fairness.report.evidence.GroupEvidence`, inside and reached decided by the gate's own
rule on the rows it scored; :mod:`t2i_fairness.report.evidence` draws it.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from t2i_fairness.metrics.manifold import dedupe_index
from t2i_fairness.references.grouping import PromptSpace, group_generated
from t2i_fairness.report.evidence import GeneratedImage, GroupEvidence, RealImage, on_failure_grids

__all__ = ["evidence", "group_evidence"]


def group_evidence(study, reference: str, template: str, region: str, object: str | None = None) -> GroupEvidence:
    """The images and distances of one group (``region``, or ``object`` in ``region``) of a DIG In study,
    all from the session's cache.
    """
    bench, o = study.bench, study.bench.options
    ref = study.reference_sets[reference]
    real = study.library.features(reference, "inception")
    items = study.images(template, PromptSpace.from_reference(ref, o.objects))
    refs = [im for it in items for im in it.images]
    prompts = {im.key: it.prompt.text for it in items for im in it.images}
    feats = bench.features(real.encoder, refs, desc=f"Inception {template}")
    row = {im.key: i for i, im in enumerate(refs)}
    pairs = [(it.prompt, [row[im.key] for im in it.images]) for it in items]
    if object is None:
        groups = group_generated(pairs, template, ref, "region", o.seed)
        fake_rows, records, name, label = groups[region], ref.groups_by_region()[region], f"region:{region}", region
    else:
        groups = group_generated(pairs, template, ref, "object_region", o.seed)
        fake_rows, records = groups[(object, region)], ref.groups_by_object_region()[(object, region)]
        name, label = f"object_region:{object}:{region}", f"{object}/{region}"
    manifold = real.manifold(name, records)
    real_feats = real.rows(records)
    real_kept = dedupe_index(real_feats, o.dedupe)
    if len(real_kept) != len(manifold.radii):
        raise RuntimeError(f"{label}: {len(real_kept)} real images after the dedupe, but the manifold has {len(manifold.radii)}")
    fake = np.asarray(feats[fake_rows], dtype=np.float64)
    fake_kept = dedupe_index(fake, o.dedupe)
    fake_refs = [refs[fake_rows[i]] for i in fake_kept]
    dropped = [refs[fake_rows[i]] for i in sorted(set(range(len(fake_rows))) - set(fake_kept.tolist()))]
    by_record = {img.record: img for img in real.images}
    images = [by_record[records[j]] for j in real_kept]
    return GroupEvidence(
        label, [GeneratedImage(prompts[im.key], im.seed, im.load) for im in fake_refs],
        [RealImage(im.record.path, im.record.object, im.record.region, im.load) for im in images],
        fake[fake_kept], np.asarray(manifold.features, dtype=np.float64), manifold.radii, space="Inception",
        dropped=[GeneratedImage(prompts[im.key], im.seed, im.load) for im in dropped])


def evidence(ind, reference: str, template: str, metric: str, region: str | None = None,
             object: str | None = None, limit: int = 8) -> Callable[[], dict]:
    """A callable that draws a group's evidence grids on the study the indicator ``ind`` was measured on, for
    ``t2i_report.on_failure(...)``: nothing is drawn unless the gate fails. Without ``region``, the group the
    indicator names as its worst (``details["worst"]``: the group behind a worst-group or parity value)."""
    return on_failure_grids(lambda: group_evidence(ind.at, reference, template, region or ind.details["worst"], object),
                            metric, limit)
