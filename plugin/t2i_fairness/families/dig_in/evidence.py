"""Evidence beside a failing precision or coverage gate: what the number is made of, as images.

For one group (a region, or an object in a region) of one reference set and template:

- ``evidence_generated_vs_nearest_real.png``: the group's generated images, those furthest outside the real
  k-NN manifold first, each beside its nearest real image (feature space); captions give the prompt,
  the seed and the score ``d/r``: the generated image's distance to a real image over that real
  image's k-NN radius, minimised over the group's real images (``< 1``: inside the manifold, counted
  by precision);
- ``evidence_real_not_reached.png`` (coverage): the real images whose k-NN ball holds no generated image,
  the furthest first, captioned with their file, labels and the nearest generated image's ``d/r``.

Membership is decided here on float64 distances for display; the gate's number comes from
:func:`~t2i_fairness.metrics.manifold.precision_coverage`'s exact rule, which agrees except for
pairs within rounding of a radius. ``evidence.json`` lists the same as data.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from t2i_fairness.metrics.manifold import dedupe_index
from t2i_fairness.references.grouping import PromptSpace, group_generated

__all__ = ["GroupEvidence", "evidence", "evidence_grids", "evidence_summary", "group_evidence"]


@dataclass
class GroupEvidence:
    """One group's generated and real images with the distances the grids show.

    Attributes:
        group: the region slug, or ``object/region``.
        fake: the generated images (ImageRef) that entered the computation (after the dedupe).
        prompts: the generated images' prompt texts.
        real: the group's real images (ReferenceImage) in the manifold (after the dedupe).
        distance: ``(n_fake, n_real)`` float64 feature distances.
        radii: ``(n_real,)`` k-NN radii of the real images.
    """

    group: str
    fake: list
    prompts: list
    real: list
    distance: np.ndarray
    radii: np.ndarray

    @property
    def ratio(self) -> np.ndarray:
        return self.distance / np.maximum(self.radii[None, :], 1e-300)

    def precision_scores(self) -> np.ndarray:
        """Per generated image: min over real images of d/r (< 1: inside the manifold)."""
        return self.ratio.min(axis=1) if self.ratio.size else np.zeros(len(self.fake))

    def coverage_scores(self) -> np.ndarray:
        """Per real image: min over generated images of d/r (< 1: its ball holds a generated image)."""
        return self.ratio.min(axis=0) if self.ratio.size else np.full(len(self.real), np.inf)

    def nearest_real(self) -> np.ndarray:
        return self.distance.argmin(axis=1)


def group_evidence(study, reference: str, template: str, region: str, object: str | None = None) -> GroupEvidence:
    """The images and distances of one group (``region``, or ``object`` in ``region``) of a DIG In study.

    Everything comes from the session's cache (images, features, manifolds): nothing is generated or
    encoded again for a group the gate already measured.
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
    f, r = fake[fake_kept], np.asarray(manifold.features, dtype=np.float64)
    distance = np.sqrt(np.maximum((f * f).sum(1)[:, None] + (r * r).sum(1)[None, :] - 2 * f @ r.T, 0.0))
    fake_refs = [refs[fake_rows[i]] for i in fake_kept]
    by_record = {img.record: img for img in real.images}
    images = [by_record[records[j]] for j in real_kept]
    return GroupEvidence(label, fake_refs, [prompts[im.key] for im in fake_refs], images, distance,
                         np.asarray(manifold.radii, dtype=np.float64))


def evidence_grids(ev: GroupEvidence, metric: str, limit: int = 8, thumb: int = 144) -> dict:
    """The grids of one group: generated beside nearest real (both metrics), and for coverage the real
    images no generated image reached; with ``evidence.json`` (:func:`evidence_summary`). Keys are file names."""
    from t2i_fairness.report.grids import image_grid

    out: dict = {"evidence.json": evidence_summary(ev, metric, limit)}
    if len(ev.fake) and len(ev.real):
        score = ev.precision_scores()
        nearest = ev.nearest_real()
        order = np.argsort(-score, kind="stable")[:limit]  # furthest outside first
        images, captions = [], []
        for i in order:
            j = int(nearest[i])
            inside = "inside" if score[i] < 1 else "outside"
            images += [ev.fake[i].load(), ev.real[j].load()]
            captions += [f"{ev.prompts[i]}\nseed {ev.fake[i].seed}\nd/r {score[i]:.2f} ({inside})",
                         f"nearest real: {_real_name(ev.real[j])}\n{ev.real[j].record.object}, {ev.real[j].record.region}\n"
                         f"distance {ev.distance[i, j]:.3g}"]
        n_in = int((score < 1).sum())
        title = (f"{ev.group}: generated (left) beside nearest real (right), furthest outside first; "
                 f"{n_in} of {len(score)} inside")
        out["evidence_generated_vs_nearest_real.png"] = image_grid(images, captions, columns=4, thumb=thumb,
                                                                   upscale=True, title=title, gap=6)
    if metric == "coverage" and len(ev.real):
        cov = ev.coverage_scores()
        missed = [j for j in np.argsort(-cov, kind="stable") if cov[j] >= 1][:limit * 2]
        if missed:
            images = [ev.real[j].load() for j in missed]
            captions = [f"{_real_name(ev.real[j])}\n{ev.real[j].record.object}, {ev.real[j].record.region}\n"
                        f"nearest generated d/r {cov[j]:.2f}" for j in missed]
            title = (f"{ev.group}: {sum(1 for c in cov if c >= 1)} of {len(cov)} real images no generated image reached "
                     f"(furthest first)")
            out["evidence_real_not_reached.png"] = image_grid(images, captions, columns=4, thumb=thumb, upscale=True,
                                                              title=title, gap=6)
    return out


def evidence_summary(ev: GroupEvidence, metric: str, limit: int = 8) -> dict:
    """What the grids show, as data: counts inside / reached, and the images listed (prompt, seed, d/r)."""
    score, cov = ev.precision_scores(), ev.coverage_scores()
    nearest = ev.nearest_real() if len(ev.fake) and len(ev.real) else np.zeros(0, int)
    order = np.argsort(-score, kind="stable")[:limit]
    out = {
        "group": ev.group, "metric": metric, "generated": len(ev.fake), "real": len(ev.real),
        "generated_inside": int((score < 1).sum()), "real_reached": int((cov < 1).sum()),
        "furthest_generated": [{"prompt": ev.prompts[i], "seed": ev.fake[i].seed, "d_over_r": float(score[i]),
                                "nearest_real": ev.real[int(nearest[i])].record.path} for i in order],
    }
    if metric == "coverage":
        out["real_not_reached"] = [{"path": ev.real[j].record.path, "object": ev.real[j].record.object,
                                    "nearest_generated_d_over_r": float(cov[j])}
                                   for j in np.argsort(-cov, kind="stable") if cov[j] >= 1]
    return out


def evidence(study, reference: str, template: str, metric: str, region: str | Callable[[], str],
             object: str | None = None, limit: int = 8) -> Callable[[], dict]:
    """A callable that draws a group's evidence grids, for ``t2i_report.on_failure(...)``: nothing is
    drawn unless the gate fails. ``region`` may be a callable (the worst region, known once computed)."""

    def make() -> dict[str, bytes]:
        r = region() if callable(region) else region
        return evidence_grids(group_evidence(study, reference, template, r, object), metric, limit)

    return make


def _real_name(image) -> str:
    path = image.record.path
    return path.rsplit("/", 2)[-1] if path.startswith("synthetic:") else Path(path).name
