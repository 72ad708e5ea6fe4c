"""The procedural generator: a seeded world where the gates' statistics can be seen (issue #13, item 0)."""

from __future__ import annotations

import doctest
import hashlib
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from t2i_fairness.base.cache import encode_png
from t2i_fairness.references.grouping import PromptSpace, group_generated
from t2i_fairness.spine.generation import derive_seed
from t2i_fairness.generators import GenerationSettings, ModelLoadError, resolve_generator
from t2i_fairness.generators import procedural
from t2i_fairness.generators.procedural import (
    DEFAULT_WORLD,
    REGION_STYLES,
    ProceduralGenerator,
    cis_keep_probability,
    find_region,
    read_prompt,
)
from t2i_fairness.metrics.cis import render_prompt
from t2i_fairness.metrics.manifold import precision_coverage
from t2i_fairness.vocab.multilingual import load_smoke_sample
from t2i_fairness.spine.options import SMOKE_IMAGES_PER_PROMPT, SMOKE_OBJECTS
from t2i_fairness.vocab.geode import GEODE_OBJECTS, GEODE_REGIONS, TEMPLATES, geode_prompts
from t2i_fairness.references.sets import GEODE_REGION_SLUGS, open_image, render_synthetic, synthetic_reference
from t2i_fairness.references.library import SYNTHETIC_PER_GROUP

GEN = ProceduralGenerator()


def png(image) -> bytes:
    return encode_png(image.convert("RGB"))


def pixels(images) -> np.ndarray:
    """Raw pixel features: 16x16 RGB, flattened, in [0, 1]."""
    return np.stack([np.asarray(im.convert("RGB").resize((16, 16)), dtype=np.float64).ravel() / 255 for im in images])


def test_doctests_run():
    assert doctest.testmod(procedural, raise_on_error=False).failed == 0


# ------------------------------------------------------------------------------- parsing


@pytest.mark.parametrize("template", list(TEMPLATES))
def test_every_geode_prompt_reads_back_its_labels(template):
    prompts = geode_prompts(template)
    assert len(prompts) >= 27
    for p in prompts:
        r = read_prompt(p.text)
        assert (r.family, r.template, r.object, r.region, r.country) == ("dig_in", template, p.object, p.region, p.country), p.text


def test_dollarstreet_and_unknown_places():
    assert read_prompt("bag in Asia").region == "asia"
    assert read_prompt("toothbrush in the Americas").region == "americas"
    assert read_prompt("Asian toothbrush").region == "asia"
    r = read_prompt("bag in Atlantis")
    assert (r.family, r.template, r.object, r.region) == ("dig_in", "object_in_place", "bag", "atlantis")
    assert read_prompt("armchair").object == "armchair"  # a DollarStreet topic


def test_find_region_accepts_slug_name_adjective_and_country():
    for region in GEODE_REGIONS:
        for name in (region.slug, region.name, region.name.upper(), region.adjective, *region.countries):
            assert find_region(name) == region.slug, name
    assert find_region("Atlantis") is None
    assert find_region(3) is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([
    "crab", "macaw", "steel drum", "red butterfly", "acoustic guitar", "Otterhound", "mortar and pestle",
    "Black and Tan Coonhound", "sock", "umbrella", "eel", "St. Bernard", "jack-o'-lantern",
]), min_size=1, max_size=8, unique=True))
def test_cis_prompts_read_back_their_components(components):
    r = read_prompt(render_prompt(components))
    assert r.family == "cis"
    assert r.components == tuple(components)


def test_other_text_is_its_own_family():
    for text in ("a respected doctor at the hospital", "the ceo of a fortune 500 company",
                 "लकड़ी की बेंच पर बैठा एक कुत्ता", "a dog sitting on a wooden bench", ""):
        assert read_prompt(text).family == "text"
    with pytest.raises(TypeError, match="prompt must be a string"):
        read_prompt(None)


# ------------------------------------------------------------------------------- determinism


PROMPTS = [
    "bag", "bag in Africa", "cooking pot in Japan", "European stove", "stove in Asia",
    "a photo of a crab, a macaw, and a steel drum.", "a photo of a female",
    "a respected doctor at the hospital", "लकड़ी की बेंच पर बैठा एक कुत्ता",
]


@pytest.mark.parametrize("prompt", PROMPTS)
def test_same_prompt_and_seed_give_the_same_bytes_whatever_the_batch(prompt):
    seeds = [0, 1, 2**31 + 5, 77]
    alone = [png(GEN.generate([prompt], [s])[0]) for s in seeds]
    batch = [png(im) for im in GEN.generate([prompt] * len(seeds), seeds)]
    mixed = GEN.generate(["bag in Europe", prompt, "dog"], [9, seeds[2], 9])
    assert alone == batch
    assert png(mixed[1]) == alone[2]
    assert png(ProceduralGenerator().generate([prompt], [seeds[0]])[0]) == alone[0]  # a fresh instance


def test_the_same_bytes_in_another_process(subprocess_env):
    code = ("import hashlib; from t2i_fairness.base.cache import encode_png; "
            "from t2i_fairness.generators.procedural import ProceduralGenerator; "
            "ims = ProceduralGenerator().generate(['bag in Africa', 'a photo of a crab and a macaw.'], [3, 4]); "
            "print(' '.join(hashlib.sha256(encode_png(im)).hexdigest() for im in ims))")
    out = subprocess.run([sys.executable, "-c", code], env=subprocess_env, capture_output=True, text=True, check=True)
    here = GEN.generate(["bag in Africa", "a photo of a crab and a macaw."], [3, 4])
    assert out.stdout.split() == [hashlib.sha256(png(im)).hexdigest() for im in here]


@pytest.mark.parametrize("prompt", PROMPTS)
def test_images_differ_across_seeds(prompt):
    images = [png(im) for im in GEN.generate([prompt] * 20, list(range(20)))]
    assert len(set(images)) == 20


def test_fingerprint_names_version_world_size_and_translations():
    assert GEN.fingerprint == "procedural:v1:truth1:world1:64x64:synthetic-v1"
    assert ProceduralGenerator(world=2).fingerprint != GEN.fingerprint
    assert ProceduralGenerator((32, 48)).fingerprint.endswith("32x48:synthetic-v1")
    ml = ProceduralGenerator(multilingual=load_smoke_sample())
    assert ml.fingerprint.startswith(GEN.fingerprint + ":ml")
    assert ProceduralGenerator((32, 48)).generate(["bag"], [0])[0].size == (48, 32)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="height must be an integer >= 8"):
        ProceduralGenerator(4)
    with pytest.raises(ValueError, match="world must be an integer"):
        ProceduralGenerator(world="x")
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        ProceduralGenerator(batch_size=0)
    with pytest.raises(ValueError, match="got 2 prompts but 1 seeds"):
        GEN.generate(["a", "b"], [0])
    with pytest.raises(ValueError, match="seeds must be integers"):
        GEN.generate(["a"], [0.5])


# ------------------------------------------------------------------------------- a world that differs like a real one


def _nearest_centroid_accuracy(train: dict, test: dict) -> float:
    labels = list(train)
    centroids = np.stack([train[k].mean(0) for k in labels])
    hits = total = 0
    for k, feats in test.items():
        d = ((feats[:, None, :] - centroids[None]) ** 2).sum(-1)
        hits += int((np.array(labels)[d.argmin(1)] == k).sum())
        total += len(feats)
    return hits / total


def test_regions_and_objects_are_recognisable_from_pixels():
    """Generated images are classified to their region (and, within a region, to their object) by the
    nearest centroid of the synthetic reference far above chance, but not always (the world's misses)."""
    objs = list(SMOKE_OBJECTS)
    ref = {r: pixels([render_synthetic(o, r, i) for o in objs for i in range(10)]) for r in GEODE_REGION_SLUGS}
    region_names = {r.slug: r.name for r in GEODE_REGIONS}
    gen = {r: pixels([im for o in objs for im in GEN.generate([f"{GEODE_OBJECTS[o]} in {region_names[r]}"] * 10, range(10))])
           for r in GEODE_REGION_SLUGS}
    region_acc = _nearest_centroid_accuracy(ref, gen)
    assert 0.5 < region_acc < 1.0, region_acc  # chance: 1/6
    by_object_ref = {o: pixels([render_synthetic(o, "europe", i) for i in range(10)]) for o in objs}
    by_object_gen = {o: pixels(GEN.generate([f"{GEODE_OBJECTS[o]} in Europe"] * 20, range(20))) for o in objs}
    object_acc = _nearest_centroid_accuracy(by_object_ref, by_object_gen)
    assert 0.4 < object_acc < 1.0, object_acc


def test_the_model_knows_some_regions_better():
    """Fidelity: the share of an object_in_region image drawn in the region's own palette follows
    REGION_STYLES (Europe best, Africa worst), measured by the nearest reference centroid."""
    objs = list(SMOKE_OBJECTS)
    ref = {r: pixels([render_synthetic(o, r, i) for o in objs for i in range(10)]) for r in GEODE_REGION_SLUGS}
    names = {r.slug: r.name for r in GEODE_REGIONS}
    acc = {r: _nearest_centroid_accuracy(ref, {r: pixels([im for o in objs for im in GEN.generate(
        [f"{GEODE_OBJECTS[o]} in {names[r]}"] * 20, range(20))])}) for r in ("europe", "africa")}
    assert acc["europe"] > acc["africa"] + 0.1, acc
    assert REGION_STYLES["europe"].fidelity > REGION_STYLES["africa"].fidelity
    assert abs(sum(DEFAULT_WORLD.values()) - 1) < 1e-9


def _region_scores(template: str, base_seed: int) -> dict[str, tuple[float, float]]:
    """Per-region precision/coverage at the smoke defaults, raw pixel features (what the gate
    fixture computes, with pixels for Inception)."""
    ref = synthetic_reference(list(SMOKE_OBJECTS), None, per_group=SYNTHETIC_PER_GROUP, seed=0)
    rows = {rec: i for i, rec in enumerate(ref.records)}
    real = pixels([open_image(r) for r in ref.records])
    images, pairs = [], []
    for p in PromptSpace.from_reference(ref, SMOKE_OBJECTS).prompts(template):
        seeds = [derive_seed(p.text, i, base_seed) for i in range(SMOKE_IMAGES_PER_PROMPT)]
        pairs.append((p, list(range(len(images), len(images) + len(seeds)))))
        images += GEN.generate([p.text] * len(seeds), seeds)
    fake = pixels(images)
    out = {}
    for region, fake_rows in group_generated(pairs, template, ref, "region", base_seed).items():
        real_rows = [rows[r] for r in ref.groups_by_region()[region]]
        pc = precision_coverage(real[real_rows], fake[fake_rows], 3, dedupe="drop_all", device="cpu", group=region)
        out[region] = (pc["precision"], pc["coverage"])
    return out


@pytest.mark.parametrize("template", ["object_in_region", "regional_adjective"])
def test_region_precision_and_coverage_are_not_degenerate_and_move_with_the_seed(template):
    s0, s1 = _region_scores(template, 0), _region_scores(template, 1)
    assert set(s0) == set(GEODE_REGION_SLUGS)
    values = [v for scores in (s0, s1) for pc in scores.values() for v in pc]
    assert all(0.0 < v < 1.0 for v in values), (s0, s1)
    changed = sum(a != b for r in s0 for a, b in zip(s0[r], s1[r]))
    assert changed >= 8, (s0, s1)  # of 12 values; the tiny diffusers model changes almost none
    assert len({pc for pc in s0.values()}) == 6  # regions differ


# ------------------------------------------------------------------------------- the other families


def test_cis_images_lose_components_as_k_grows():
    """Each component is kept with cis_keep_probability(c, K) = 1 - 0.085 (K - 1) - penalty(c): the
    measured keep rate over 400 seeds matches it within 4 binomial standard errors, and falls with K."""
    names = ["crab", "macaw", "steel drum", "red butterfly", "sock", "umbrella", "eel", "vase"]
    n = 400
    rates = {}
    for k in (1, 2, 4, 8):
        prompt = render_prompt(names[:k])
        plans = [GEN.cis_plan(prompt, s) for s in range(n)]
        for c in names[:k]:
            p = cis_keep_probability(c, k)
            measured = sum(c in plan for plan in plans) / n
            assert abs(measured - p) <= 4 * np.sqrt(p * (1 - p) / n) + 1e-9, (k, c, measured, p)
        rates[k] = np.mean([len(plan) / k for plan in plans])
    assert rates[1] > rates[2] > rates[4] > rates[8], rates
    assert GEN.cis_plan("bag in Africa", 0) == ()
    # the plan is what the image shows: no component -> the plain grey background
    empty = [s for s in range(n) if not GEN.cis_plan(render_prompt(names), s)]
    assert empty and abs(np.asarray(GEN.generate([render_prompt(names)], [empty[0]])[0], dtype=float).mean() - 128) < 3


def test_translations_are_understood_with_a_per_language_probability():
    sample = load_smoke_sample()
    gen = ProceduralGenerator(multilingual=sample)
    hindi = sample.get("smoke-dog", "hin_Deva").text
    a = [png(im) for im in gen.generate([hindi] * 10, range(10))]
    b = [png(im) for im in GEN.generate([hindi] * 10, range(10))]
    assert a != b and len(set(a)) == 10
    assert [png(im) for im in gen.generate(["bag in Africa"], [3])] == [png(im) for im in GEN.generate(["bag in Africa"], [3])]


def test_resolve_generator_registers_procedural():
    src = resolve_generator("procedural", GenerationSettings(), "cpu", derive_seed)
    assert src.loaded and src.fingerprint.startswith("procedural:v1:truth1:world1:64x64:synthetic-v1:ml")
    assert (src.settings.height, src.settings.width, src.settings.batch_size) == (64, 64, 16)
    assert src.get().generate(["bag in Africa"], [0])[0].size == (64, 64)
    small = resolve_generator("procedural", GenerationSettings(height=32, width=40, batch_size=3), "cpu", derive_seed)
    assert small.get().batch_size == 3 and small.get().generate(["dog"], [0])[0].size == (40, 32)
    with pytest.raises(ModelLoadError, match=r"--t2i-model procedural: procedural generator: height must be an integer >= 8.*--t2i-height"):
        resolve_generator("procedural", GenerationSettings(height=4), "cpu", derive_seed)


def test_the_region_table_matches_digs_extra_regions():
    """procedural.REGIONS copies DollarStreet's Asia from dig.EXTRA_REGIONS (to import no paper's code)."""
    from t2i_fairness.references.grouping import EXTRA_REGIONS

    assert procedural.REGIONS == tuple(GEODE_REGIONS) + tuple(EXTRA_REGIONS.values())
