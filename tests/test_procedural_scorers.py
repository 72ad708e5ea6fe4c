"""The procedural world's own scorers (``--t2i-scorers procedural``): CLIP reads the truth each procedural
image carries, through the cache, with a miss rate set per concept; checked against the generator's own
plan (``ProceduralGenerator.cis_plan``), by brute force on small data."""

from __future__ import annotations

import numpy as np
import pytest

from t2i_fairness.base.cache import decode_png, encode_png
from t2i_fairness.base.truth import truth_of
from t2i_fairness.generators.procedural import ProceduralGenerator
from t2i_fairness.generators.procedural_scorer import ProceduralClip, parse_miss
from t2i_fairness.metrics.cis import detected_subsets, lookup_table, render_prompt, sample_fitting_prompts
from t2i_fairness.families.word_influence.study import zero_shot_labels

GEN = ProceduralGenerator()


def _through_cache(images):
    return [decode_png(encode_png(im)).convert("RGB") for im in images]


def _cis_detections(clip, k, prompts, n):
    out = []
    for comps in prompts:
        text = render_prompt(comps)
        images = _through_cache(GEN.generate([text] * n, list(range(n))))
        table = clip.encode_texts([t for t, _ in lookup_table(comps)])
        out.append((text, detected_subsets(clip.encode_images(images) @ table.T, comps)))
    return out


def test_the_truth_survives_the_cache_and_a_canary_image_carries_what_the_canary_drew():
    from t2i_fairness.families.cis.canaries import DropComponent

    text = "a photo of a crab, a macaw, and a steel drum."
    plain = _through_cache(GEN.generate([text], [3]))[0]
    assert truth_of(plain)["concepts"] == list(GEN.cis_plan(text, 3))
    dropped = _through_cache(DropComponent(GEN, "macaw").generate([text], [3]))[0]
    assert "macaw" not in truth_of(dropped)["concepts"]
    drawn = [truth_of(im)["concepts"] for im in _through_cache(GEN.generate(["bag in Africa"] * 200, range(200)))]
    objects, regions = zip(*drawn)  # the object and the region each image was drawn as
    assert 0.7 < objects.count("bag") / 200 < 0.98 and 0.5 < regions.count("africa") / 200 < 0.85  # miss 0.14, fidelity 0.65


def test_without_misses_the_cis_table_entry_picked_is_exactly_the_drawn_subset():
    clip = ProceduralClip()
    prompts = sample_fitting_prompts(4, 6, seed=[0, 4], fits=lambda c: clip.count_tokens(render_prompt(c)) <= 77)[0]
    for text, detected in _cis_detections(clip, 4, prompts, 6):
        assert [set(d) for d in detected] == [set(GEN.cis_plan(text, i)) for i in range(6)]


def test_a_set_miss_rate_misses_that_component_at_that_rate_and_no_other():
    clip = ProceduralClip("crab=0.4")
    text = render_prompt(("crab", "macaw"))
    images = _through_cache(GEN.generate([text] * 400, list(range(400))))
    shown = [set(GEN.cis_plan(text, i)) for i in range(400)]
    table = clip.encode_texts([t for t, _ in lookup_table(("crab", "macaw"))])
    seen = [set(d) for d in detected_subsets(clip.encode_images(images) @ table.T, ("crab", "macaw"))]
    crab = [("crab" in d) for d, s in zip(seen, shown) if "crab" in s]
    missed = 1 - np.mean(crab)
    assert abs(missed - 0.4) < 4 * np.sqrt(0.4 * 0.6 / len(crab)), (missed, len(crab))  # binomial, 4 sd
    assert all(("macaw" in d) == ("macaw" in s) for d, s in zip(seen, shown))  # the other component: exact
    assert all(d <= s for d, s in zip(seen, shown))  # it only misses: nothing seen that is not drawn


def test_a_word_level_image_without_a_group_gets_a_group_at_random_and_a_drawn_group_is_seen():
    clip = ProceduralClip()
    groups = clip.encode_texts(["a photo of a male", "a photo of a female"])
    plain = zero_shot_labels(clip.encode_images(GEN.generate(["a doctor at work"] * 400, range(400))), groups)
    assert abs(plain.mean() - 0.5) < 4 * np.sqrt(0.25 / 400)
    texts = ["a photo of a female"] * 100
    drawn = GEN.generate(texts, list(range(100)))
    labels = zero_shot_labels(clip.encode_images(drawn), groups)
    shows = np.array(["female" in truth_of(im)["concepts"] for im in drawn])
    assert shows.sum() > 50 and (labels[shows] == 1).all()


def test_miss_rates_parse_and_bad_ones_name_the_option():
    assert parse_miss("steel drum=0.5,*=0.1") == {"steel drum": 0.5, "*": 0.1}
    assert ProceduralClip("*=0.1").rate("anything") == 0.1 and ProceduralClip("a=1").rate("b") == 0.0
    for bad in ("macaw", "macaw=2", "=0.5", "macaw=x"):
        with pytest.raises(ValueError, match="--t2i-procedural-miss"):
            parse_miss(bad)
    assert ProceduralClip("macaw=0.5").fingerprint != ProceduralClip().fingerprint  # its features cached apart


def test_the_option_needs_the_procedural_scorers(pytester):
    pytester.makepyfile("def test_x(t2i):\n    pass\n")
    result = pytester.runpytest_subprocess("--t2i-procedural-miss", "macaw=0.5")
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*--t2i-procedural-miss: sets the procedural scorers' errors: add --t2i-scorers procedural*"])
