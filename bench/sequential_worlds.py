"""Simulated worlds for ``bench/bench_sequential.py``: CIS and DIG In runs as toy studies whose indicator methods
build the product's evidence objects, so that ``gating.sequential.loop.Rounds`` decides them with the product's code.

**CIS** (:class:`CisWorld`, :class:`SimCis`). K = 1, 2, 4, 8; ``M`` prompts per K drawn from a population,
``N = 16`` images each. Prompt ``p`` of K names K distinct components drawn uniformly from ``C``; its rate
``r_p ~ Beta`` with mean ``CIS_MEANS[K]`` and standard deviation ``sd`` (0.2 or 0.3: the between-prompt
variance); component ``c`` has an effect ``w_c ~ N(0, COMPONENT_SD^2)`` (one fixed draw per world); an image
shows component ``c`` of its prompt with probability ``clip(r_p + w_c, 0, 1)``, independently. Its score is the
share of its prompt's components it shows (CIS's ``S = detected / K``). The indicators, as the suite's CIS
gates compute them:

* ``cis(k)`` (kind ``share``): ``families.cis.study.cis_interval``: the cluster share over the prompts
  (``metrics.intervals.cluster_mean_interval``, Korn and Graubard's effective size on ``prompts - 1`` df);
* ``cis_drop_per_component()`` (``spread``, a ``max`` gate): ``families.cis.study.drop_interval``: minus the
  least-squares slope of CIS_K over K, MOVER over the independent CIS_K;
* ``cis_component_rate_floor(groups, total)`` (``worst``): the worst component's rate over the K >= 2 prompts
  naming it, each a cluster share over those prompts (``metrics.cis.component_rate_intervals`` semantics,
  vectorised here: components named by a single prompt are not gated), ``metrics.evidence.worst_of`` with the
  selection counted; ``cleared`` leaves out the components earlier looks found clear of a miss (the factor stays
  every component counted at the look, as the product's ``CisStudy.cis_component_rate_floor``).

A look is a prefix of each K's drawn prompt list, every prompt with its 16 images (``look(study, n)``: the
first ``n`` prompts per K), so a look tests the population quantity the fixed-N gate tests. Population
values are exact (:meth:`CisWorld.expected`: the Beta integral of ``clip(r + w, 0, 1)``).

**DIG In** (:class:`DigWorld`, :class:`SimDig`): the feature world of ``bench/simulated_canaries.py``
(objects far apart, regional variation, images scattering around their object-region) for the ``{object} in
{region}`` template: ``objects`` objects x 6 regions, 180 real images per object-region, 60 generated per
prompt. :class:`SimDig` is ``families.dig_in.study.DigInStudy`` itself with its data replaced: every indicator
method (region and object-region precision and coverage, worst region, object worst region, disparity,
object consistency) is the product's; only ``scores`` (the groups' ball membership, computed once per run at
``N`` with ``metrics.manifold.ball_membership`` and cut to the first ``n`` images per prompt at a look, with
the product's ``drop_all`` de-duplication) and ``clipscores`` (CLIP cosines: ``N(mu_{o,r}, 0.03)``, ``mu_{o,r} =
0.28 + N(0, 0.02)``, an assumption: the DIG In paper does not give the per-image spread) are simulated.
Population values (``DigWorld.population``) are Monte-Carlo means over replicate runs at ``N``.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from scipy import special

REPO = Path(__file__).resolve().parents[1]
for _p in (REPO / "plugin", REPO / "bench"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from simulated_canaries import DIG_DIM, REGIONS, DigSize, dig_world  # noqa: E402
from t2i_fairness.families.base import Study, indicator  # noqa: E402
from t2i_fairness.families.dig_in.study import DigInStudy, DigScores, GroupScore, ScoredImage  # noqa: E402
from t2i_fairness.gating.indicator import Indicator  # noqa: E402
from t2i_fairness.metrics.manifold import Membership, ReferenceManifold, ball_membership, dedupe_index  # noqa: E402

__all__ = ["CIS_KS", "CIS_MEANS", "CIS_N", "CisData", "CisWorld", "DigData", "DigWorld", "SimCis", "SimDig",
           "cis_run", "dig_run", "group_score", "rate_intervals"]

CIS_KS = (1, 2, 4, 8)
CIS_N = 16
CIS_MEANS = {1: 0.8, 2: 0.7, 4: 0.6, 8: 0.5}  # CIS_K falls with K (the paper's drop per component)
COMPONENT_SD = 0.08  # component effects: the rate floor's components differ
RATE_KS = (2, 4, 8)  # the Ks whose images enter the per-component rates (families.cis.options.rate_ks)
DIG_N = 60  # images per {object} in {region} prompt (the paper preset)
DIG_REAL = 180  # real images per object-region (GeoDE balanced, the paper)
CLIP_SD = 0.03
CONFIDENCE = 0.95


# ------------------------------------------------------------------------------------------------ CIS


def _beta(mean: float, sd: float) -> tuple[float, float]:
    nu = mean * (1.0 - mean) / sd**2 - 1.0
    if nu <= 0:
        raise ValueError(f"no Beta distribution has mean {mean} and sd {sd}")
    return mean * nu, (1.0 - mean) * nu


def expected_clip(a: float, b: float, w) -> np.ndarray:
    """``E[clip(r + w, 0, 1)]`` for ``r ~ Beta(a, b)``, exactly (vectorised over ``w``).

    Example:
        >>> rng = np.random.default_rng(0); r = rng.beta(2.0, 1.0, 400_000)
        >>> [round(float(expected_clip(2.0, 1.0, w)), 3) == round(float(np.clip(r + w, 0, 1).mean()), 3)
        ...  for w in (-0.2, 0.0, 0.15)]
        [True, True, True]
    """
    w = np.asarray(w, dtype=np.float64)
    mu = a / (a + b)
    up = np.clip(1.0 - w, 0.0, 1.0)  # w >= 0: r + w for r < 1 - w, else 1
    lo = np.clip(-w, 0.0, 1.0)  # w < 0: 0 for r < -w, else r + w
    pos = mu * special.betainc(a + 1, b, up) + w * special.betainc(a, b, up) + (1.0 - special.betainc(a, b, up))
    neg = mu * (1.0 - special.betainc(a + 1, b, lo)) + w * (1.0 - special.betainc(a, b, lo))
    return np.where(w >= 0, pos, neg)


@dataclass
class CisWorld:
    """A CIS population: ``M`` prompts per K, ``C`` components, between-prompt sd ``sd`` (see the module docstring).

    ``shift[k]``: a K's prompts' rates lowered by that much (a model missing CIS_K); ``component_w``: component
    effects, overridable per component (a component missing the rate floor); ``dropped``: a component never
    shown in a K >= 2 prompt (the ``drop_component`` canary).
    """

    prompts: int
    components: int
    sd: float
    order_prompts: int
    seed: int = 0
    shift: dict = field(default_factory=dict)
    dropped: int | None = None
    component_w: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.component_w is None:
            rng = np.random.default_rng([self.seed, 71])
            self.component_w = rng.normal(0.0, COMPONENT_SD, self.components)
        self.params = {k: _beta(CIS_MEANS[k], self.sd) for k in CIS_KS}

    def replace(self, **changes) -> "CisWorld":
        import dataclasses

        return dataclasses.replace(self, **{"component_w": self.component_w.copy(), **changes})

    def expected(self, k: int, w) -> np.ndarray:
        a, b = self.params[k]
        return expected_clip(a, b, np.asarray(w) - self.shift.get(k, 0.0))

    def cis(self, k: int) -> float:
        """CIS_K of the population (the mean over components drawn uniformly)."""
        e = self.expected(k, self.component_w)
        if self.dropped is not None and k >= 2:
            e = e.copy()
            e[self.dropped] = 0.0
        return float(e.mean())

    def component_rates(self) -> np.ndarray:
        """Each component's rate over the K >= 2 prompts naming it (a K prompt names it with probability K / C)."""
        ks = np.array(RATE_KS, dtype=float)
        e = np.stack([self.expected(k, self.component_w) for k in RATE_KS])
        rates = (ks[:, None] * e).sum(0) / ks.sum()
        if self.dropped is not None:
            rates[self.dropped] = 0.0
        return rates

    def drop(self) -> float:
        from t2i_fairness.families.cis.study import slope_weights

        w = slope_weights(list(CIS_KS))
        return float(-sum(wk * self.cis(k) for wk, k in zip(w, CIS_KS)))

    def population(self) -> dict:
        """Gate method key -> the population value of its quantity."""
        out = {("cis", (("k", k),)): self.cis(k) for k in CIS_KS}
        out[("cis_drop_per_component", ())] = self.drop()
        out[("cis_component_rate_floor", ())] = float(self.component_rates().min())
        return out

    def shifted_for(self, k: int, target: float) -> float:
        """The shift of K's rates that makes CIS_K's population value ``target``."""
        from scipy.optimize import brentq

        a, b = self.params[k]
        return float(brentq(lambda s: float(expected_clip(a, b, self.component_w - s).mean()) - target, -1.0, 1.0))

    def component_for(self, c: int, target: float) -> float:
        """The effect of component ``c`` that makes its rate ``target``."""
        from scipy.optimize import brentq

        ks = np.array(RATE_KS, dtype=float)

        def rate(w: float) -> float:
            return float(sum(kk * float(self.expected(k, w)) for kk, k in zip(ks, RATE_KS)) / ks.sum())

        return float(brentq(lambda w: rate(w) - target, -1.5, 1.5))


@dataclass
class CisData:
    """One run's CIS draws: per K the components ``(M, K)``, the per-image detections ``(M, N, K)``, the scores
    ``(M, N)``; the rate floor's mentions (prompt-major per K, K >= 2): component, prompt uid, K, detections."""

    world: CisWorld
    comps: dict
    det: dict
    scores: dict
    mention_comp: dict
    mention_det: dict


def _distinct_rows(rng, m: int, k: int, c: int) -> np.ndarray:
    out = rng.integers(0, c, (m, k))
    while k > 1:
        s = np.sort(out, axis=1)
        bad = np.nonzero((np.diff(s, axis=1) == 0).any(axis=1))[0]
        if bad.size == 0:
            break
        out[bad] = rng.integers(0, c, (bad.size, k))
    return out


def cis_run(world: CisWorld, rng: np.random.Generator) -> CisData:
    """One run: every K's ``M`` prompts drawn, each with its 16 images' detections."""
    comps, det, scores, mc, md = {}, {}, {}, {}, {}
    for k in CIS_KS:
        a, b = world.params[k]
        c = _distinct_rows(rng, world.prompts, k, world.components)
        r = rng.beta(a, b, world.prompts) - world.shift.get(k, 0.0)
        p = np.clip(r[:, None] + world.component_w[c], 0.0, 1.0)
        if world.dropped is not None and k >= 2:
            p = np.where(c == world.dropped, 0.0, p)
        d = rng.random((world.prompts, CIS_N, k)) < p[:, None, :]
        comps[k], det[k], scores[k] = c, d, d.mean(axis=2)
        if k in RATE_KS:
            mc[k] = c.reshape(-1)  # prompt-major: prompt i's mentions are rows i*k .. i*k + k - 1
            md[k] = np.ascontiguousarray(d.transpose(0, 2, 1)).reshape(-1, CIS_N)
    return CisData(world, comps, det, scores, mc, md)


def rate_intervals(data: CisData, n: int, groups=None, confidence: float = CONFIDENCE) -> dict:
    """``metrics.cis.component_rate_intervals`` on the first ``n`` prompts of each K >= 2 (the prompts over every
    K, in K order; components named by fewer than 2 prompts left out; ``rate_min_images`` = N), vectorised:
    the same ``cluster_mean_interval`` per component. ``groups``: only these component labels."""
    from t2i_fairness.metrics.intervals import cluster_mean_interval

    comp, det, uid = [], [], []
    offset = 0
    for k in RATE_KS:
        comp.append(data.mention_comp[k][: n * k])
        det.append(data.mention_det[k][: n * k])
        uid.append(offset + np.repeat(np.arange(n), k))
        offset += n
    comp, det, uid = np.concatenate(comp), np.concatenate(det), np.concatenate(uid)
    order = np.argsort(comp, kind="stable")
    comp, det, uid = comp[order], det[order], uid[order]
    starts = np.searchsorted(comp, np.arange(data.world.components + 1))
    wanted = range(data.world.components) if groups is None else sorted(int(g[1:]) for g in groups)
    out = {}
    for c in wanted:
        lo, hi = starts[c], starts[c + 1]
        if hi - lo < 2:  # named by a single prompt (a component names at most once per prompt): not gated
            continue
        out[f"c{c:04d}"] = cluster_mean_interval(det[lo:hi].ravel().astype(np.float64),
                                                 np.repeat(uid[lo:hi], CIS_N), confidence=confidence)
    return out


class SimCis(Study):
    """The CIS gates' indicators on a run's first ``n`` prompts per K (the module docstring)."""

    def __init__(self, data: CisData, n: int, log: list | None = None):
        super().__init__(SimpleNamespace(options=SimpleNamespace(confidence=CONFIDENCE)))
        self.data, self.n, self.log = data, int(n), log if log is not None else []

    def at_prompts(self, n: int) -> "SimCis":
        return SimCis(self.data, n, self.log)

    def _scored(self, k: int):
        from t2i_fairness.families.cis.study import Scored

        return Scored(k, [], self.data.scores[k][: self.n], [])

    def reads(self, method: str, kwargs: dict) -> dict:
        """K -> prompts this indicator reads (a prefix)."""
        if method == "cis":
            return {kwargs["k"]: self.n}
        if method == "cis_drop_per_component":
            return {k: self.n for k in CIS_KS}
        return {k: self.n for k in RATE_KS}

    @indicator("share")
    def cis(self, k: int) -> Indicator:
        from t2i_fairness.families.cis.study import cis_interval

        scored = self._scored(k)
        ev = cis_interval(scored, CONFIDENCE)
        return Indicator(ev.estimate, scored.n_images, "share", ev)

    @indicator("spread", value_range=(None, None))
    def cis_drop_per_component(self) -> Indicator:
        from t2i_fairness.families.cis.study import drop_interval

        scored = [self._scored(k) for k in CIS_KS]
        ev = drop_interval(scored, CONFIDENCE)
        return Indicator(ev.estimate, sum(s.n_images for s in scored), "spread", ev, higher_is_better=False)

    @indicator("worst")
    def cis_component_rate_floor(self, cleared=None) -> Indicator:
        """As ``CisStudy.cis_component_rate_floor``: the components earlier looks ``cleared`` are left out, the
        Bonferroni factor every component counted at this look (the set grows with the prompts)."""
        from t2i_fairness.metrics.evidence import worst_of

        every = rate_intervals(self.data, self.n)
        if not every:
            return Indicator(math.nan, 0, "worst", skip="no component named by 2 prompts")
        ivs = {c: iv for c, iv in every.items() if c not in set(cleared or ())} or every
        ev = worst_of(ivs, confidence=CONFIDENCE, total=len(every) if cleared else None)
        return Indicator(ev.estimate, ev.n_units, "worst", ev, details={"worst": ev.worst_label})


# ------------------------------------------------------------------------------------------------ DIG In


def group_score(features: np.ndarray, inside: np.ndarray, n_real: int, dedupe: str = "drop_all") -> GroupScore:
    """``families.dig_in.study.score_group`` from a membership computed beforehand: the same de-duplication of the
    generated rows (``dedupe_index``), the same ``Membership`` and ``GroupScore`` (checked against ``score_group``
    in tests/test_bench_sequential.py)."""
    kept = dedupe_index(features, dedupe)
    total = len(features)
    member = Membership(inside[kept], kept)
    if kept.size == 0:
        return GroupScore(float("nan"), 0.0, 0, n_real, member, total,
                          note=f"all {total} generated images are exact duplicates; --t2i-dedupe {dedupe} left none: "
                               "coverage is 0 and precision undefined")
    return GroupScore(member.precision, member.coverage, int(kept.size), n_real, member, total)


@dataclass
class DigWorld:
    """The fixed real reference (``simulated_canaries.dig_world``) with a manifold per region and per object-region,
    and each object-region's mean CLIP cosine."""

    objects: int
    seed: int = 0

    def __post_init__(self) -> None:
        self.base = dig_world(DigSize(self.objects, DIG_REAL, DIG_N, 0, "bench_sequential"), self.seed)
        self.object_manifolds = {}
        for region in REGIONS:
            real = self.base.real[region].reshape(self.objects, DIG_REAL, DIG_DIM)
            for o in range(self.objects):
                self.object_manifolds[(o, region)] = ReferenceManifold.build(real[o], nearest_k=self.base.manifolds[region].nearest_k)
        rng = np.random.default_rng([self.seed, 72])
        self.clip_means = 0.28 + rng.normal(0.0, 0.02, (self.objects, len(REGIONS)))
        self.anchor = self.base.centres[0][0] + np.random.default_rng([self.seed, 73]).normal(size=DIG_DIM)


@dataclass
class DigData:
    """One run: per region the features ``(objects, N, dim)``, the region membership ``(objects, N, n_real)``, the
    object-region memberships ``(N, 180)`` and the CLIP cosines ``(objects, N)``."""

    world: DigWorld
    features: dict
    region_inside: dict
    object_inside: dict
    clip: dict


def dig_run(world: DigWorld, rng: np.random.Generator, *, degrade: float = 0.0, collapse: bool = False,
            outliers: float = 0.0, region: str = "africa") -> DigData:
    """One run of the model on the ``{object} in {region}`` prompts; ``region`` degraded (``degrade_region``'s
    feature-space stand-in, ``simulated_canaries.dig_generated``), collapsed to one image (``collapse_region``:
    byte-identical images, so DIG In's ``drop_all`` leaves none), or with a share ``outliers`` of its images
    far from every real image (a model missing its precision)."""
    feats, rin, oin, clip = {}, {}, {}, {}
    o, n = world.objects, DIG_N
    for i, r in enumerate(REGIONS):
        x = world.base.centres[i][:, None, :] + rng.normal(size=(o, n, DIG_DIM))
        if r == region and degrade:
            m = world.base.means[r]
            x = m + (1.0 - degrade) * (x - m) + degrade * rng.normal(size=x.shape)
        if r == region and outliers:
            far = rng.random((o, n)) < outliers
            x = np.where(far[:, :, None], x + 40.0 + rng.normal(size=x.shape), x)
        if r == region and collapse:
            x = np.broadcast_to(world.anchor, x.shape).copy()
        feats[r] = x
        man = world.base.manifolds[r]
        rin[r] = ball_membership(man.features, man.radii, x.reshape(-1, DIG_DIM)).reshape(o, n, -1)
        for j in range(o):
            om = world.object_manifolds[(j, r)]
            oin[(j, r)] = ball_membership(om.features, om.radii, x[j])
        clip[r] = world.clip_means[:, i][:, None] + rng.normal(0.0, CLIP_SD, (o, n))
    return DigData(world, feats, rin, oin, clip)


class SimDig(DigInStudy):
    """``DigInStudy`` on simulated data: its own indicator methods, the groups' scores from :class:`DigData` at the
    first ``n`` images per prompt (the module docstring)."""

    def __init__(self, data: DigData, n: int, log: list | None = None):
        Study.__init__(self, SimpleNamespace(options=SimpleNamespace(confidence=CONFIDENCE, nearest_k=3)))
        self.data, self.n, self.log = data, int(n), log if log is not None else []

    def at_images(self, n: int) -> "SimDig":
        return SimDig(self.data, n, self.log)

    def scores(self, reference: str, template: str) -> DigScores:
        def make():
            d, n, o = self.data, self.n, self.data.world.objects
            region = {}
            obj = {}
            for r in REGIONS:
                x = d.features[r][:, :n].reshape(-1, DIG_DIM)
                region[r] = group_score(x, d.region_inside[r][:, :n].reshape(len(x), -1),
                                        d.region_inside[r].shape[-1])
                for j in range(o):
                    obj[(f"o{j}", r)] = group_score(d.features[r][j, :n], d.object_inside[(j, r)][:n], DIG_REAL)
            return DigScores(region=region, object_region=obj)

        return self._once(("scores", reference, template), make)

    def clipscores(self, template: str, region: str | None = None) -> list:
        out = []
        for i, r in enumerate(REGIONS):
            if region is not None and r != region:
                continue
            for j in range(self.data.world.objects):
                out += [ScoredImage(f"o{j}", r, float(s)) for s in self.data.clip[r][j, : self.n]]
        return out

    def reads(self, method: str, kwargs: dict) -> set:
        """The prompts ``(object, region)`` this indicator reads (its groups'; the open groups' for worst-of)."""
        objects = [f"o{j}" for j in range(self.data.world.objects)]
        groups = kwargs.get("groups")
        if "object" in kwargs and "region" in kwargs:
            return {(kwargs["object"], kwargs["region"])}
        if "object" in kwargs:
            regions = REGIONS if groups is None else groups
            return {(kwargs["object"], r) for r in regions}
        if kwargs.get("region") is not None:
            return {(o, kwargs["region"]) for o in objects}
        regions = REGIONS if groups is None else groups
        return {(o, r) for o in objects for r in regions}
