"""The DIG In study: reference features, per-group manifolds, precision/coverage and CLIP consistency.

The ``dig_in`` fixture is one :class:`DigInStudy` per session; each number is computed on first
request, for the group asked (``scores(ref, template).region["africa"]`` generates Africa's
prompts only), and :meth:`DigInStudy.requests` says which images a group asks for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Hashable, Iterator, Mapping

import numpy as np

from t2i_fairness.families.base import Study
from t2i_fairness.metrics.manifold import Membership, dedupe_index, membership, precision_coverage
from t2i_fairness.generators.tokens import counted_truncation
from t2i_fairness.references.grouping import (PromptImages, PromptSpace, group_generated, look_of, prompt_calls,
                                              prompt_images, template_truncation)
from t2i_fairness.references.library import ReferenceLibrary
from t2i_fairness.families.base import indicator
from t2i_fairness.gating.indicator import Indicator
from t2i_fairness.spine.generation import ImageRef
from t2i_fairness.vocab.geode import GEODE_OBJECTS


# DIG In's regions pickle: the templates whose generated images its code de-duplicates together
REGIONS_PICKLE = ("object", "object_in_region")


def disparity(values: Mapping[str, float]) -> float:
    """Best / worst ratio over groups (inf when the worst is 0 and the best is not; 1 when all are 0).

    Reported, not gated: it is unbounded; its gated form is the worst / best ratio.

    Example:
        >>> disparity({"africa": 0.25, "europe": 0.5})
        2.0
    """
    vals = list(values.values())
    best, worst = max(vals), min(vals)
    if worst == 0:
        return 1.0 if best == 0 else math.inf
    return best / worst


def fake_dedupe(options) -> str:
    """How generated feature rows are de-duplicated: ``--t2i-fake-dedupe``, ``auto`` meaning ``--t2i-dedupe``'s mode (DIG In's code)."""
    mode = options.fake_dedupe
    return options.dedupe if mode == "auto" else mode


@dataclass
class GroupScore:
    """Precision and coverage of one group, with the ball membership its bootstrap resamples.

    ``n_fake`` counts the de-duplicated rows the estimate (and its bootstrap) uses; ``n_generated`` the
    group's images before de-duplication.
    """

    precision: float
    coverage: float
    n_fake: int  # generated rows scored (after the dedupe of duplicated feature rows)
    n_real: int
    member: Membership | None = field(default=None, repr=False)
    n_generated: int | None = None  # the group's generated images, before the dedupe
    note: str = ""  # why a value is degenerate (a collapsed group)

    def __post_init__(self) -> None:
        if self.n_generated is None:
            self.n_generated = self.n_fake

    @property
    def n_duplicates(self) -> int:
        return int(self.n_generated - self.n_fake)

    def precision_interval(self, confidence: float = 0.95):
        """Wilson's interval over the scored generated images (:mod:`t2i_fairness.metrics.intervals`)."""
        from t2i_fairness.metrics.intervals import precision_interval

        return precision_interval(self.member.inside, confidence=confidence)

    def coverage_interval(self, confidence: float = 0.95):
        """The jackknife-Wilson interval of coverage; a group with no row left after de-duplication gets
        coverage 0 with the score interval of its ``n_generated`` images covering no ball, never ``[0, 0]``.
        """
        from t2i_fairness.metrics.intervals import Interval, coverage_interval

        if self.member.n_fake == 0:
            if (self.n_generated or 0) >= 2 and self.n_real >= 1:
                iv = coverage_interval(np.zeros((int(self.n_generated), int(self.n_real)), bool), confidence=confidence)
                return Interval(iv.estimate, iv.low, iv.high, f"{iv.method}: no generated image left (none covers "
                                "a ball)", confidence, 0, iv.se, iv.df, iv.n_effective)
            return Interval(0.0, 0.0, 0.0, "none: no generated image", confidence, 0, se=0.0)
        return coverage_interval(self.member.inside, confidence=confidence)

    def interval(self, metric: str, confidence: float = 0.95):
        return self.precision_interval(confidence) if metric == "precision" else self.coverage_interval(confidence)

    def report(self) -> dict:
        return {"precision": self.precision, "coverage": self.coverage, "n_fake": self.n_fake, "n_real": self.n_real,
                "n_generated": self.n_generated, "n_duplicates": self.n_duplicates, "note": self.note}


def score_group(m, fake: np.ndarray, *, dedupe: str = "drop_all", bootstrap: bool = True, device=None,
                group: str | None = None, n_generated: int | None = None) -> GroupScore:
    """Precision and coverage of generated ``fake`` rows against manifold ``m``, with the bootstrap membership.

    Args:
        dedupe: ``none``, ``keep_one`` or ``drop_all`` on ``fake``.
        bootstrap: build the membership (intervals on).
        group: quoted in error messages.
        n_generated: the group's images before an earlier (set-level) de-duplication; default ``len(fake)``.

    Example:
        >>> from t2i_fairness.metrics.manifold import ReferenceManifold
        >>> m = ReferenceManifold.build(np.array([[0.0], [1.0], [5.0], [6.0]]), nearest_k=1)
        >>> s = score_group(m, np.array([[0.2], [0.2], [5.5], [20.0], [30.0]]))
        >>> round(s.precision, 3), s.coverage, s.n_fake, s.n_duplicates, s.member.n_fake == s.n_fake
        (0.333, 0.5, 3, 2, True)
    """
    kept = dedupe_index(fake, dedupe)
    rows = np.asarray(fake)[kept]
    total = len(fake) if n_generated is None else int(n_generated)
    if kept.size == 0:  # a collapsed group (every image a duplicate): coverage 0, precision undefined, no error
        return GroupScore(float("nan"), 0.0, 0, len(m.radii), membership(m, rows, dedupe="none", group=group), total,
                          note=f"all {total} generated images are exact duplicates; --t2i-dedupe {dedupe} left none: "
                               "coverage is 0 and precision undefined")
    pc = precision_coverage(m, rows, dedupe="none", device=device, group=group)
    member = membership(m, rows, dedupe="none", group=group) if bootstrap else None
    if member is not None and (member.precision, member.coverage) != (pc["precision"], pc["coverage"]):
        raise RuntimeError(f"group {group!r}: the bootstrap's ball membership gives precision {member.precision} and "
                           f"coverage {member.coverage}, the estimate {pc['precision']} and {pc['coverage']}; the "
                           "two membership rules disagree on a boundary pair (a bug: please report it)")
    return GroupScore(pc["precision"], pc["coverage"], int(kept.size), len(m.radii), member, total)


class LazyGroups(Mapping):
    """Groups whose keys are known up front and whose scores are computed on first access, once.

    Example:
        >>> made = []
        >>> g = LazyGroups(["a", "b"], lambda k: made.append(k) or k.upper())
        >>> "a" in g, list(g), made
        (True, ['a', 'b'], [])
        >>> g["b"], g["b"], made
        ('B', 'B', ['b'])
    """

    def __init__(self, keys, make: Callable[[Hashable], object]):
        self._keys = list(keys)
        self._known = set(self._keys)
        self._make = make
        self._done: dict = {}

    def __getitem__(self, key):
        if key not in self._known:
            raise KeyError(key)
        if key not in self._done:
            self._done[key] = self._make(key)
        return self._done[key]

    def __iter__(self) -> Iterator:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key) -> bool:
        return key in self._known

    def __repr__(self) -> str:
        return f"LazyGroups({self._keys!r}, computed={list(self._done)!r})"


@dataclass
class DigScores:
    """Precision and coverage of one template against one reference set, per group, computed on access."""

    region: Mapping[str, GroupScore] = field(default_factory=dict)
    object_region: Mapping[tuple[str, str], GroupScore] = field(default_factory=dict)
    truncation: object = None  # the generator's truncation of the template's prompts (metrics.truncation.Truncation)


@dataclass(frozen=True)
class ScoredImage:
    object: str
    region: str | None
    score: float
    image: ImageRef | None = field(default=None, compare=False, repr=False)  # for grids of the lowest scores


class DigInStudy(Study):
    """DIG In on one model, over the session's workbench."""

    def __init__(self, bench):
        super().__init__(bench)
        self.library = ReferenceLibrary.of(bench)

    def at_images(self, n: int) -> "DigInStudy":
        """This study on the first ``n`` images per prompt of the fixed-N run (``--t2i-sequential``'s looks)."""
        return DigInStudy(self.bench.at_images(n))

    def planned_looks(self) -> tuple[list[int], str]:
        """``--t2i-sequential``'s planned looks: images per prompt in multiples of the batch size up to ``N``."""
        from t2i_fairness.metrics.sequential import round_sizes

        return (round_sizes(int(self.bench.planned_images_per_prompt), int(self.bench.factory.batch_size)),
                "images per prompt")

    # -- the gated indicators (each read by the gate test of its name: test_<method>) ---------------------
    def _confidence(self) -> float:
        return float(self.bench.options.confidence)

    def _group_indicator(self, s: GroupScore, metric: str, **details) -> Indicator:
        """One group's precision (a share of its generated images) or coverage (a share of its real balls,
        growing with the images); a collapsed group's undefined precision is that gate's failure."""
        value = getattr(s, metric)
        kind, grows = ("share", False) if metric == "precision" else ("coverage", True)
        n = s.n_fake if metric == "precision" else s.n_real
        info = {"n_real": s.n_real, "n_fake": s.n_fake, "n_generated": s.n_generated, "n_duplicates": s.n_duplicates,
                "n_scored": s.member.n_fake, **details, **({"note": s.note} if s.note else {})}
        if math.isnan(value):
            return Indicator(value, n, kind, grows=grows, details=info, undefined=s.note or f"{metric} is undefined")
        return Indicator(value, n, kind, s.interval(metric, self._confidence()), grows=grows, details=info)

    def _object_groups(self, reference: str, template: str, object: str) -> dict:
        scores = self.scores(reference, template).object_region
        return {r: scores[(o, r)] for (o, r) in scores if o == object}  # this object's groups (computed on access)

    def _worst_indicator(self, groups: Mapping[str, GroupScore], metric: str, chosen=None, total: int | None = None,
                         **details) -> Indicator:
        """The worst group; ``chosen``: only these groups are measured (a sequential run's open groups; ``total``
        the gate's number of groups, its Bonferroni factor)."""
        kind, grows = "worst", metric == "coverage"
        if chosen is not None:
            groups = {g: groups[g] for g in chosen}
        undefined = [g for g, s in groups.items() if math.isnan(getattr(s, metric))]
        if undefined:  # the worst: the first undefined group (the evidence a failing gate shows)
            return Indicator(math.nan, 0, kind, grows=grows, details={"worst": str(undefined[0])}, undefined=(
                f"{metric} is undefined for {', '.join(map(str, undefined))}: "
                + "; ".join(groups[g].note for g in undefined if groups[g].note)))
        from t2i_fairness.metrics.evidence import worst_of

        ev = worst_of({str(g): s.interval(metric, self._confidence()) for g, s in groups.items()},
                      confidence=self._confidence(), total=total)
        s = groups[ev.worst_label]
        return Indicator(ev.estimate, s.n_fake if metric == "precision" else s.n_real, kind, ev, grows=grows,
                         details={"worst": ev.worst_label, "by_group": {str(g): getattr(v, metric) for g, v in
                                                                       groups.items()},
                                  "selected_from": ev.selection, **details})

    def _parity_indicator(self, groups: Mapping[str, GroupScore], metric: str) -> Indicator:
        """Worst / best ratio (1 = every group alike); the best/worst disparity of the paper's figures is in the
        details."""
        values = {g: getattr(s, metric) for g, s in groups.items()}
        grows = metric == "coverage"
        undefined = [g for g, v in values.items() if math.isnan(v)]
        if undefined:
            return Indicator(math.nan, 0, "ratio", grows=grows, details={"worst": str(undefined[0])},
                             undefined=f"{metric} is undefined for {', '.join(map(str, undefined))}")
        if len(values) < 2:
            return Indicator(math.nan, 0, "ratio", grows=grows, skip=(
                f"parity needs two groups with {metric}; only {', '.join(map(str, values))} has one"))
        from t2i_fairness.metrics.evidence import pairs

        ev = pairs({str(g): s.interval(metric, self._confidence()) for g, s in groups.items()}, contrast="ratio",
                   confidence=self._confidence())
        worst, best = min(values, key=values.get), max(values, key=values.get)
        return Indicator(ev.estimate, len(groups), "ratio", ev, grows=grows, details={
            "worst": str(worst), "best": str(best), "best_over_worst": disparity(values),
            "by_group": {str(g): v for g, v in values.items()}, "pairs_tested": ev.selection})

    @indicator("share")
    def region_precision(self, reference: str, template: str, region: str) -> Indicator:
        """Generated images of ``region`` are realistic: the share inside the k-NN manifold of its real images."""
        return self._group_indicator(self.scores(reference, template).region[region], "precision")

    @indicator("coverage", grows=True)
    def region_coverage(self, reference: str, template: str, region: str) -> Indicator:
        """Generated images of ``region`` are diverse: the share of its real images' balls they reach."""
        return self._group_indicator(self.scores(reference, template).region[region], "coverage")

    def _object_region(self, reference: str, template: str, object: str, region: str) -> GroupScore | None:
        return self.scores(reference, template).object_region.get((object, region))

    def _few_real(self, reference: str, object: str, region: str) -> str:
        return (f"{reference}: {object} in {region} has fewer than k+2={self.bench.options.nearest_k + 2} real images; "
                "no manifold")

    @indicator("share")
    def object_region_precision(self, reference: str, template: str, object: str, region: str) -> Indicator:
        s = self._object_region(reference, template, object, region)
        if s is None:
            return Indicator(math.nan, 0, "share", skip=self._few_real(reference, object, region))
        return self._group_indicator(s, "precision")

    @indicator("coverage", grows=True)
    def object_region_coverage(self, reference: str, template: str, object: str, region: str) -> Indicator:
        s = self._object_region(reference, template, object, region)
        if s is None:
            return Indicator(math.nan, 0, "coverage", grows=True, skip=self._few_real(reference, object, region))
        return self._group_indicator(s, "coverage")

    @indicator("worst")
    def worst_region_precision(self, reference: str, template: str, groups=None, total=None) -> Indicator:
        """The worst region's precision, judged as picked among the regions (Bonferroni)."""
        return self._worst_indicator(self.scores(reference, template).region, "precision", groups, total)

    @indicator("worst", grows=True)
    def worst_region_coverage(self, reference: str, template: str, groups=None, total=None) -> Indicator:
        return self._worst_indicator(self.scores(reference, template).region, "coverage", groups, total)

    def _object_worst(self, reference: str, template: str, object: str, metric: str, groups, total) -> Indicator:
        found = self._object_groups(reference, template, object)
        if not found:
            return Indicator(math.nan, 0, "worst", grows=metric == "coverage",
                             skip=f"{reference}: no region has enough real images of {object}")
        return self._worst_indicator(found, metric, groups, total)

    @indicator("worst")
    def object_worst_region_precision(self, reference: str, template: str, object: str, groups=None,
                                      total=None) -> Indicator:
        return self._object_worst(reference, template, object, "precision", groups, total)

    @indicator("worst", grows=True)
    def object_worst_region_coverage(self, reference: str, template: str, object: str, groups=None,
                                     total=None) -> Indicator:
        return self._object_worst(reference, template, object, "coverage", groups, total)

    @indicator("ratio")
    def region_disparity_precision(self, reference: str, template: str) -> Indicator:
        """Worst / best region precision, every ordered pair of regions counted (MOVER-R)."""
        return self._parity_indicator(self.scores(reference, template).region, "precision")

    @indicator("ratio", grows=True)
    def region_disparity_coverage(self, reference: str, template: str) -> Indicator:
        return self._parity_indicator(self.scores(reference, template).region, "coverage")

    @indicator("ratio", grows=True)
    def object_region_disparity_coverage(self, reference: str, template: str, object: str) -> Indicator:
        groups = self._object_groups(reference, template, object)
        if not groups:
            return Indicator(math.nan, 0, "ratio", grows=True,
                             skip=f"{reference}: no region has enough real images of {object}")
        return self._parity_indicator(groups, "coverage")

    @indicator("percentile", grows=True)
    def object_consistency(self, template: str, region: str | None) -> Indicator:
        """The 10th-percentile CLIP cosine of generated images and their object, averaged over objects (of
        ``region``'s prompts; all without a region); its expectation moves with the images: no early fail."""
        from t2i_fairness.metrics.consistency import object_consistency, object_percentiles
        from t2i_fairness.metrics.intervals import percentile_mean_interval

        scored = self.clipscores(template, region)
        by_object: dict[str, list[float]] = {}
        for s in scored:
            by_object.setdefault(s.object, []).append(s.score)
        return Indicator(object_consistency(by_object), len(scored), "percentile",
                         percentile_mean_interval(by_object, confidence=self._confidence()), grows=True,
                         details={"p10_by_object": object_percentiles(by_object),
                                  "images_by_object": {k: len(v) for k, v in by_object.items()}})


    def reference_agreement(self, region: str | None = None) -> list:
        """CLIP's object recognition on the reference sets' labelled real images (of ``region``; all without one), one
        :class:`~t2i_fairness.metrics.agreement.Judgement` per image: "Does the image show a bag?", yes where the
        image's own object is the closest of the run's object names, as the consistency gates ask CLIP, and every
        label yes (the set says what each image shows). A scorer that recognises one region's objects worse makes
        that region's consistency look worse: this measures it wherever a set labels objects."""
        def make() -> list:
            from t2i_fairness.metrics.agreement import Judgement
            from t2i_fairness.metrics.consistency import zero_shot_labels

            clip = self.bench.scorer("clip")
            objects = [o for o in self.bench.options.objects if o in GEODE_OBJECTS]
            names = [GEODE_OBJECTS[o] for o in objects]
            text = self.bench.text_features(clip, names)
            asked = "CLIP picks the closest of: " + " | ".join(repr(n) for n in names)
            out = []
            for name in self.reference_sets:
                feats = self.library.features(name, "clip")
                kept = [i for i, img in enumerate(feats.images) if img.record.object in objects]
                if not kept:
                    continue
                emb = feats.features[kept]
                # one name leaves CLIP no choice: every image is judged its own object
                picked = zero_shot_labels(emb, text) if len(names) > 1 else np.zeros(len(kept), int)
                for i, j in zip(kept, picked):
                    rec = feats.images[i].record
                    out.append(Judgement(feats.images[i].key, rec.path, f"Does the image show a {GEODE_OBJECTS[rec.object]}? "
                                         f"({asked})", rec.region, "test_object_consistency", objects[j] == rec.object,
                                         True))
            return out

        every = self._once(("reference_agreement",), make)
        return [j for j in every if region is None or j.group == region]

    @property
    def reference_sets(self):
        return self.library.sets

    def images(self, template: str, space: PromptSpace | None = None, region: str | None = None,
               object: str | None = None) -> list[PromptImages]:
        """The template's prompts with their images (``space`` defaults to the run's GeoDE objects),
        only those of the group of ``region`` / ``object`` when given."""
        return prompt_images(self.bench, template, space, region, object)

    def space(self, name: str) -> PromptSpace:
        """The prompt space of reference set ``name`` (its objects among the run's, its regions)."""
        return PromptSpace.from_reference(self.reference_sets[name], self.bench.options.objects)

    def requests(self, name: str | None, template: str, region: str | None = None, object: str | None = None,
                 own: bool = False):
        """The images a group of reference set ``name`` (``None``: the consistency indicator's GeoDE
        prompts) asks for: the same slice as :meth:`images`, nothing generated. ``own``: the group's own
        prompts even under set-scope de-duplication (what ``--t2i-dedupe-scope group`` asks for)."""
        space = None if name is None else self.space(name)
        if name is not None and self._set_scope() and not own:
            region, object = None, None  # set-scope dedupe: a group's rows depend on the whole template's images
            # (and, under --t2i-dedupe-scope templates, on the images of the templates pooled with it)
            from t2i_fairness.spine.plan import requests_of_calls

            return tuple(r for t in self._pool(template)
                         for r in requests_of_calls(prompt_calls(self.bench.options, t, space,
                                                                 look=look_of(self.bench))))
        from t2i_fairness.spine.plan import requests_of_calls

        return requests_of_calls(prompt_calls(self.bench.options, template, space, region, object,
                                              look=look_of(self.bench)))

    # -- Region and Object-Region indicators (4.2-4.3) ----------------------------------------------
    def scores(self, name: str, template: str) -> DigScores:
        """Precision and coverage of every region and object-region of reference set ``name``
        (each group computed on first access)."""
        return self._once(("scores", name, template), lambda: self._scores(name, template))

    def group_scores(self, name: str, template: str, object: str | None = None, region: str | None = None) -> list:
        """The groups a gate with these parameters reads, computed: one object-region, an object's
        regions, one region, or every region (the worst-region and disparity gates)."""
        sc = self.scores(name, template)
        if object is not None:
            keys = [k for k in sc.object_region if k[0] == object and (region is None or k[1] == region)]
            return [sc.object_region[k] for k in keys]
        return [sc.region[r] for r in sc.region if region is None or r == region]

    def reference_features(self, name: str) -> int:
        """Encode reference set ``name`` for the region gates (shared by every group); returns the count."""
        return len(self.library.features(name, "inception").features)

    def _group(self, m, fake: np.ndarray, group: str, n_generated: int | None = None) -> GroupScore:
        """One group's score and its ball membership; a group whose images are all duplicates (a collapsed
        region) scores coverage 0 rather than raising.
        """
        mode = "none" if n_generated is not None else fake_dedupe(self.bench.options)  # given: already de-duplicated
        return score_group(m, fake, dedupe=mode, bootstrap=True, device=self.bench.device, group=group,
                           n_generated=n_generated)

    def _scores(self, name: str, template: str) -> DigScores:
        o = self.bench.options
        ref = self.reference_sets[name]
        space = self.space(name)
        real = self.library.features(name, "inception")
        by_pair = ref.groups_by_object_region()
        pairs = [(obj, r) for (obj, r), records in by_pair.items()
                 if obj in space.objects and len(real.kept(records)) >= o.nearest_k + 2]  # smaller: reported by the test
        return DigScores(
            region=LazyGroups(ref.regions, lambda region: self._region(name, template, region)),
            object_region=LazyGroups(pairs, lambda key: self._score_object_region(name, template, *key)),
            truncation=template_truncation(self.bench, template, space, count=counted_truncation),
        )

    def _set_scope(self) -> bool:
        """Generated duplicates are looked for over all of a template's images before grouping (DIG In's
        ``get_features_inceptionv3.py``; ``--t2i-dedupe-scope set``): then every group's rows depend on
        the whole template, so a group reads (and a plan asks for) all of the template's images."""
        o = self.bench.options
        return o.dedupe_scope in ("set", "templates") and fake_dedupe(o) != "none"

    def _pool(self, template: str) -> tuple[str, ...]:
        """The templates de-duplicated together with ``template``'s: both under ``--t2i-dedupe-scope templates``
        (as DIG In's code does), else the template alone.
        """
        if self.bench.options.dedupe_scope == "templates" and template in REGIONS_PICKLE:
            return REGIONS_PICKLE
        return (template,)

    def _generated(self, name: str, template: str, by: str, region: str | None, object: str | None) -> dict:
        """``group_generated`` over the prompts of the group (:func:`group_prompts`):
        ``{group: (features, images before the set-scope dedupe or None)}``."""
        o = self.bench.options
        real = self.library.features(name, "inception")
        items = self.images(template, self.space(name), region, object)
        refs = [im for it in items for im in it.images]
        feats = self.bench.features(real.encoder, refs, desc=f"Inception {template}")
        row = {im.key: i for i, im in enumerate(refs)}
        pairs = [(it.prompt, [row[im.key] for im in it.images]) for it in items]
        alive = None
        if self._set_scope():
            # DIG In (get_features_inceptionv3.py): duplicates over all of the template's images, before grouping;
            # under --t2i-dedupe-scope templates over the images of {object} and {object} in {region} together
            labels = [it.prompt.region or "-" for it in items for _ in it.images]
            pool_feats = [feats]
            for other in self._pool(template):
                if other != template:
                    oitems = self.images(other, self.space(name))
                    others = [im for it in oitems for im in it.images]
                    labels += [it.prompt.region or "-" for it in oitems for _ in it.images]
                    pool_feats.append(self.bench.features(real.encoder, others, desc=f"Inception {other}"))
            pool_feats = [f for f in pool_feats if len(f)]
            pooled = np.concatenate(pool_feats) if pool_feats else None
            keep = dedupe_index(pooled, fake_dedupe(o), groups=labels) if pooled is not None else np.zeros(0, int)
            alive = np.zeros(len(refs), bool)
            alive[keep[keep < len(refs)]] = True
        groups = group_generated(pairs, template, self.reference_sets[name], by, o.seed)
        if alive is None:
            return {g: (feats[rows], None) for g, rows in groups.items()}
        return {g: (feats[[r for r in rows if alive[r]]], len(rows)) for g, rows in groups.items()}

    def _region(self, name: str, template: str, region: str) -> GroupScore:
        real = self.library.features(name, "inception")
        if template == "object" or self._set_scope():
            # every region samples its object mix from all {object} images (seeded per region); with set-scope
            # de-duplication every group's rows depend on the whole template's images
            fake = self._once(("template_groups", name, template, "region"),
                              lambda: self._generated(name, template, "region", None, None))
        else:
            fake = self._generated(name, template, "region", region, None)
        m = real.manifold(f"region:{region}", self.reference_sets[name].groups_by_region()[region])
        rows, n_generated = fake[region]
        return self._group(m, rows, region, n_generated)

    def _score_object_region(self, name: str, template: str, obj: str, region: str) -> GroupScore:
        real = self.library.features(name, "inception")
        if self._set_scope():
            fake = self._once(("template_groups", name, template, "object_region"),
                              lambda: self._generated(name, template, "object_region", None, None))
        else:
            fake = self._generated(name, template, "object_region", region, obj)
        m = real.manifold(f"object_region:{obj}:{region}", self.reference_sets[name].groups_by_object_region()[(obj, region)])
        rows, n_generated = fake[(obj, region)]
        return self._group(m, rows, f"{obj}/{region}", n_generated)

    # -- Object Consistency (4.4) ----------------------------------------------------------------------
    def clipscores(self, template: str, region: str | None = None) -> list[ScoredImage]:
        """One :class:`ScoredImage` per generated image: the raw cosine to the object name's CLIP embedding."""
        if region is not None and ("clipscores", template, None) in self._memo:
            return [s for s in self._memo[("clipscores", template, None)] if s.region == region]

        def make() -> list[ScoredImage]:
            from t2i_fairness.metrics.consistency import cosine_similarities

            clip = self.bench.scorer("clip")
            items = self.images(template, None, region)
            refs = [r for item in items for r in item.images]
            labels = [item.prompt for item in items for _ in item.images]
            image_emb = self.bench.features(clip, refs, desc=f"CLIP {template}")
            text_emb = self.bench.text_features(clip, [GEODE_OBJECTS[p.object] for p in labels])
            scores = np.asarray(cosine_similarities(image_emb, text_emb))
            return [ScoredImage(p.object, p.region, float(s), r) for p, s, r in zip(labels, scores, refs)]

        return self._once(("clipscores", template, region), make)


def needs(call, study: DigInStudy) -> list:
    """What a DIG In gate reads: a group and its images (every region when the gate names none); a consistency gate,
    also CLIP's recognition of the reference's labelled real images (its report)."""
    from t2i_fairness.spine.plan import Need

    p = call.params
    out = []
    if "reference" in p and "template" in p:
        name, template, obj, region = p["reference"], p["template"], p.get("object"), p.get("region")
        out.append(Need("reference_features", (name,), first=True))
        images = study.requests(name, template, region, obj)
        own = study.requests(name, template, region, obj, own=True) if study._set_scope() else images
        widened = ""
        if {(r.prompt, r.n) for r in own} != {(r.prompt, r.n) for r in images}:
            widened = ("set-scope de-duplication (--t2i-dedupe-scope set, DIG In's code) compares every generated image "
                       "with all of its template's images, so a gate of one region or object needs the whole template")
        out.append(Need("group_scores", (name, template, obj, region), images, widened=widened,
                        narrow=tuple(own) if widened else ()))
    elif "template" in p:
        template, region = p["template"], p.get("region")
        out.append(Need("reference_agreement", (), first=True))  # CLIP on the reference's labelled real images
        out.append(Need("clipscores", (template, region), study.requests(None, template, region)))
    return out
