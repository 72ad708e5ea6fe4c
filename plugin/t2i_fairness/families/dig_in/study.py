"""The DIG In study: reference features, per-group manifolds, precision/coverage and CLIP consistency.

Plain Python over a :class:`~t2i_fairness.spine.workbench.Workbench` (no pytest): the ``dig_in``
fixture is one :class:`DigInStudy` per session, and each number is computed on first request, for
the group asked: ``scores(ref, template).region["africa"]`` generates and encodes Africa's prompts
only (for the ``{object}`` template, every ``{object}`` prompt, which every region samples from);
the worst-region and disparity gates read every region. :meth:`DigInStudy.requests` says which
images a group asks for, from the same prompt slices (``references.grouping``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Hashable, Iterator, Mapping

import numpy as np

from t2i_fairness.families.base import Study
from t2i_fairness.metrics.manifold import Membership, membership, precision_coverage
from t2i_fairness.references.grouping import PromptImages, PromptSpace, group_generated, prompt_images, prompt_requests
from t2i_fairness.references.library import ReferenceLibrary
from t2i_fairness.spine.generation import ImageRef
from t2i_fairness.vocab.geode import GEODE_OBJECTS


def disparity(values: Mapping[str, float]) -> float:
    """Best / worst ratio over groups (inf when the worst is 0 and the best is not; 1 when all are 0).

    Example:
        >>> disparity({"africa": 0.25, "europe": 0.5})
        2.0
    """
    vals = list(values.values())
    best, worst = max(vals), min(vals)
    if worst == 0:
        return 1.0 if best == 0 else math.inf
    return best / worst


@dataclass
class GroupScore:
    """Precision and coverage of one group, with the ball membership its bootstrap resamples."""

    precision: float
    coverage: float
    n_fake: int  # generated images of the group (before the dedupe of duplicated feature rows)
    n_real: int
    member: Membership | None = field(default=None, repr=False)  # None when intervals are off

    def precision_of(self, idx) -> float:
        return self.member.precision_of(idx)

    def coverage_of(self, idx) -> float:
        return self.member.coverage_of(idx)

    def report(self) -> dict:
        return {"precision": self.precision, "coverage": self.coverage, "n_fake": self.n_fake, "n_real": self.n_real}


class LazyGroups(Mapping):
    """Groups whose keys are known up front and whose scores are computed on first access, once.

    ``key in groups`` and iterating the keys compute nothing; ``groups[key]``, ``.items()`` and
    ``.values()`` compute what they touch.

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


@dataclass(frozen=True)
class ScoredImage:
    object: str
    region: str | None
    score: float
    image: ImageRef | None = field(default=None, compare=False, repr=False)  # for grids of the lowest scores


class DigInStudy(Study):
    """DIG In on one model.

    Args:
        bench: the session's workbench (generator, cache, scorers).
    """

    def __init__(self, bench):
        super().__init__(bench)
        self.library = ReferenceLibrary.of(bench)


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

    def requests(self, name: str | None, template: str, region: str | None = None, object: str | None = None):
        """The images a group of reference set ``name`` (``None``: the consistency indicator's GeoDE
        prompts) asks for: the same slice as :meth:`images`, nothing generated."""
        space = None if name is None else self.space(name)
        return prompt_requests(self.bench.options, template, space, region, object)

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

    def _group(self, m, fake: np.ndarray, group: str) -> GroupScore:
        o = self.bench.options
        pc = precision_coverage(m, fake, dedupe=o.dedupe, device=self.bench.device, group=group)
        member = membership(m, fake, dedupe=o.dedupe, group=group) if o.bootstrap else None
        return GroupScore(pc["precision"], pc["coverage"], len(fake), len(m.radii), member)

    def _scores(self, name: str, template: str) -> DigScores:
        o = self.bench.options
        ref = self.reference_sets[name]
        space = self.space(name)
        by_pair = ref.groups_by_object_region()
        pairs = [(obj, r) for (obj, r), records in by_pair.items()
                 if obj in space.objects and len(records) >= o.nearest_k + 2]  # smaller: reported by the test
        return DigScores(
            region=LazyGroups(ref.regions, lambda region: self._region(name, template, region)),
            object_region=LazyGroups(pairs, lambda key: self._object_region(name, template, *key)),
        )

    def _generated(self, name: str, template: str, by: str, region: str | None, object: str | None) -> dict:
        """``group_generated`` over the prompts of the group (:func:`group_prompts`): {group: features}."""
        o = self.bench.options
        real = self.library.features(name, "inception")
        items = self.images(template, self.space(name), region, object)
        refs = [im for it in items for im in it.images]
        feats = self.bench.features(real.encoder, refs, desc=f"Inception {template}")
        row = {im.key: i for i, im in enumerate(refs)}
        pairs = [(it.prompt, [row[im.key] for im in it.images]) for it in items]
        groups = group_generated(pairs, template, self.reference_sets[name], by, o.seed)
        return {g: feats[rows] for g, rows in groups.items()}

    def _region(self, name: str, template: str, region: str) -> GroupScore:
        real = self.library.features(name, "inception")
        if template == "object":  # every region samples its object mix from all {object} images (seeded per region)
            fake = self._once(("object_groups", name), lambda: self._generated(name, template, "region", None, None))
        else:
            fake = self._generated(name, template, "region", region, None)
        m = real.manifold(f"region:{region}", self.reference_sets[name].groups_by_region()[region])
        return self._group(m, fake[region], region)

    def _object_region(self, name: str, template: str, obj: str, region: str) -> GroupScore:
        real = self.library.features(name, "inception")
        fake = self._generated(name, template, "object_region", region, obj)[(obj, region)]
        m = real.manifold(f"object_region:{obj}:{region}", self.reference_sets[name].groups_by_object_region()[(obj, region)])
        return self._group(m, fake, f"{obj}/{region}")

    # -- Object Consistency (4.4) ----------------------------------------------------------------------
    def clipscores(self, template: str, region: str | None = None) -> list[ScoredImage]:
        """One :class:`ScoredImage` per generated image of the template (of ``region``'s prompts when given).

        The score is the raw cosine between the image's CLIP embedding and the CLIP embedding of the
        object name alone ("cooking pot"), as DIG In's consistency indicator uses it.
        """
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
    """What a DIG In gate reads (:class:`~t2i_fairness.spine.plan.Need`): a group and its images.

    ``test_object_consistency[template-region]`` reads the region's prompts (all of them without a
    region); a region gate ``[ref-template(-object)(-region)]`` the group its parameters name, every
    region when it names none (worst region, disparity).
    """
    from t2i_fairness.spine.plan import Need

    p = call.params
    out = []
    if "reference" in p and "template" in p:
        name, template, obj, region = p["reference"], p["template"], p.get("object"), p.get("region")
        out.append(Need("reference_features", (name,), first=True))
        out.append(Need("group_scores", (name, template, obj, region), study.requests(name, template, region, obj)))
    elif "template" in p:
        template, region = p["template"], p.get("region")
        out.append(Need("clipscores", (template, region), study.requests(None, template, region)))
    return out
