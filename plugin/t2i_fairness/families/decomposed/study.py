"""The Decomposed-DIG study: masks, Obj-only / BG-only / Full ViT features, per-region manifolds and scores.

Plain Python over a :class:`~t2i_fairness.spine.workbench.Workbench`; the rules themselves (which
real images and classes count, how unsegmented generated images count, Table 1) are in
:mod:`t2i_fairness.families.decomposed.rules`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from t2i_fairness.families.base import Study, indicator
from t2i_fairness.gating.indicator import Indicator
from t2i_fairness.families.decomposed.options import DecomposedOptions
from t2i_fairness.families.decomposed.rules import SETUPS
from t2i_fairness.base.cache import content_key
from t2i_fairness.vocab.geode import GEODE_OBJECTS

DECOMPOSED_TEMPLATES = ("object_in_region", "regional_adjective")  # Table 1: Orig. and New
TEMPLATE_LABELS = {"object_in_region": "{object} in {region}", "regional_adjective": "{regional adjective} {object}"}


def object_words(code: str) -> str:
    return GEODE_OBJECTS.get(code, code.replace("_", " "))


@dataclass
class DecomposedReal:
    """A reference set's masks, features, segmentation bookkeeping and per-region manifolds."""

    items: list
    features: dict[str, np.ndarray]
    selection: object  # RealSelection
    manifolds: dict[tuple[str, str], tuple[object, np.ndarray]] = field(default_factory=dict)  # (region, setup) -> (manifold, rows)
    region_rows: dict[str, np.ndarray] = field(default_factory=dict)  # kept real rows per region


@dataclass
class DecomposedScores:
    """Decomposed-DIG of one template against one reference set."""

    template: str
    scores: dict[str, dict[str, object]]  # region -> setup -> SetupScore
    items: list
    features: dict[str, np.ndarray]
    groups: dict[str, np.ndarray]  # region -> generated rows (excluded classes removed)
    unsegmented: dict[str, int]  # region -> generated images without object segmentation
    dropped: dict[str, int]  # region -> generated images of excluded classes
    skipped: dict[str, str] = field(default_factory=dict)  # region -> why it has no scores
    real: DecomposedReal | None = field(default=None, repr=False)
    bg_short: dict[str, int] = field(default_factory=dict)  # region -> BG-only misses for too few background patches
    bg_unsegmented: str = "whole"  # how unsegmented generated images count in BG-only
    truncation: object = None  # the generator's truncation of the template's prompts (metrics.truncation.Truncation)
    _member: dict = field(default_factory=dict, repr=False)

    def membership(self, region: str, setup: str) -> np.ndarray:
        """bool (n_fake, n_real) of the region's sample total (see ``sample_membership``), computed once."""
        from t2i_fairness.families.decomposed.rules import sample_membership

        if (region, setup) not in self._member:
            m, _ = self.real.manifolds[(region, setup)]
            rows = self.groups[region]
            self._member[(region, setup)] = sample_membership(m, self.features[setup][rows], self.scores[region][setup])
        return self._member[(region, setup)]

    def per_region(self) -> dict:
        """setup -> region -> {"precision", "coverage"} for :func:`~t2i_fairness.families.decomposed.rules.summarize`."""
        return {s: {r: {"precision": sc[s].precision, "coverage": sc[s].coverage} for r, sc in self.scores.items()}
                for s in SETUPS}

    def report(self) -> dict:
        return {
            "template": self.template,
            "regions": {r: {s: sc[s].report() for s in SETUPS} for r, sc in self.scores.items()},
            "generated_without_object_segmentation": self.unsegmented,
            "unsegmented_in_bg_only": self.bg_unsegmented,
            "generated_below_bg_min_patches": self.bg_short,
            "generated_of_excluded_classes": self.dropped,
            "truncation": self.truncation.details() if self.truncation is not None else None,
            "skipped_regions": self.skipped,
        }


class DecomposedStudy(Study):
    """Decomposed-DIG on one model, over the session's workbench and the family's options."""

    def __init__(self, bench, options: DecomposedOptions):
        from t2i_fairness.references.library import ReferenceLibrary

        super().__init__(bench)
        self.options = options
        self.library = ReferenceLibrary.of(bench)

    def at_images(self, n: int) -> "DecomposedStudy":
        """This study on the first ``n`` images per prompt (a sequential look); the classes left out depend
        on the real images only, so a region's prompts are the same at every look.
        """
        return DecomposedStudy(self.bench.at_images(n), self.options)

    def planned_looks(self) -> tuple[list[int], str]:
        """``--t2i-sequential``'s planned looks: images per prompt in multiples of the batch size up to ``N``."""
        from t2i_fairness.metrics.sequential import round_sizes

        return (round_sizes(int(self.bench.planned_images_per_prompt), int(self.bench.factory.batch_size)),
                "images per prompt")

    # -- the gated indicators (each read by the gate test of its name: test_<method>) ---------------------
    def _confidence(self) -> float:
        return float(self.bench.options.confidence)

    def _scored(self, name: str, template: str, region: str | None = None):
        """The template's scores (the region's alone for a region's gate), or why a gate cannot be computed."""
        sc = self.scores(name, template, region)
        if region is not None and region not in sc.scores:
            return sc, f"{name}/{template}/{region}: {sc.skipped.get(region, 'no scores')}"
        if not sc.scores:
            return sc, f"{name}/{template}: no region has scores ({sc.skipped})"
        return sc, None

    def interval(self, sc: "DecomposedScores", region: str, setup: str, metric: str):
        """A region's interval over its generated images (the unit drawn; unsegmented ones stay in as
        misses): Wilson's for precision, the jackknife-Wilson interval for coverage."""
        from t2i_fairness.metrics.intervals import coverage_interval, precision_interval

        member = sc.membership(region, setup)
        if metric == "precision":
            return precision_interval(member, confidence=self._confidence())
        return coverage_interval(member, confidence=self._confidence())

    def _regions(self, sc, setup: str, metric: str) -> dict:
        return {r: self.interval(sc, r, setup, metric) for r in sc.scores}

    def _region_indicator(self, name: str, template: str, region: str, setup: str, metric: str) -> Indicator:
        kind, grows = ("share", False) if metric == "precision" else ("coverage", True)
        sc, why = self._scored(name, template, region)
        if why:
            return Indicator(float("nan"), 0, kind, grows=grows, undefined=why)
        s = sc.scores[region][setup]
        return Indicator(getattr(s, metric), s.n_fake if metric == "precision" else s.n_real, kind,
                         self.interval(sc, region, setup, metric), grows=grows,
                         details={"n_fake": s.n_fake, "n_used": s.n_used, "n_missing": s.n_missing, "n_real": s.n_real})

    @indicator("share")
    def obj_precision(self, reference: str, template: str, region: str) -> Indicator:
        """Generated objects of ``region`` are realistic (Obj-only precision, Sec. 3)."""
        return self._region_indicator(reference, template, region, "obj", "precision")

    @indicator("coverage", grows=True)
    def obj_coverage(self, reference: str, template: str, region: str) -> Indicator:
        return self._region_indicator(reference, template, region, "obj", "coverage")

    @indicator("share")
    def bg_precision(self, reference: str, template: str, region: str) -> Indicator:
        return self._region_indicator(reference, template, region, "bg", "precision")

    @indicator("coverage", grows=True)
    def bg_coverage(self, reference: str, template: str, region: str) -> Indicator:
        """Generated backgrounds of ``region`` are diverse (BG-only coverage, Sec. 3)."""
        return self._region_indicator(reference, template, region, "bg", "coverage")

    @indicator("worst", grows=True)
    def worst_region_bg_coverage(self, reference: str, template: str, groups=None, total=None) -> Indicator:
        """The worst region's background coverage, judged as picked among the regions (Bonferroni; ``groups``:
        only these regions, a sequential run's open ones, ``total`` the regions it was picked from)."""
        from t2i_fairness.metrics.evidence import worst_of

        sc, why = self._scored(reference, template)
        if why:
            return Indicator(float("nan"), 0, "worst", grows=True, undefined=why)
        values = {r: by["bg"].coverage for r, by in sc.scores.items()}
        regions = self._regions(sc, "bg", "coverage")
        if groups is not None:
            regions = {r: regions[r] for r in groups}
        picked = worst_of(regions, confidence=self._confidence(), total=total)
        worst = picked.worst_label
        return Indicator(picked.estimate, sc.scores[worst]["bg"].n_real, "worst", picked, grows=True,
                         details={"worst_region": worst, "by_region": values, "selected_from": picked.selection})

    @indicator("spread")
    def region_spread(self, reference: str, template: str, setup: str, metric: str) -> Indicator:
        """Best minus worst region (the paper finds backgrounds spread about 1.5-2x more than objects), every
        ordered pair of regions counted (MOVER); a spread of coverages moves with the images: no early fail."""
        from t2i_fairness.families.decomposed.rules import SETUP_NAMES, spread
        from t2i_fairness.metrics.evidence import pairs

        grows = metric == "coverage"
        sc, why = self._scored(reference, template)
        if why:
            return Indicator(float("nan"), 0, "spread", higher_is_better=False, grows=grows, undefined=why)
        values = {r: getattr(by[setup], metric) for r, by in sc.scores.items()}
        other = "obj" if setup == "bg" else "bg"
        best, worst = max(values, key=values.get), min(values, key=values.get)
        details = {"by_region": values, f"{other}_spread": spread({r: getattr(by[other], metric)
                                                                   for r, by in sc.scores.items()}),
                   "setup": SETUP_NAMES[setup], "best": best, "worst": worst}
        if len(values) < 2:
            return Indicator(float("nan"), 0, "spread", higher_is_better=False, grows=grows, details=details,
                             skip=f"{reference}/{template}: a spread needs two regions with scores; only {best} has them")
        ev = pairs(self._regions(sc, setup, metric), confidence=self._confidence())
        return Indicator(spread(values), len(values), "spread", ev, higher_is_better=False, grows=grows,
                         details={**details, "pairs_tested": ev.selection})

    @indicator("spread", grows=True)
    def template_improvement(self, reference: str) -> Indicator:
        """``{regional adjective} {object}`` minus ``{object} in {region}`` on worst-region BG-only coverage:
        each template's worst region counts its selection (WorstOf); the two templates' images are
        independent (MOVER)."""
        from t2i_fairness.metrics.evidence import combination, worst_of

        worst, picked = {}, {}
        for template in DECOMPOSED_TEMPLATES:
            sc, why = self._scored(reference, template)
            if why:
                return Indicator(float("nan"), 0, "spread", grows=True, undefined=why)
            values = {r: by["bg"].coverage for r, by in sc.scores.items()}
            region = min(values, key=values.get)
            worst[template] = (values[region], region, sc.scores[region]["bg"].n_real)
            picked[template] = worst_of(self._regions(sc, "bg", "coverage"), confidence=self._confidence())
        (old, old_region, n_old), (new, new_region, n_new) = (worst[t] for t in DECOMPOSED_TEMPLATES)
        ev = combination([picked[t] for t in reversed(DECOMPOSED_TEMPLATES)], [1.0, -1.0],
                         confidence=self._confidence(),
                         method="difference of two templates' worst regions (MOVER over worst-of limits)",
                         bounds=(-1.0, 1.0))
        return Indicator(new - old, min(n_old, n_new), "spread", ev, grows=True, details={
            "object_in_region": {"worst_bg_coverage": old, "worst_region": old_region},
            "regional_adjective": {"worst_bg_coverage": new, "worst_region": new_region}})

    @property
    def reference_sets(self):
        return self.library.sets

    # -- models ----------------------------------------------------------------------------------
    def models(self):
        """(ViT, MaskStore): the scorers' ViT-B/16 (tiny: small ViT) and LangSAM or ``--t2i-masks`` masks."""

        def make():
            from t2i_fairness.families.decomposed.masks import MaskStore

            masks = self.options.masks

            def folder_masks(profile, run):
                from t2i_fairness.models.segmenter import FolderMasks

                return FolderMasks(masks)

            vit = self.bench.scorer("decomposed_vit", build="vit")
            segmenter = self.bench.scorer("segmenter", build="segmenter" if masks is None else folder_masks)
            return vit, MaskStore(self.bench.cache, segmenter, self.bench.progress)

        return self._once(("models",), make)

    def _features(self, items, desc: str) -> dict[str, np.ndarray]:
        from t2i_fairness.families.decomposed.masks import decomposed_features

        vit, store = self.models()
        try:
            return decomposed_features(self.bench, vit, store, items, desc)
        except FileNotFoundError as exc:  # FolderMasks: a mask file is missing
            from t2i_fairness.errors import OptionError

            raise OptionError("--t2i-masks", str(exc)) from None

    # -- real side -------------------------------------------------------------------------------
    def fake_dedupe(self) -> str:
        """``--t2i-fake-dedupe``; ``auto`` is the fork's code: generated images are never de-duplicated."""
        mode = self.bench.options.fake_dedupe
        return "none" if mode == "auto" else mode

    def _manifold(self, ref, paths, setup, region, rows, feats, dedupe):
        from t2i_fairness.families.decomposed.masks import SetupEncoder
        from t2i_fairness.metrics.manifold import ReferenceManifold, dedupe_index
        from t2i_fairness.references.library import manifold_memo

        o = self.bench.options
        k = o.nearest_k
        keep = rows[dedupe_index(feats[rows], dedupe)]
        if keep.size < k + 2:
            return None
        vit, store = self.models()
        fingerprint = vit.fingerprint if setup == "full" else SetupEncoder(vit, setup, store).fingerprint
        key = content_key(reference=ref.fingerprint, encoder=fingerprint, group=f"decomposed:{region}:{setup}",
                          records=sorted(paths[i] for i in keep), k=k, dedupe=dedupe)
        m = manifold_memo(self.bench).get(key, lambda: ReferenceManifold.build(
            feats[keep], k, dedupe="none", device=self.bench.device, group=f"{ref.name}/{region}/{setup}"))
        return m, keep

    def real(self, name: str) -> DecomposedReal:
        """The real side of reference set ``name``: masks and features cached, radii cached."""

        def make() -> DecomposedReal:
            from t2i_fairness.families.decomposed.masks import background_patch_counts, reference_items
            from t2i_fairness.families.decomposed.rules import has_features, select_real
            from t2i_fairness.metrics.manifold import dedupe_index
            from t2i_fairness.references.library import reference_images

            o = self.bench.options
            ref = self.reference_sets[name]
            items = reference_items(ref, reference_images(ref), object_words)
            paths = [it.label for it in items]
            feats = self._features(items, f"reference {name}")
            n_min = self.options.bg_min_patches
            bg_patches = background_patch_counts(self.models()[0], self.models()[1], items) if n_min > 1 else None
            sel = select_real([it.object for it in items], has_features(feats["obj"]), has_features(feats["bg"]),
                              self.options.limit_text, bg_patches=bg_patches, min_bg_patches=n_min)
            real = DecomposedReal(items, feats, sel)
            regions = np.array([it.region for it in items], dtype=object)
            scope = o.dedupe_scope
            for setup in SETUPS:
                kept = np.flatnonzero(sel.keep_bg if setup == "bg" else sel.keep)
                if scope in ("set", "templates"):  # the fork: drop-all over the whole real set, before grouping
                    kept = kept[dedupe_index(feats[setup][kept], o.dedupe, groups=regions[kept])]
                for region in ref.regions:
                    rows = kept[regions[kept] == region]
                    built = self._manifold(ref, paths, setup, region, rows, feats[setup],
                                           "none" if scope in ("set", "templates") else o.dedupe)
                    if built is not None:
                        real.manifolds[(region, setup)] = built
            for region in ref.regions:
                real.region_rows[region] = np.flatnonzero(sel.keep & (regions == region))
            return real

        return self._once(("real", name), make)

    # -- generated side and scores ---------------------------------------------------------------
    def scores(self, name: str, template: str, region: str | None = None) -> DecomposedScores:
        """Obj-only, BG-only and Full precision/coverage per region of one template; with ``region``,
        of that region alone (its prompts only are generated, segmented and encoded), unless the
        whole template is already computed."""
        if region is not None and not self._set_scope():
            if ("scores", name, template) in self._memo:
                return self._memo[("scores", name, template)]
            return self._once(("scores", name, template, region), lambda: self._scores(name, template, region))
        return self._once(("scores", name, template), lambda: self._scores(name, template))

    def _set_scope(self) -> bool:
        """Generated duplicates looked for over the whole template before grouping (``--t2i-dedupe-scope set``
        with a ``--t2i-fake-dedupe`` other than ``none``): a region's rows then depend on every region's images."""
        # ("templates" is DIG In's cross-template pool of generated images; its fork de-duplicates none: as "set")
        return self.fake_dedupe() != "none" and self.bench.options.dedupe_scope in ("set", "templates")

    def requests(self, name: str, template: str, region: str | None = None, own: bool = False):
        """The images :meth:`scores` asks for with the same arguments (nothing generated); ``own``: the
        region's own prompts even under set-scope de-duplication."""
        from t2i_fairness.references.grouping import PromptSpace, look_of, prompt_calls
        from t2i_fairness.spine.plan import requests_of_calls

        space = PromptSpace.from_reference(self.reference_sets[name], self.bench.options.objects)
        return requests_of_calls(
            prompt_calls(self.bench.options, template, space, None if self._set_scope() and not own else region,
                         look=look_of(self.bench))
        )

    def _scores(self, name: str, template: str, only: str | None = None) -> DecomposedScores:
        from t2i_fairness.families.decomposed.masks import background_patch_counts, generated_items
        from t2i_fairness.families.decomposed.rules import background_misses, has_features, score_setup
        from t2i_fairness.metrics.manifold import dedupe_index
        from t2i_fairness.generators.tokens import counted_truncation
        from t2i_fairness.references.grouping import PromptSpace, group_generated, prompt_images, template_truncation

        o = self.bench.options
        ref = self.reference_sets[name]
        real = self.real(name)
        images = prompt_images(self.bench, template, PromptSpace.from_reference(ref, o.objects), only)
        items = generated_items(images, object_words)
        feats = dict(self._features(items, template))
        row = {it.key: i for i, it in enumerate(items)}
        pairs = [(p.prompt, [row[im.key] for im in p.images]) for p in images]
        excluded = set(real.selection.excluded_classes)
        has_obj = has_features(feats["obj"])
        n_min, unsegmented = self.options.bg_min_patches, self.options.bg_unsegmented
        bg_patches = background_patch_counts(self.models()[0], self.models()[1], items) if n_min > 1 and items else None
        miss = background_misses(has_obj, bg_patches, n_min, unsegmented)
        short = miss & has_obj  # misses for too few background patches (not for a missing segmentation)
        if miss.any():  # paper: any background patch counts and unsegmented images are used whole; fork: misses
            feats["bg"] = feats["bg"].copy()
            feats["bg"][miss] = np.nan
        mode = self.fake_dedupe()
        duplicates = {s: None for s in SETUPS}
        if self._set_scope():  # duplicates over the whole template, before grouping
            labels = np.array([it.region for it in items], dtype=object)
            of_kept = np.array([it.object not in excluded for it in items], dtype=bool)
            for setup in SETUPS:
                cand = np.flatnonzero(has_features(feats[setup]) & of_kept) if items else np.zeros(0, int)
                gone = np.zeros(len(items), bool)
                gone[cand] = True
                gone[cand[dedupe_index(feats[setup][cand], mode, groups=labels[cand])]] = False
                duplicates[setup] = gone
        out = DecomposedScores(template, {}, items, feats, {}, {}, {}, real=real, bg_unsegmented=unsegmented,
                               truncation=template_truncation(self.bench, template, PromptSpace.from_reference(ref, o.objects),
                                                                 count=counted_truncation))
        for region, rows in group_generated(pairs, template, ref, "region", o.seed).items():
            if only is not None and region != only:
                continue
            rows = np.asarray(rows, dtype=int)
            keep = np.array([items[i].object not in excluded for i in rows], dtype=bool)
            out.dropped[region] = int((~keep).sum())
            rows = rows[keep]
            out.groups[region] = rows
            out.unsegmented[region] = int((~has_obj[rows]).sum())
            out.bg_short[region] = int(short[rows].sum())
            missing = [s for s in SETUPS if (region, s) not in real.manifolds]
            if not rows.size or missing:
                n_real = real.region_rows[region].size
                out.skipped[region] = ("no generated image of a kept class" if not rows.size else
                                       f"{n_real} usable real images; a manifold needs k+2={o.nearest_k + 2}")
                continue
            out.scores[region] = {}
            for setup in SETUPS:
                m, _ = real.manifolds[(region, setup)]
                dup = duplicates[setup]
                out.scores[region][setup] = score_setup(
                    m, feats[setup][rows], dedupe="none" if dup is not None else mode, device=self.bench.device,
                    group=f"{name}/{region}/{setup}", duplicates=None if dup is None else dup[rows])
        return out

    # -- diagnostics (Sec. 4.3) ------------------------------------------------------------------
    def diagnostics(self, name: str, template: str) -> dict:
        """region -> (Diagnostics, real rows of the region)."""

        def make() -> dict:
            from t2i_fairness.families.decomposed.rules import diagnose

            real, scores = self.real(name), self.scores(name, template)
            out = {}
            for region, by_setup in scores.scores.items():
                region_rows = real.region_rows[region]
                col = {int(r): j for j, r in enumerate(region_rows)}
                member, present = {}, {}
                for setup in SETUPS:
                    _, kept = real.manifolds[(region, setup)]
                    inside = scores.membership(region, setup)[: by_setup[setup].n_used]
                    full = np.zeros((inside.shape[0], region_rows.size), bool)
                    cols = [col[int(r)] for r in kept]
                    full[:, cols] = inside
                    member[setup] = full
                    present[setup] = np.zeros(region_rows.size, bool)
                    present[setup][cols] = True
                bg_rows = scores.groups[region][by_setup["bg"].used]
                out[region] = (diagnose(member, present, bg_rows), region_rows)
            return out

        return self._once(("diagnostics", name, template), make)


def needs(call, study: DecomposedStudy) -> list:
    """What a Decomposed-DIG gate reads: the reference's masks and features (first), then one region
    of a template (``[ref-template-region]``), every region (``[ref-template]``, ``[ref-template-setup-metric]``)
    or both templates (``[ref]``)."""
    from t2i_fairness.spine.plan import Need

    p = call.params
    if "reference" not in p:
        return []
    name = p["reference"]
    out = [Need("real", (name,), first=True)]
    templates = [p["template"]] if "template" in p else list(DECOMPOSED_TEMPLATES)
    for template in templates:
        if call.test == "test_decomposed_diagnostics":
            out.append(Need("diagnostics", (name, template), study.requests(name, template)))
        elif p.get("region") is not None:
            images = study.requests(name, template, p["region"])
            own = study.requests(name, template, p["region"], own=True) if study._set_scope() else images
            wide = {(r.prompt, r.n) for r in own} != {(r.prompt, r.n) for r in images}
            out.append(Need("scores", (name, template, p["region"]), images, narrow=tuple(own) if wide else (),
                            widened="set-scope de-duplication (--t2i-dedupe-scope set) compares every generated image "
                                    "with all of its template's images, so a gate of one region needs the whole "
                                    "template" if wide else ""))
        else:
            out.append(Need("scores", (name, template), study.requests(name, template)))
    return out
