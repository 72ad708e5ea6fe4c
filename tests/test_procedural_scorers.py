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


# -- from the command line: canaries and a scorer bias, seen through the procedural scorers -------------------

def _cis_run(pytester, *extra):
    import json

    result = pytester.runpytest_subprocess(
        "fairness_tests/test_cis.py", "-p", "no:cacheprovider", "--t2i-model", "procedural", "--t2i-scorers",
        "procedural", "--t2i-no-progress", "--t2i-thresholds", str(pytester.path / "t.yaml"), "--t2i-cache-dir",
        str(pytester.path / "cache"), "--t2i-artifacts", str(pytester.path / "art"), *extra, timeout=900)
    records = {r["gate"]: r for r in json.loads((pytester.path / "art" / "run.json").read_text())["gates"]}
    return result, records


@pytest.fixture
def cis_suite(pytester):
    import shutil
    from pathlib import Path

    (pytester.path / "fairness_tests").mkdir()
    shutil.copy(Path(__file__).resolve().parents[1] / "fairness_tests" / "test_cis.py", pytester.path / "fairness_tests")
    return pytester


@pytest.mark.slow  # 64 prompts x 4 images at K = 4, the order test only
def test_drop_position_last_is_caught_by_the_order_test_at_64_prompts_per_k(cis_suite):
    sizes = ["--t2i-cis-k", "4", "--t2i-cis-prompts", "64", "--t2i-cis-images", "4", "-k", "order"]
    null, records = _cis_run(cis_suite, *sizes)
    assert records["test_cis_order_invariance"]["status"] == "pass", null.stdout.str()[-2000:]
    caught, records = _cis_run(cis_suite, *sizes, "--t2i-canary", "drop_position:last:1.0")
    order = records["test_cis_order_invariance"]
    assert order["status"] == "fail" and order["details"]["profile"][-1] == min(order["details"]["profile"])
    caught.stdout.fnmatch_lines(["canary drop_position:last:1.0 (position last): caught by 1 of 1 gate(s) of its slice*"])


def test_drop_component_is_caught_by_its_rate_floor_at_64_prompts_per_k_over_16_names(cis_suite):
    """With the paper's 998 names a component is named by about 3 of 64 prompts, too few for any test; a vocabulary
    of 16 (``--t2i-cis-components 16``) names each in about 56, and dropping one fails its rate floor, not the null."""
    sizes = ["--t2i-cis-components", "16", "--t2i-cis-prompts", "64", "-k", "rate_floor"]
    written, _ = _cis_run(cis_suite, *sizes, "--t2i-update-thresholds")
    assert written.ret == 0, written.stdout.str()[-2000:]
    written.stdout.fnmatch_lines(["*CIS: K=1,2,4,8; 64 prompts per K*; components drawn from 16 names (--t2i-cis-components)"])
    null, records = _cis_run(cis_suite, *sizes, "--t2i-seed", "1")
    assert records["test_cis_component_rate_floor"]["status"] == "pass", null.stdout.str()[-2000:]
    caught, records = _cis_run(cis_suite, *sizes, "--t2i-seed", "1", "--t2i-canary", "drop_component:wok")
    floor = records["test_cis_component_rate_floor"]
    assert floor["status"] == "fail" and floor["value"] == 0.0, caught.stdout.str()[-2000:]
    caught.stdout.fnmatch_lines(["canary drop_component:wok (component wok): caught by 1 of 1 gate(s) of its slice*"])


@pytest.mark.slow  # three runs of CIS_2 (32 prompts x 4 images), the images generated once
def test_a_scorer_bias_fails_the_scorer_only_gate_and_the_report_names_the_disagreement(cis_suite):
    sizes = ["--t2i-cis-k", "2", "--t2i-cis-prompts", "32", "--t2i-cis-images", "4", "-k", "test_cis and k2"]
    written, null = _cis_run(cis_suite, *sizes, "--t2i-update-thresholds")
    assert written.ret == 0 and null["test_cis[k2]"]["details"]["scorer"]["disagreement"] == 0.0
    biased, records = _cis_run(cis_suite, *sizes, "--t2i-procedural-miss", "*=0.6")  # the generator unchanged
    out = biased.stdout.str()
    assert "images: 0 generated" in out and records["test_cis[k2]"]["status"] == "fail", out[-3000:]
    assert records["test_cis[k2]"]["details"]["scorer"]["pooled_disagrees"] is True
    biased.stdout.fnmatch_lines(["test_cis[[]k2]: fail, resting on 256 clip judgements; it flips if the truth were * higher"
                                 "*; the scorer disagrees with the labels over the gate's images: it measures the scorer*",
                                 "*the scorer disagrees with the labels over every component pooled (below 0.9)*"])
    component = null_component(cis_suite)
    one, records = _cis_run(cis_suite, *sizes, "--t2i-procedural-miss", f"{component}=1")
    assert component in records["test_cis[k2]"]["details"]["scorer"]["disagreeing"]
    one.stdout.fnmatch_lines([f"the scorer disagrees with the labels for {component}: sensitivity 0.00 *"])


def null_component(pytester) -> str:
    """The component the K = 2 prompts name most often (the first such)."""
    import json
    from collections import Counter

    prompts = json.loads(next((pytester.path / "art").rglob("cis_k2.json")).read_text())["prompts"]
    return Counter(c for p in prompts for c in p["components"]).most_common(1)[0][0]


@pytest.mark.slow  # one word-level word (6 images per distribution) under a canary
def test_word_level_group_judgements_are_scored_against_the_labels_per_group(pytester):
    import json
    import shutil
    from pathlib import Path

    (pytester.path / "fairness_tests").mkdir()
    shutil.copy(Path(__file__).resolve().parents[1] / "fairness_tests" / "test_word_influence.py",
                pytester.path / "fairness_tests")
    result = pytester.runpytest_subprocess(
        "fairness_tests/test_word_influence.py", "-p", "no:cacheprovider", "-k", "test_word_influence and doctor",
        "--t2i-model", "procedural", "--t2i-scorers", "procedural", "--t2i-no-progress", "--t2i-canary",
        "shift_group_share:doctor:female=0.5", "--t2i-procedural-miss", "female=0.5",
        "--t2i-artifacts", str(pytester.path / "art"), "--t2i-cache-dir", str(pytester.path / "c"), timeout=900)
    gates = {r["gate"]: r for r in json.loads((pytester.path / "art" / "run.json").read_text())["gates"]}
    female = gates["test_word_influence[doctor-female]"]["details"]["scorer"]
    # labelled: the canary's images of 'a photo of a female' that show one; half of them the scorer misses and
    # then guesses among the two groups: sensitivity about 0.75
    assert female["labels"] > 0 and female["focus"]["positives"] == female["labels"]  # each one shows a female
    assert female["focus"]["sensitivity"] < 1.0 and "female" in female["disagreeing"]
    result.stdout.fnmatch_lines(["*the scorer disagrees with the labels for female: sensitivity *"])


def test_the_component_vocabulary_option_draws_n_names_once_or_reads_a_file_and_names_its_errors(tmp_path):
    from t2i_fairness.errors import OptionError
    from t2i_fairness.families import FAMILIES
    from t2i_fairness.families.cis.options import components_label
    from t2i_fairness.metrics.cis import imagenet_classnames
    from t2i_fairness.spine.options import resolve_options

    def cis(**given):
        flags = {"--t2i-reference": [], **{f"--t2i-cis-{k.replace('_', '-')}": v for k, v in given.items()}}
        return resolve_options(flags.get, families=FAMILIES, invocation_dir=tmp_path).family("cis")

    assert cis().components is None and components_label(None) == "imagenet-cis-prototype"
    sixteen = cis(components="16").components
    assert len(sixteen) == 16 and set(sixteen) <= set(imagenet_classnames()) and "wok" in sixteen
    assert cis(components="16").components == sixteen  # one fixed draw, whatever the run's seed
    assert list(sixteen) == [n for n in imagenet_classnames() if n in sixteen]  # in the names' file order
    (tmp_path / "mine.txt").write_text("# our catalogue\nred mug\nblue kettle\n\nred mug\ngreen lamp\n")
    assert cis(components="mine.txt", k="1,2").components == ("red mug", "blue kettle", "green lamp")
    assert components_label(("a", "b")).startswith("2 names sha256:")
    for value, k, words in (("4", "1,2,4,8", "between the largest K (8) and 998"),
                            ("999", "1", "between the largest K (1) and 998"),
                            ("mine.txt", "1,4", "mine.txt: 3 distinct names; a prompt of K = 4 needs at least 4"),
                            ("nowhere.txt", "1", "neither a number of ImageNet names nor a readable text file")):
        with pytest.raises(OptionError, match="--t2i-cis-components") as info:
            cis(components=value, k=k)
        assert words in str(info.value)
    (tmp_path / "comma.txt").write_text("salt, pepper\nmug\n")
    with pytest.raises(OptionError, match="cannot hold a comma"):
        cis(components="comma.txt", k="1")
