"""Simulated stand-ins for the canaries the random-weight tiny scorers cannot see.

``bench/bench_gate_calibration.py`` plants canaries in the procedural world and reads the suite's
verdicts. Two of them move nothing the tiny scorers measure: ``degrade_region:africa:0.6`` (a random
Inception on 64 px images does not tell a blurred, noised, desaturated image from a clean one) and
``answer_language:hin_Deva`` (a random captioner, CLIP and BLIP-2 do not tell whose text an image
was drawn from). This module simulates the *per-image features* those scorers would give, under the
null (the same model re-run with fresh seeds) and under the planted regression, and feeds them
through the very code the suite's gates run:

* **DIG In region gates** (``test_region_precision`` / ``test_region_coverage``,
  ``fairness_tests/test_dig_in_region.py``): the real features of each region give a
  :class:`~t2i_fairness.metrics.manifold.ReferenceManifold` at the suite's ``--t2i-nearest-k``
  (3); each run's generated features are scored by
  :func:`t2i_fairness.families.dig_in.study.score_group` (the function ``DigInStudy`` scores every
  group with: ``precision_coverage`` plus the ball membership, after the generated rows' dedupe),
  and each gate's interval is the group's own (:meth:`GroupScore.interval`: Wilson's for precision,
  the jackknife-Wilson interval for coverage), with ``n`` as the gate test passes it.
* **IndicTTI gates** (``fairness_tests/test_indic_tti.py``: CLGC, LGC, SCWL, DWL per language,
  CLGC(l) / CLGC(English) and SCAL(English, l) per non-English language): a subclass of
  :class:`t2i_fairness.families.indic_tti.study.IndicEvaluation` whose only change is where the
  features come from (simulated arrays instead of images through BLIP-2, CLIP and the sentence
  encoder); its ``scores``, ``scal`` and ``interval`` (betting over the prompts' values or contrasts,
  ``metrics.evidence.unit_mean`` / ``unit_ratio``) are the suite's code, called as the gate tests call them.

Every value then goes through :func:`t2i_fairness.gating.gate.measure` and
:func:`t2i_fairness.gating.gate.judge` (the ``gate`` fixture's two steps) at the default options
(``significant`` mode, ``holm`` at alpha 0.05, inconclusive ``warn``). Bounds are written as the
update flow writes them (``judge`` with ``update_thresholds=True`` on an empty thresholds file:
``estimate - q_0.99 sqrt(2) se``, q normal or Student's t on the interval's degrees of freedom,
a share's se at least :func:`~t2i_fairness.gating.verdicts.share_se_floor`:
:func:`t2i_fairness.gating.verdicts.bound_for`) from one reference
run of the null model at its own seed, as the calibration bench writes its bounds at seed 1000. A
gate is held to the first step of Holm, ``alpha / m``, with ``m`` the run's gate count: 45 at the
smoke size (the calibration bench's reduced suite) and 475 at the realistic sizes (the full smoke
suite's count; a paper-size run selects more gates, so this ``m`` is if anything generous). The
run-end step-down can only add failures; it is not simulated (the other gates of a run are not).

The simulated worlds (parameters chosen before any run, from the papers where they say something,
round numbers where they do not; none was tuned on the results)
    DIG In (features, 16 dimensions). An object's features centre on ``mu_o ~ N(0, 3^2 I)``
    (objects far apart, as Inception separates object classes), each region's version of it on
    ``mu_o + N(0, I)`` (regional variation of an object), images of one object-region scatter
    ``N(0, I)`` around that. The real reference is one fixed draw (a reference set does not change
    between runs); each run draws the generated images afresh. **Null**: the model generates
    from the real distribution itself (the best case: a perfect model re-run with new seeds).
    **degrade_region:R:s** (the canary's blur + pixel noise + desaturation, by strength s): each
    generated feature ``x`` of region R becomes ``m_R + (1 - s)(x - m_R) + s N(0, I)``, ``m_R``
    the mean of R's real features: blur and desaturation remove detail and colour, so images of
    a region look more alike (features contract towards the region's average image), and pixel
    noise adds an isotropic component of the size of an object-region's own spread. ``s`` is a
    feature-space strength, not a pixel one: how the canary's pixel strength 0.6 maps onto a real
    Inception's features is not known here. The table also shows ``s = 0.2``.
    Other regions are generated untouched: their gates count false alarms.

    IndicTTI (unit concept vectors in 32 dimensions). Prompt p's English meaning is a concept
    ``E_p``, a text of prompt p in language l that the model does not understand a concept
    ``T_pl`` of its own (the procedural world draws such a text as its own hashed pattern). As the
    procedural world does, each image of (p, l) is "understood" with the language's probability
    ``u_l`` (English 1; Hindi 0.4916, Tamil 0.8102: the procedural generator's hashed rates) and
    then shows ``E_p``, else ``T_pl``. An image's features in each scorer's space are its concept
    plus isotropic noise of norm ``sigma``: sentence features of its caption with ``sigma`` 1.27
    (so an understood image's CLGC is 0.62: the paper's English CLGC, 58-65%, Table 2), CLIP
    features with ``sigma`` 2.96 (LGC 0.32: the paper's English LGC, 30-35%, Table 4), BLIP-2
    image features with ``sigma`` 1 (a round number: two images of one concept have cosine 0.5;
    the paper prints SCWL only as figures). Anchors: ``E_p`` in each space. The prompts are a fixed
    draw; each run draws the images afresh. **answer_language:hin_Deva**: every language's images
    are drawn as the Hindi text's (understood at Hindi's rate, else showing the Hindi text's
    concept), English's included; Hindi's own images are unchanged. The gates of the other
    languages (English, Tamil) are the slice; Hindi's own gates count false alarms; Hindi's
    English-relative gates pool the slice with Hindi and are counted apart ("aggregate"),
    as :meth:`t2i_fairness.canaries.CanarySlice.gate_role` classifies them.

Sizes
    DIG In smoke: the calibration bench's reduced suite (3 objects, 10 synthetic real images per
    object-region, 6 images per ``{object} in {region}`` prompt): 30 real and 18 generated images
    per region, 6 regions. Realistic: the paper balances GeoDE to 180 images per object-region over
    27 objects (``shared/papers/dig-in.txt``, Sections 3.1 and 3.3: 4,860 real images per region,
    generations matched); simulated here at **a third of it**, 9 objects x 180 = 1,620 real and 1,620 generated
    per region (exact k-NN ball membership at 4,860 x 4,860 costs 3 s per region on this machine).
    IndicTTI smoke: the bundled sample, 4 prompts x 6 images per language. Realistic: the paper
    (``shared/papers/indic-tti.txt``, Sections 3.1-3.2) generates 4 images per prompt for 1,000 prompts
    with the open models, 200 prompts with Midjourney, 50 with Dalle3, and reports a 40-prompt
    subset common to all; simulated at **40 x 4** and **200 x 4**.

Measured (``python bench/simulated_canaries.py --runs 200 --big-runs 60``, seed 0, this project's
2-core machine shared with the calibration benchmark, 2026-11-23, 393 s; the default ``--runs 100``
takes about 3 minutes there); ``m``: Holm's gate count; "(<= x)": one-sided 95% upper bound of the rate:

=========================  ==============================  =====  ============  =========  ============
canary (simulated)         size                              m    null runs     detected   false alarms
                                                                  failed                   (other slices)
=========================  ==============================  =====  ============  =========  ============
degrade_region:africa:0.6  30 real / 18 gen. per region     45    0/200 (<=.01) 199/200    0/200 (<=.01)
degrade_region:africa:0.2  30 real / 18 gen. per region     45    0/200 (<=.01) 0/200      0/200 (<=.01)
degrade_region:africa:0.6  1,620 / 1,620 (a third of the    475   0/60 (<=.05)  60/60      0/60 (<=.05)
                           paper's 4,860 per region)
degrade_region:africa:0.2  1,620 / 1,620                    475   0/60 (<=.05)  60/60      0/60 (<=.05)
answer_language:hin_Deva   4 prompts x 6 images (smoke)     45    0/100 (<=.03) 0/100      0/100 (<=.03)
answer_language:hin_Deva   40 x 4 (the paper's common)      475   0/100 (<=.03) 99/100     0/100 (<=.03)
answer_language:hin_Deva   200 x 4 (paper's Midjourney)     475   0/20 (<=.14)  20/20      0/20 (<=.14)
=========================  ==============================  =====  ============  =========  ============

At the smoke size the reference run gives two regions a precision of 18/18, whose Wilson standard
error at the estimate is 0. The update flow used to write ``min: 0.9999`` there (the estimate minus
the float margin) and the null then failed 197 of 200 runs on those two gates (found by this
simulation); it now takes the share's error at Agresti and Coull's adjusted share
(:func:`t2i_fairness.gating.verdicts.share_se_floor`), and no run fails them. Reading: a gross
degradation (strength 0.6) is caught at every size, a mild one (0.2: coverage 0.88 -> 0.56,
precision 0.78 -> 0.75) only at the realistic size (by the coverage gate); answer_language is
missed at the smoke size (4 prompts: no p below 2^-4, above the level) and caught in 99 of 100 runs at the
paper's 40-prompt subset and every run at 200 prompts, by the law-free tests over prompts (the answer_language
rows: 100, 100 and 20 runs with them; before them, with the t over prompts, 12/200, 200/200 and 60/60); DWL
does not move and CLGC(Tamil) / CLGC(English) rises (English drops with Tamil).

``simulated_rows(runs)`` gives the rows as ``label -> (runs with a gate of that kind failed, runs)``
for the calibration bench; ``quick=True`` runs fewer runs at the realistic sizes.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO / "plugin") not in sys.path:
    sys.path.insert(0, str(REPO / "plugin"))

from t2i_fairness.canaries import CanarySlice  # noqa: E402
from t2i_fairness.metrics.decisions import GateLevel  # noqa: E402
from t2i_fairness.gating.gate import judge, measure  # noqa: E402
from t2i_fairness.gating.thresholds import Bound, ThresholdFile  # noqa: E402
from t2i_fairness.spine.options import T2IOptions  # noqa: E402

__all__ = ["DIG_SIZES", "INDIC_SIZES", "DigSize", "IndicSize", "SimResult", "main", "simulated_answer_language",
           "simulated_degrade_region", "simulated_rows", "understanding"]

REGIONS = ("africa", "americas", "east_asia", "europe", "southeast_asia", "west_asia")
LANGUAGES = ("eng_Latn", "hin_Deva", "tam_Taml")  # the calibration bench's IndicTTI selection


# ---------------------------------------------------------------------------------- shared


@dataclass
class SimResult:
    """Per-run counts of failed gates, by the role of the gate for the canary.

    ``null[i]``: gates failed in null run i (every gate counts); ``slice[i]``, ``other[i]``,
    ``aggregate[i]``: gates of that role failed in planted run i; ``gates``: role -> gate count;
    ``inconclusive``: role -> inconclusive verdicts over all runs (``null`` for the null runs).
    ``values``: gate -> [null sum, planted sum, null count, planted count] of the gated value.
    ``se0_bounds``: gates whose bound was written from a reference estimate with standard error 0
    at the estimate (a share of exactly 0 or 1 under a score interval; the update flow then takes the
    share's error at Agresti and Coull's adjusted share, :func:`t2i_fairness.gating.verdicts.share_se_floor`,
    where it once wrote the estimate minus the float margin); ``null_se0[i]`` / ``other_se0[i]``:
    the failures of null run i / planted run i that fell on such gates (included in ``null`` /
    ``other``): the check that those bounds hold.
    """

    label: str
    null: list[int] = field(default_factory=list)
    slice: list[int] = field(default_factory=list)
    other: list[int] = field(default_factory=list)
    aggregate: list[int] = field(default_factory=list)
    gates: dict[str, int] = field(default_factory=dict)
    inconclusive: dict[str, int] = field(default_factory=dict)
    values: dict[str, list[float]] = field(default_factory=dict)
    se0_bounds: list[str] = field(default_factory=list)
    null_se0: list[int] = field(default_factory=list)
    other_se0: list[int] = field(default_factory=list)

    def rows(self, name: str) -> dict[str, tuple[int, int]]:
        """``label -> (runs with at least one failed gate, runs)``."""
        out = {f"{name} null (any gate failed), {self.label}": (sum(c > 0 for c in self.null), len(self.null)),
               f"{name} planted: slice gates failed, {self.label}": (sum(c > 0 for c in self.slice), len(self.slice)),
               f"{name} planted: false alarms on other slices, {self.label}":
                   (sum(c > 0 for c in self.other), len(self.other))}
        if self.gates.get("aggregate"):
            out[f"{name} planted: aggregate gates failed, {self.label}"] = (sum(c > 0 for c in self.aggregate),
                                                                            len(self.aggregate))
        return out


def _options(**changes) -> T2IOptions:
    return dataclasses.replace(T2IOptions(), **changes)


def _write_bounds(measurements: list, options: T2IOptions) -> ThresholdFile:
    """Bounds as the update flow writes them (``judge`` with ``--t2i-update-thresholds`` on an empty file).

    Example:
        >>> from t2i_fairness.gating.gate import measure
        >>> t = _write_bounds([measure("g", 0.8, n=100, interval=(0.7, 0.9))], T2IOptions())
        >>> t.gates["g"].direction, t.gates["g"].value, t.gates["g"].level
        ('min', 0.632142, 0.99)
    """
    update = _options(update_thresholds=True, bound_level=options.bound_level)
    empty = ThresholdFile(Path("simulated.yaml"), {})
    gates = {}
    for m in measurements:
        record, _ = judge(m, empty, {}, update)
        if record.status != "written":
            raise RuntimeError(f"simulated bound for {m.gate} not written: {record.message}")
        gates[m.gate] = Bound(m.direction, record.write, margin=record.write_margin, level=record.write_level)
    return ThresholdFile(Path("simulated.yaml"), gates)


def _se0(measurements: list) -> list[str]:
    return [m.gate for m in measurements if m.se_at(m.value) == 0]


def _tally(result: SimResult, role_of, measurements: list, thresholds: ThresholdFile, options: T2IOptions,
           family_size: int, planted: bool) -> None:
    counts = {"slice": 0, "other": 0, "aggregate": 0}
    null_fails = se0_fails = 0
    for m in measurements:
        record, _ = judge(m, thresholds, {}, options, level=GateLevel.of(options, family_size))
        role = role_of(m.gate)
        key = role if planted else "null"
        result.values.setdefault(m.gate, [0.0, 0.0, 0, 0])
        slot = 1 if planted else 0
        result.values[m.gate][slot] += m.value
        result.values[m.gate][slot + 2] += 1
        if record.status == "inconclusive":
            result.inconclusive[key] = result.inconclusive.get(key, 0) + 1
        if record.status == "fail":
            se0_fails += m.gate in result.se0_bounds and (not planted or role == "other")
            if planted:
                counts[role] += 1
            else:
                null_fails += 1
    if planted:
        result.slice.append(counts["slice"])
        result.other.append(counts["other"])
        result.aggregate.append(counts["aggregate"])
        result.other_se0.append(se0_fails)
    else:
        result.null.append(null_fails)
        result.null_se0.append(se0_fails)


# ---------------------------------------------------------------------------------- DIG In


@dataclass(frozen=True)
class DigSize:
    """A DIG In region-gate sample: objects per region, real and generated images per object-region,
    the run's gate count ``family_size`` (Holm's ``m``), and what it stands for."""

    objects: int
    real_per_group: int
    generated_per_group: int
    family_size: int
    note: str

    @property
    def label(self) -> str:
        return (f"{self.objects * self.real_per_group} real / {self.objects * self.generated_per_group} generated "
                f"per region ({self.note})")


DIG_SIZES = {
    "smoke": DigSize(3, 10, 6, 45, "the smoke size"),
    "realistic": DigSize(9, 180, 180, 475, "a third of the paper's 4,860"),
}
DIG_DIM = 16


@dataclass
class DigWorld:
    """The fixed real reference of one size: per region its features, object labels, manifold and mean."""

    size: DigSize
    centres: np.ndarray  # (regions, objects, dim): each object-region's centre
    real: dict
    manifolds: dict
    means: dict


def dig_world(size: DigSize, seed: int = 0, nearest_k: int | None = None) -> DigWorld:
    """The real reference: one fixed draw per (seed, size); manifolds at the suite's ``--t2i-nearest-k``."""
    from t2i_fairness.metrics.manifold import ReferenceManifold

    k = T2IOptions().nearest_k if nearest_k is None else nearest_k
    rng = np.random.default_rng([seed, 1])
    objects = 3.0 * rng.normal(size=(size.objects, DIG_DIM))
    centres = objects[None, :, :] + rng.normal(size=(len(REGIONS), size.objects, DIG_DIM))
    real, manifolds, means = {}, {}, {}
    for i, region in enumerate(REGIONS):
        x = (centres[i][:, None, :] + rng.normal(size=(size.objects, size.real_per_group, DIG_DIM))).reshape(-1, DIG_DIM)
        real[region] = x
        manifolds[region] = ReferenceManifold.build(x, nearest_k=k)
        means[region] = x.mean(axis=0)
    return DigWorld(size, centres, real, manifolds, means)


def dig_generated(world: DigWorld, region: str, rng: np.random.Generator, strength: float = 0.0) -> np.ndarray:
    """One run's generated features of ``region``: the real distribution, degraded by ``strength``."""
    i = REGIONS.index(region)
    n, g = world.size.objects, world.size.generated_per_group
    x = (world.centres[i][:, None, :] + rng.normal(size=(n, g, DIG_DIM))).reshape(-1, DIG_DIM)
    if strength:
        m = world.means[region]
        x = m + (1.0 - strength) * (x - m) + strength * rng.normal(size=x.shape)
    return x


def dig_measurements(world: DigWorld, fakes: dict, options: T2IOptions) -> list:
    """The region precision and coverage gates' measurements, as ``test_dig_in_region._gate_group`` makes them."""
    from t2i_fairness.families.dig_in.study import fake_dedupe, score_group

    out = []
    for region in REGIONS:
        s = score_group(world.manifolds[region], fakes[region], dedupe=fake_dedupe(options), group=region)
        for metric in ("precision", "coverage"):
            value = getattr(s, metric)
            if math.isnan(value):
                raise RuntimeError(f"simulated {metric} of {region} is undefined: {s.note}")
            out.append(measure(f"test_region_{metric}[synthetic-object_in_region-{region}]", value,
                               n=s.n_fake if metric == "precision" else s.n_real,
                               interval=s.interval(metric, options.confidence), confidence=options.confidence))
    return out


def simulated_degrade_region(runs: int, size: DigSize, strengths: tuple[float, ...] = (0.6,), region: str = "africa",
                             seed: int = 0) -> list[SimResult]:
    """``runs`` null runs, and ``runs`` runs with ``region`` degraded at each strength, against bounds
    written from a reference run of the null model; the strengths share the null runs.

    Args:
        runs: runs of each kind.
        size: the sample (:data:`DIG_SIZES`).
        strengths: the degradation's feature-space strengths, each in (0, 1].
        region: the planted region.
        seed: seeds the world, the reference run and the runs.

    Returns:
        One :class:`SimResult` per strength (the same ``null`` counts in each).

    Example:
        >>> [r] = simulated_degrade_region(2, DIG_SIZES["smoke"])
        >>> len(r.null), len(r.slice), r.gates
        (2, 2, {'slice': 2, 'other': 10, 'aggregate': 0})
    """
    if not strengths or not all(0 < s <= 1 for s in strengths):
        raise ValueError(f"strengths must be in (0, 1], got {strengths!r}")
    options = T2IOptions()
    world = dig_world(size, seed)
    slice_ = CanarySlice("region", region)
    rng = np.random.default_rng([seed, 2])
    reference = dig_measurements(world, {r: dig_generated(world, r, rng) for r in REGIONS}, options)
    thresholds = _write_bounds(reference, options)
    results = [SimResult(f"{size.label}, strength {s:g}", se0_bounds=_se0(reference)) for s in strengths]
    for result in results:
        for gate in thresholds.gates:
            role = slice_.gate_role(gate)
            result.gates[role] = result.gates.get(role, 0) + 1
        result.gates.setdefault("aggregate", 0)
    for _ in range(runs):
        fakes = {r: dig_generated(world, r, rng) for r in REGIONS}
        measured = dig_measurements(world, fakes, options)
        for result in results:
            _tally(result, slice_.gate_role, measured, thresholds, options, size.family_size, planted=False)
    for strength, result in zip(strengths, results):
        for _ in range(runs):
            fakes = {r: dig_generated(world, r, rng, strength if r == region else 0.0) for r in REGIONS}
            _tally(result, slice_.gate_role, dig_measurements(world, fakes, options), thresholds, options,
                   size.family_size, planted=True)
    return results


# ---------------------------------------------------------------------------------- IndicTTI


def understanding(lang: str) -> float:
    """The procedural world's probability that a text in ``lang`` is understood (1 for English).

    The formula of :meth:`t2i_fairness.generators.procedural.ProceduralGenerator._text`.

    Example:
        >>> understanding("eng_Latn"), round(understanding("hin_Deva"), 4), round(understanding("tam_Taml"), 4)
        (1.0, 0.4916, 0.8102)
    """
    from t2i_fairness.generators.procedural import _stable_int
    from t2i_fairness.vocab.languages import ENGLISH

    if lang == ENGLISH:
        return 1.0
    return 0.35 + 0.6 * (_stable_int("understanding", lang) % 1000) / 1000


@dataclass(frozen=True)
class IndicSize:
    """An IndicTTI sample: prompts, images per prompt and language, the run's gate count, what it stands for."""

    prompts: int
    images: int
    family_size: int
    note: str

    @property
    def label(self) -> str:
        return f"{self.prompts} prompts x {self.images} images ({self.note})"


INDIC_SIZES = {
    "smoke": IndicSize(4, 6, 45, "the smoke size"),
    "common": IndicSize(40, 4, 475, "the paper's subset common to all models"),
    "midjourney": IndicSize(200, 4, 475, "the paper's Midjourney size"),
}
INDIC_DIM = 32
SIGMA = {"sentence": 1.27, "clip": 2.96, "image": 1.0}  # noise norms: CLGC 0.62, LGC 0.32, image pairs 0.5


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


@dataclass
class IndicWorld:
    """The fixed prompts: English concepts ``E`` (prompts, dim) and each language's own concepts ``T[l]``."""

    size: IndicSize
    english: np.ndarray
    own: dict


def indic_world(size: IndicSize, seed: int = 0) -> IndicWorld:
    rng = np.random.default_rng([seed, 3])
    english = _unit(rng.normal(size=(size.prompts, INDIC_DIM)))
    own = {lang: _unit(rng.normal(size=(size.prompts, INDIC_DIM))) for lang in LANGUAGES[1:]}
    return IndicWorld(size, english, own)


def indic_features(world: IndicWorld, rng: np.random.Generator, answer: str | None = None) -> dict:
    """One run's features: ``{space: {lang: (prompts, images, dim)}}`` for spaces sentence, clip, image.

    ``answer``: the canary's answering language (every language drawn as its text), or None.
    """
    p, n = world.size.prompts, world.size.images
    out: dict = {space: {} for space in SIGMA}
    for lang in LANGUAGES:
        drawn_as = lang if answer is None or lang == answer else answer
        u = understanding(drawn_as)
        understood = rng.random((p, n)) < u
        own = world.english if drawn_as == LANGUAGES[0] else world.own[drawn_as]
        concept = np.where(understood[:, :, None], world.english[:, None, :], own[:, None, :])
        for space, sigma in SIGMA.items():
            out[space][lang] = concept + sigma / math.sqrt(INDIC_DIM) * rng.normal(size=(p, n, INDIC_DIM))
    return out


class _Bench:
    """What ``IndicEvaluation`` asks of a workbench for the simulated features: text features of the
    English prompts (the anchors ``E``) and of the captions (looked up by their simulated keys)."""

    def __init__(self, world: IndicWorld, texts: list[str], captions: dict):
        self.anchors = dict(zip(texts, world.english))
        self.captions = captions

    def text_features(self, encoder, texts):
        return np.stack([self.anchors[t] if t in self.anchors else self.captions[t] for t in texts])


class _Models:
    sentence = "simulated sentence encoder"
    image_text = "simulated CLIP"
    image_features = "simulated BLIP-2"


def _prompt_set(size: IndicSize):
    from t2i_fairness.vocab.multilingual import MultilingualPrompt, MultilingualPromptSet

    rows = []
    for k in range(size.prompts):
        english = f"prompt {k}"
        for lang in LANGUAGES:
            rows.append(MultilingualPrompt(f"p{k}", lang, english if lang == LANGUAGES[0] else f"{lang} {k}", english))
    return MultilingualPromptSet(tuple(rows))


def simulated_indic(world: IndicWorld, features: dict):
    """An :class:`IndicEvaluation` over simulated features: the suite's indicators and intervals, unchanged."""
    from t2i_fairness.families.indic_tti.study import IndicEvaluation

    class SimulatedIndic(IndicEvaluation):
        def image_features(self, lang):
            return features["image"][self._check(lang)]

        def image_text_features(self, lang):
            return features["clip"][self._check(lang)]

        def captions(self, lang):
            code = self._check(lang)
            return [[f"caption {code} {k} {r}" for r in range(world.size.images)] for k in range(world.size.prompts)]

    prompts = _prompt_set(world.size)
    captions = {f"caption {lang} {k} {r}": features["sentence"][lang][k, r]
                for lang in LANGUAGES for k in range(world.size.prompts) for r in range(world.size.images)}
    bench = _Bench(world, [f"prompt {k}" for k in range(world.size.prompts)], captions)
    return SimulatedIndic(bench, prompts, world.size.images, models=_Models())


def indic_measurements(indic, options: T2IOptions) -> list:
    """The IndicTTI gates' measurements, as ``fairness_tests/test_indic_tti.py`` makes them."""
    from t2i_fairness.vocab.languages import ENGLISH, lang_slug

    conf = options.confidence
    out = []
    for lang in LANGUAGES:
        s = indic.scores(lang)
        slug = lang_slug(lang)
        for metric in ("clgc", "lgc", "scwl", "dwl"):
            out.append(measure(f"test_{metric}[{slug}]", getattr(s, metric), n=s.n,
                               interval=indic.interval(lang, metric, conf), confidence=conf))
    english = indic.scores(ENGLISH)
    for lang in LANGUAGES[1:]:
        s, slug = indic.scores(lang), lang_slug(lang)
        if english.clgc <= 0:
            raise RuntimeError(f"simulated CLGC({ENGLISH}) = {english.clgc} <= 0: the ratio gate is undefined")
        out.append(measure(f"test_clgc_vs_english[{slug}]", s.clgc / english.clgc, n=s.n,
                           interval=indic.interval(lang, "clgc_ratio", conf), confidence=conf))
        out.append(measure(f"test_scal_with_english[{slug}]", indic.scal(ENGLISH, lang), n=s.n,
                           interval=indic.interval(lang, "scal", conf), confidence=conf))
    return out


def simulated_answer_language(runs: int, size: IndicSize, answer: str = "hin_Deva", seed: int = 0) -> SimResult:
    """``runs`` null runs and ``runs`` runs with every language answered in ``answer``, against bounds
    from a reference run.

    Args:
        runs: runs of each kind.
        size: the sample (:data:`INDIC_SIZES`).
        answer: the answering language (one of :data:`LANGUAGES` but English).
        seed: seeds the prompts, the reference run and the runs.

    Example:
        >>> r = simulated_answer_language(2, INDIC_SIZES["smoke"])
        >>> len(r.null), len(r.slice), sorted(r.gates.items())
        (2, 2, [('aggregate', 2), ('other', 4), ('slice', 10)])
    """
    if answer not in LANGUAGES[1:]:
        raise ValueError(f"answer must be one of {list(LANGUAGES[1:])}, got {answer!r}")
    options = T2IOptions()
    world = indic_world(size, seed)
    slice_ = CanarySlice("language", answer)
    rng = np.random.default_rng([seed, 4])
    reference = indic_measurements(simulated_indic(world, indic_features(world, rng)), options)
    thresholds = _write_bounds(reference, options)
    result = SimResult(size.label, se0_bounds=_se0(reference))
    for gate in thresholds.gates:
        role = slice_.gate_role(gate)
        result.gates[role] = result.gates.get(role, 0) + 1
    for planted in (False, True):
        for _ in range(runs):
            feats = indic_features(world, rng, answer if planted else None)
            _tally(result, slice_.gate_role, indic_measurements(simulated_indic(world, feats), options), thresholds,
                   options, size.family_size, planted)
    return result


# ---------------------------------------------------------------------------------- the table


def simulated_results(runs: int, quick: bool = False, seed: int = 0,
                      big_runs: int | None = None) -> list[tuple[str, SimResult]]:
    """Every simulated experiment: ``(canary spec, result)``. The realistic DIG In size and IndicTTI's
    200 prompts run ``big_runs`` runs of each kind (default ``runs // 5``, at least 5; ``quick``: 3):
    they cost about a second a run on this machine; the other sizes ``runs``."""
    big = big_runs if big_runs is not None else 3 if quick else max(5, runs // 5)
    strengths = (0.6, 0.2)
    out = []
    for key, n in (("smoke", runs), ("realistic", big)):
        for strength, result in zip(strengths, simulated_degrade_region(n, DIG_SIZES[key], strengths, seed=seed)):
            out.append((f"degrade_region:africa:{strength:g}", result))
    for key in INDIC_SIZES:
        n = big if key == "midjourney" else runs
        out.append(("answer_language:hin_Deva", simulated_answer_language(n, INDIC_SIZES[key], seed=seed)))
    return out


def simulated_rows(runs: int, quick: bool = False, seed: int = 0, big_runs: int | None = None) -> dict[str, tuple[int, int]]:
    """The calibration bench's rows: ``label -> (runs with a gate of that kind failed, runs)``.

    Labels name the canary, the kind (null: any gate; planted: the slice's gates, the other
    slices' gates = false alarms, aggregates; rows leaving out gates whose bound was written at
    se 0, when there are any) and the size.

    Args:
        runs: null and planted runs per row at the cheap sizes.
        quick: 3 runs at the two costly sizes (a smoke check of the script).
        seed: seeds every world and run.
        big_runs: runs at the two costly sizes (realistic DIG In, 200 prompts); default ``runs // 5``.

    Example (one result's rows; ``simulated_rows(200)`` takes a few minutes):
        >>> r = SimResult("4 prompts x 6 images", null=[0, 0], slice=[3, 0], other=[0, 1], gates={"slice": 10})
        >>> for label, counts in r.rows("answer_language:hin_Deva (simulated)").items():
        ...     print(label, counts)
        answer_language:hin_Deva (simulated) null (any gate failed), 4 prompts x 6 images (0, 2)
        answer_language:hin_Deva (simulated) planted: slice gates failed, 4 prompts x 6 images (1, 2)
        answer_language:hin_Deva (simulated) planted: false alarms on other slices, 4 prompts x 6 images (1, 2)
    """
    rows: dict[str, tuple[int, int]] = {}
    for spec, result in simulated_results(runs, quick, seed, big_runs):
        rows.update(result.rows(f"{spec} (simulated)"))
    return rows


def upper95(hits: int, n: int) -> float:
    """One-sided 95% Clopper-Pearson upper bound of a rate seen ``hits`` times in ``n`` runs.

    Example:
        >>> round(upper95(0, 20), 3), round(upper95(0, 100), 3)
        (0.139, 0.03)
    """
    from scipy.stats import beta

    return 1.0 if hits >= n else float(beta.ppf(0.95, hits + 1, n - hits))


def _rate(hits: int, n: int, bound: bool = False) -> str:
    text = f"{hits}/{n} = {hits / max(n, 1):.2f}"
    return f"{text} (<= {upper95(hits, n):.2f})" if bound else text


def table(results: list[tuple[str, SimResult]]) -> list[str]:
    """The printed table's lines (one row per experiment, then the slice gates' mean values)."""
    lines = [f"{'canary (simulated)':<26} {'size':<66} {'m':>4}  {'null: runs failed':<26} {'detected':<15} "
             f"{'false alarms':<26} {'slice gates failed/run'}"]
    notes = []
    for spec, r in results:
        size = r.label.split(", strength")[0]
        m = 45 if "smoke" in size else 475
        null = sum(c > 0 for c in r.null)
        det = sum(c > 0 for c in r.slice)
        fa = sum(c > 0 for c in r.other)
        lines.append(f"{spec:<26} {size:<66} {m:>4}  {_rate(null, len(r.null), True):<26} {_rate(det, len(r.slice)):<15} "
                     f"{_rate(fa, len(r.other), True):<26} {sum(r.slice) / max(1, len(r.slice)):.2f} of {r.gates.get('slice', 0)}")
        if r.se0_bounds:
            notes.append(f"  {size}: {len(r.se0_bounds)} bound(s) written from an estimate with se 0 "
                         f"({', '.join(g.split('[')[0].removeprefix('test_') + '[' + g.split('-')[-1] for g in r.se0_bounds)});"
                         f" runs failing one of them: null {_rate(sum(c > 0 for c in r.null_se0), len(r.null), True)}, "
                         f"planted ({spec}) {_rate(sum(c > 0 for c in r.other_se0), len(r.other), True)}")
    if notes:
        lines.append("bounds written from a share measured at exactly 0 or 1 (Wilson se 0 at the estimate; "
                     "the bound takes the share floor, verdicts.share_se_floor):")
        lines.extend(dict.fromkeys(notes))
    lines.append("mean gated value of the slice gates, null -> planted:")
    for spec, r in results:
        slice_ = CanarySlice("region", "africa") if spec.startswith("degrade") else CanarySlice("language", "hin_Deva")
        parts = [f"{g.split('[')[0].removeprefix('test_')}[{g.split('[')[1].split('-')[-1]} "
                 f"{a / max(na, 1):.3f}->{b / max(nb, 1):.3f}"
                 for g, (a, b, na, nb) in r.values.items() if slice_.gate_role(g) == "slice"]
        lines.append(f"  {spec}, {r.label.split(' (')[0]}: " + "; ".join(parts))
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100,
                    help="null and planted runs per row (the realistic DIG In size and 200 prompts: a fifth)")
    ap.add_argument("--quick", action="store_true", help="10 runs per row, 3 at the two costly sizes")
    ap.add_argument("--big-runs", type=int, default=None, help="runs at the two costly sizes (default: --runs / 5)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    runs = 10 if args.quick else args.runs
    t0 = time.perf_counter()
    results = simulated_results(runs, args.quick, args.seed, args.big_runs)
    print("== simulated canaries: simulated per-image features through the suite's metric, interval and decision code ==")
    print("bounds written by the update flow (level 0.99) from one null run; each gate at Holm's first step alpha/m, "
          "alpha 0.05; detected = a slice gate failed; false alarm = a gate of another slice failed; "
          "(<= x): one-sided 95% upper bound of the rate")
    for line in table(results):
        print(line)
    print(f"{time.perf_counter() - t0:.0f} s, seed {args.seed}; {time.strftime('%Y-%m-%d')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
