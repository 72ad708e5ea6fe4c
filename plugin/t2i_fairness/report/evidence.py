"""Evidence beside a failing precision or coverage gate: what the number is made of, as images.

A family that measures generated images against a real k-NN manifold builds one
:class:`GroupEvidence` for the group its gate judged and gets
``evidence_generated_vs_nearest_real.png`` (generated images, furthest outside first, beside their
nearest real image, captioned ``d/r``: distance over that real image's k-NN radius),
``evidence_real_not_reached.png`` (coverage: real balls no generated image reached) and
``evidence.json``. Inside and reached follow the gate's own rule
(:func:`~t2i_fairness.metrics.manifold.ball_membership`), so the counts are the gate's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

__all__ = ["GeneratedImage", "GroupEvidence", "RealImage", "evidence_grids", "evidence_summary", "on_failure_grids"]


@dataclass(frozen=True)
class GeneratedImage:
    """A generated image the evidence shows; ``mask`` returns a bool (H, W) mask to outline, or None."""

    prompt: str
    seed: int | None
    load: Callable[[], Any]
    mask: Callable[[], Any] | None = None


@dataclass(frozen=True)
class RealImage:
    """A real image of the group's manifold (``path`` may be a ``synthetic:...`` name)."""

    path: str
    object: str
    region: str
    load: Callable[[], Any]
    mask: Callable[[], Any] | None = None

    @property
    def name(self) -> str:
        """The file's name (a synthetic image: its last two name parts)."""
        return self.path.rsplit("/", 2)[-1] if self.path.startswith("synthetic:") else Path(self.path).name


@dataclass
class GroupEvidence:
    """One group's generated and real images, with the distances and memberships the grids show.

    Args:
        fake: the generated images that entered the computation, one per row of ``fake_features``.
        real: the manifold's real images, one per row of ``real_features``.
        radii: (n_real,) the manifold's k-NN radii.
        space: the feature space, as captions name it (``Inception``, ``BG-only ViT``).
        missing: generated images without a feature in this space (misses for precision).
        dropped: generated images the gate's rule left out with a feature (exact duplicates the dedupe
            removed, classes it excluded): shown when they are what the miss is made of.

    Raises:
        ValueError: lengths or feature widths that do not match.

    Example:
        >>> from PIL import Image
        >>> img = lambda: Image.new("RGB", (8, 8))
        >>> ev = GroupEvidence("africa", [GeneratedImage("bag in Africa", 1, img), GeneratedImage("bag in Africa", 2, img)],
        ...                    [RealImage("a.png", "bag", "africa", img)], np.array([[0.5], [3.0]]), np.array([[0.0]]),
        ...                    np.array([1.0]), missing=[GeneratedImage("bag in Africa", 3, img)])
        >>> ev.generated_inside, ev.n_generated, ev.real_reached, ev.precision_scores().tolist()
        (1, 3, 1, [0.5, 3.0])
    """

    group: str
    fake: list
    real: list
    fake_features: np.ndarray
    real_features: np.ndarray
    radii: np.ndarray
    space: str = ""
    missing: list = field(default_factory=list)
    dropped: list = field(default_factory=list)
    distance: np.ndarray = field(init=False, repr=False)
    inside: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        from t2i_fairness.metrics.manifold import ball_membership, pair_distances

        self.radii = np.asarray(self.radii, dtype=np.float64)
        f, r = np.asarray(self.fake_features, dtype=np.float64), np.asarray(self.real_features, dtype=np.float64)
        if f.ndim != 2 or len(f) != len(self.fake):
            raise ValueError(f"{self.group}: fake_features must be (n_fake, dim) with n_fake={len(self.fake)} "
                             f"generated images, got shape {f.shape}")
        if r.ndim != 2 or len(r) != len(self.real) or self.radii.shape != (len(self.real),):
            raise ValueError(f"{self.group}: real_features and radii must have one row per real image "
                             f"({len(self.real)}), got shapes {r.shape} and {self.radii.shape}")
        if len(f) and len(r):
            self.distance = pair_distances(r, f)
            self.inside = ball_membership(r, self.radii, f)
        else:
            self.distance = np.zeros((len(f), len(r)))
            self.inside = np.zeros((len(f), len(r)), bool)

    @property
    def n_generated(self) -> int:
        """The sample total: generated images with a feature and without one."""
        return len(self.fake) + len(self.missing)

    @property
    def generated_inside(self) -> int:
        """Generated images inside some real image's ball (precision's numerator)."""
        return int(self.inside.any(axis=1).sum())

    @property
    def real_reached(self) -> int:
        """Real images whose ball holds a generated image (coverage's numerator)."""
        return int(self.inside.any(axis=0).sum())

    @property
    def ratio(self) -> np.ndarray:
        """(n_fake, n_real) distance over the real image's radius."""
        return self.distance / np.maximum(self.radii[None, :], 1e-300)

    def precision_scores(self) -> np.ndarray:
        """Per generated image with a feature: min over real images of d/r (about 1 at a ball's edge)."""
        return self.ratio.min(axis=1) if self.ratio.size else np.full(len(self.fake), np.inf)

    def coverage_scores(self) -> np.ndarray:
        """Per real image: min over generated images of d/r."""
        return self.ratio.min(axis=0) if self.ratio.size else np.full(len(self.real), np.inf)

    def nearest_real(self) -> np.ndarray:
        """Per generated image: the index of its nearest real image."""
        return self.distance.argmin(axis=1) if self.distance.size else np.zeros(len(self.fake), int)

    def furthest_generated(self, limit: int) -> list[int | None]:
        """Up to ``limit`` generated images, the images without a feature first (``None``), then the rows
        of ``fake`` outside the manifold furthest first, then those inside."""
        score = self.precision_scores()
        order = [int(i) for i in np.argsort(-score, kind="stable")]
        return ([None] * len(self.missing) + order)[:limit]

    def not_reached(self) -> list[int]:
        """The real images no generated image reached, the furthest first."""
        reached, cov = self.inside.any(axis=0), self.coverage_scores()
        return [int(j) for j in np.argsort(-cov, kind="stable") if not reached[j]]


def _space(ev: GroupEvidence) -> str:
    return f" ({ev.space})" if ev.space else ""


def evidence_grids(ev: GroupEvidence, metric: str, limit: int = 8, thumb: int = 144) -> dict:
    """The grids of one group and ``evidence.json``, keyed by file name (the not-reached grid for
    ``coverage`` only); ``limit`` generated pairs are shown. A ValueError for another ``metric``.
    """
    from PIL import Image

    from t2i_fairness.report.grids import image_grid

    if metric not in ("precision", "coverage"):
        raise ValueError(f"metric must be 'precision' or 'coverage', got {metric!r}")
    out: dict = {"evidence.json": evidence_summary(ev, metric, limit)}
    where = _space(ev)
    if ev.n_generated and ev.real:
        score, nearest, member = ev.precision_scores(), ev.nearest_real(), ev.inside.any(axis=1)
        images, captions, masks = [], [], []
        for k, i in enumerate(ev.furthest_generated(limit)):
            if i is None:  # the images without a feature come first
                g = ev.missing[k]
                images += [g.load(), Image.new("RGB", (8, 8), (235, 235, 235))]
                captions += [f"{g.prompt}\nseed {g.seed}\nno feature: a miss",
                             f"no {ev.space + ' ' if ev.space else ''}feature:\nnothing to compare,\ncounted outside"]
                masks += [g.mask() if g.mask else None, None]
                continue
            g, j = ev.fake[i], int(nearest[i])
            r = ev.real[j]
            images += [g.load(), r.load()]
            captions += [f"{g.prompt}\nseed {g.seed}\nd/r {score[i]:.2f} ({'inside' if member[i] else 'outside'})",
                         f"nearest real: {r.name}\n{r.object}, {r.region}\ndistance {ev.distance[i, j]:.3g}"]
            masks += [g.mask() if g.mask else None, r.mask() if r.mask else None]
        title = (f"{ev.group}{where}: {ev.generated_inside} of {ev.n_generated} generated inside"
                 + (f", {len(ev.missing)} without a feature" if ev.missing else "")
                 + "; each (left) beside its nearest real, furthest outside first")
        out["evidence_generated_vs_nearest_real.png"] = image_grid(
            images, captions, masks=masks if any(m is not None for m in masks) else None, columns=4, thumb=thumb,
            upscale=True, title=title, gap=6)
    if ev.dropped and (not ev.n_generated or len(ev.dropped) >= ev.n_generated):  # the rule left out most of them
        shown = ev.dropped[:limit * 2]
        title = f"{ev.group}{where}: {ev.n_generated} measured, {len(ev.dropped)} left out (exact copies, excluded)"
        out["evidence_generated_left_out.png"] = image_grid(
            [g.load() for g in shown], [f"{g.prompt}\nseed {g.seed}\nleft out" for g in shown],
            masks=None, columns=4, thumb=thumb, upscale=True, title=title, gap=6)
    missed = ev.not_reached()[:limit * 2]
    if metric == "coverage" and missed:
        cov = ev.coverage_scores()
        reals = [ev.real[j] for j in missed]
        masks = [r.mask() if r.mask else None for r in reals]
        title = (f"{ev.group}{where}: {len(ev.real) - ev.real_reached} of {len(ev.real)} real images no generated "
                 f"image reached (furthest first)")
        out["evidence_real_not_reached.png"] = image_grid(
            [r.load() for r in reals],
            [f"{r.name}\n{r.object}, {r.region}\nnearest generated d/r {cov[j]:.2f}" for r, j in zip(reals, missed)],
            masks=masks if any(m is not None for m in masks) else None, columns=4, thumb=thumb, upscale=True,
            title=title, gap=6)
    return out


def evidence_summary(ev: GroupEvidence, metric: str, limit: int = 8) -> dict:
    """What the grids show, as data: the counts that make the gate's value and the images listed
    (``d_over_r`` None for an image without a feature).
    """
    score, cov, nearest = ev.precision_scores(), ev.coverage_scores(), ev.nearest_real()
    listed = []
    for k, i in enumerate(ev.furthest_generated(limit)):
        if i is None:
            g = ev.missing[k]
            listed.append({"prompt": g.prompt, "seed": g.seed, "d_over_r": None, "nearest_real": None})
        else:
            listed.append({"prompt": ev.fake[i].prompt, "seed": ev.fake[i].seed, "d_over_r": float(score[i]),
                           "nearest_real": ev.real[int(nearest[i])].path if ev.real else None})
    out = {
        "group": ev.group, "metric": metric, "space": ev.space, "generated": ev.n_generated,
        "generated_without_feature": len(ev.missing), "real": len(ev.real),
        "generated_inside": ev.generated_inside, "real_reached": ev.real_reached, "furthest_generated": listed,
        "generated_left_out": len(ev.dropped),
    }
    if metric == "coverage":
        out["real_not_reached"] = [{"path": ev.real[j].path, "object": ev.real[j].object,
                                    "nearest_generated_d_over_r": float(cov[j])} for j in ev.not_reached()]
    return out


def on_failure_grids(build: Callable[[], GroupEvidence | None], metric: str, limit: int = 8) -> Callable[[], dict]:
    """A callable for ``t2i_report.on_failure(...)``: builds the evidence and draws its grids only when
    the gate failed; ``build`` returning None draws nothing.

    Example:
        >>> on_failure_grids(lambda: None, "coverage")()
        {}
    """

    def make() -> dict:
        ev = build()
        return {} if ev is None else evidence_grids(ev, metric, limit)

    return make
