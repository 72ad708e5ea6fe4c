"""Issue 15, CIS findings 1, 2, 3 and 13: the paper and its prototype (zfoong/imggen_baseline).

Every expected value here is written out by hand from the paper's text or the prototype's rules
(cited per test), not taken from the module's output:

* prompts and lookup texts: ``Iclip.py`` lines 56-62 and ``wordGen.py`` lines 100-104 join the
  articled components with ``", "`` and the last with ``", and "`` from two components on;
  ``Iclip.py`` scores against ``"A photo of {}."``; ``template_prompts.txt`` (line 1) generates
  from ``"a photo of {}."``; the paper quotes its prompts with a capital "A" (section 4).
* table order: ``Iclip.py`` lines 41-67 list ``itertools.combinations`` of sizes 1..K, then
  append ``""`` with count 0, and take ``np.argmax`` (first maximum) of the softmax.
* class names: the prototype's ``imagenet_label.txt`` (998 lines).
* FID: torchmetrics' ``FrechetInceptionDistance`` (public feature-input path and
  ``_compute_fid``) and the ``sqrtm`` formula of pytorch-fid / clean-fid, on the same features.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from t2i_fairness.metrics.cis import (
    components_inclusion_score,
    detected_subsets,
    frechet_distance,
    frechet_inception_distance,
    gaussian_statistics,
    image_scores,
    imagenet_classnames,
    lookup_subsets,
    lookup_table,
    render_prompt,
)

# ----------------------------------------------------------------------------- finding 1: prompt text


def test_two_components_take_the_prototypes_comma():
    assert render_prompt(["crab", "macaw"]) == "A photo of a crab, and a macaw."
    assert render_prompt(["crab", "macaw"], style="prototype") == "a photo of a crab, and a macaw."
    assert render_prompt(["egg", "umbrella"]) == "A photo of an egg, and an umbrella."


def test_paper_prompts_are_reproduced_verbatim():
    # section 4: "the given prompt is 'A photo of an acoustic guitar, a balaclava ski mask, a sock, and a vase.'"
    assert (
        render_prompt(["acoustic guitar", "balaclava ski mask", "sock", "vase"])
        == "A photo of an acoustic guitar, a balaclava ski mask, a sock, and a vase."
    )
    # Figure 1 (the caption quotes it without the final period)
    assert render_prompt(["crab", "macaw", "steel drum", "red butterfly"]) == (
        "A photo of a crab, a macaw, a steel drum, and a red butterfly."
    )
    assert render_prompt(["crab"]) == "A photo of a crab."


def test_prototype_style_is_its_lower_case_generation_template():
    from t2i_fairness.metrics.cis import PROMPT_STYLES

    assert PROMPT_STYLES == {"paper": "A photo of ", "prototype": "a photo of "}
    assert render_prompt(["crab"], style="prototype") == "a photo of a crab."
    assert render_prompt(["crab", "macaw", "sock"], style="prototype") == "a photo of a crab, a macaw, and a sock."
    with pytest.raises(ValueError, match=r"`style` must be one of \['paper', 'prototype'\], but got 'Paper'"):
        render_prompt(["crab"], style="Paper")


def test_lookup_table_of_two_components_is_the_prototypes_word_list():
    # Iclip.input(T=["crab", "macaw"]) builds exactly these four texts, in this order, with these counts.
    assert lookup_table(["crab", "macaw"]) == [
        ("A photo of a crab.", 1),
        ("A photo of a macaw.", 1),
        ("A photo of a crab, and a macaw.", 2),
        ("", 0),
    ]


def test_lookup_table_of_three_components_written_out():
    assert lookup_table(["crab", "egg", "sock"]) == [
        ("A photo of a crab.", 1),
        ("A photo of an egg.", 1),
        ("A photo of a sock.", 1),
        ("A photo of a crab, and an egg.", 2),
        ("A photo of a crab, and a sock.", 2),
        ("A photo of an egg, and a sock.", 2),
        ("A photo of a crab, an egg, and a sock.", 3),
        ("", 0),
    ]
    assert lookup_subsets(["crab", "egg", "sock"])[-1] == ()


def test_case_does_not_change_clip_tokens():
    # why the two styles encode identically for CLIP text encoders (module docstring)
    open_clip = pytest.importorskip("open_clip")
    tok = open_clip.get_tokenizer("ViT-B-32")
    a = tok([render_prompt(["crab", "macaw"], style="paper")])
    b = tok([render_prompt(["crab", "macaw"], style="prototype")])
    assert bool((a == b).all())


# ----------------------------------------------------------------------------- finding 2: ties


def _row(components, logit_of_subset):
    """One image's logits in table order, given the logit of each subset of the components."""
    return [logit_of_subset[s] for s in lookup_subsets(components)]


def test_exact_tie_over_the_whole_table_scores_the_first_single_component():
    # prototype: np.argmax over [crab, macaw, crab+macaw, ""] with all equal -> index 0 -> 1 of 2 components
    table = lookup_table(["crab", "macaw"])
    counts = [c for _, c in table]
    logits = [[0.3, 0.3, 0.3, 0.3]]
    assert image_scores(logits, counts).tolist() == [0.5]
    assert detected_subsets(logits, ["crab", "macaw"]) == [("crab",)]


def test_tie_between_empty_string_and_full_prompt_goes_to_the_full_prompt():
    comps = ["crab", "macaw"]
    counts = [c for _, c in lookup_table(comps)]
    logit = {(): 0.31, ("crab", "macaw"): 0.31, ("crab",): 0.1, ("macaw",): 0.2}
    tie_full = _row(comps, logit)
    empty_wins = _row(comps, {**logit, (): 0.32})
    # image 1: tie "" vs full -> full (2/2 = 1); image 2: "" strictly highest -> 0; CIS = 1/2
    assert components_inclusion_score([tie_full, empty_wins], counts) == 0.5
    assert detected_subsets([tie_full], comps) == [("crab", "macaw")]


def test_tie_between_empty_string_and_one_component_at_k1():
    # prototype word_list for T=["crab"]: ["A photo of a crab.", ""]; equal logits -> index 0 -> S = 1
    counts = [c for _, c in lookup_table(["crab"])]
    assert components_inclusion_score([[0.25, 0.25]], counts) == 1.0


def test_fp16_cosines_tie_and_score_as_the_prototype():
    # two different float32 cosines that round to the same float16 value
    a, b = np.float32(0.30004), np.float32(0.30011)
    assert a != b and np.float16(a) == np.float16(b)
    table = lookup_table(["crab"])
    logits = np.array([[np.float16(a), np.float16(b)]], dtype=np.float16)  # ["A photo of a crab.", ""]
    assert image_scores(logits, [c for _, c in table]).tolist() == [1.0]


# ----------------------------------------------------------------------------- finding 3: class names

PROTOTYPE_OR_NAMES = {
    421: "baluster or handrail",
    478: "cardboard box or carton",
    692: "product packet or packaging",
    788: "shoji screen or room divider",
    840: "swim trunks or shorts",
}


def test_class_names_use_the_prototypes_wording():
    names = imagenet_classnames()
    assert isinstance(names, tuple) and len(names) == len(set(names)) == 998
    for index, name in PROTOTYPE_OR_NAMES.items():  # line numbers of imagenet_label.txt minus one
        assert names[index] == name
    assert not [n for n in names if "/" in n]
    assert names[:3] == ("tench", "goldfish", "great white shark") and names[-1] == "toilet paper"
    # names that contain "or" in both wordings are unchanged
    assert "red wolf or maned wolf" in names and "military hat (bearskin or shako)" in names


def test_class_name_file_is_open_clips_list_reworded():
    open_clip = pytest.importorskip("open_clip")
    rebuilt = [n.replace(" / ", " or ") for n in dict.fromkeys(open_clip.IMAGENET_CLASSNAMES)]
    assert list(imagenet_classnames()) == rebuilt


# ----------------------------------------------------------------------------- finding 13: FID


def _features(seed, n, d, shift=0.0, scale=1.0):
    rng = np.random.default_rng(seed)
    mix = rng.normal(size=(d, d)) / math.sqrt(d)
    return rng.normal(size=(n, d)) @ mix * scale + shift


def _sqrtm_fid(a, b):
    """The pytorch-fid / clean-fid formula: scipy ``sqrtm`` of ``S1 S2``, real part of the trace."""
    from scipy import linalg

    mu1, mu2 = a.mean(axis=0), b.mean(axis=0)
    s1, s2 = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
    covmean = linalg.sqrtm(s1 @ s2)
    return float(np.sum((mu1 - mu2) ** 2) + np.trace(s1) + np.trace(s2) - 2 * np.trace(covmean).real)


def _torchmetrics_fid(a, b):
    """torchmetrics' public path with a feature extractor that returns its input."""
    torch = pytest.importorskip("torch")
    fid_module = pytest.importorskip("torchmetrics.image.fid")

    class Identity(torch.nn.Module):
        def __init__(self, d):
            super().__init__()
            self.num_features = d

        def forward(self, x):
            return x

    metric = fid_module.FrechetInceptionDistance(feature=Identity(a.shape[1]))
    metric.update(torch.as_tensor(a, dtype=torch.float64), real=True)
    metric.update(torch.as_tensor(b, dtype=torch.float64), real=False)
    return float(metric.compute())


@pytest.mark.parametrize(
    "n_a, n_b, d, shift, scale",
    [(60, 50, 6, 0.5, 1.0), (200, 150, 16, -1.0, 2.0), (40, 40, 3, 0.0, 1.0)],
)
def test_fid_matches_torchmetrics_public_path_and_the_sqrtm_formula(n_a, n_b, d, shift, scale):
    a = _features(1, n_a, d)
    b = _features(2, n_b, d, shift=shift, scale=scale)
    ours = frechet_inception_distance(a, b)
    assert ours == pytest.approx(_torchmetrics_fid(a, b), rel=1e-6, abs=1e-9)
    assert ours == pytest.approx(_sqrtm_fid(a, b), rel=1e-6, abs=1e-9)


def test_frechet_distance_matches_torchmetrics_compute_fid_on_the_same_statistics():
    torch = pytest.importorskip("torch")
    fid_module = pytest.importorskip("torchmetrics.image.fid")
    a, b = _features(3, 80, 8), _features(4, 90, 8, shift=0.3, scale=1.5)
    (mu1, s1), (mu2, s2) = gaussian_statistics(a), gaussian_statistics(b)
    ref = fid_module._compute_fid(*(torch.as_tensor(x) for x in (mu1, s1, mu2, s2)))
    assert frechet_distance(mu1, s1, mu2, s2) == pytest.approx(float(ref), rel=1e-9)


def test_fid_with_fewer_images_than_dimensions_matches_torchmetrics():
    # singular covariances (rank 4 in 10 dimensions), as FID per K with few images has
    a, b = _features(5, 5, 10), _features(6, 5, 10, shift=0.2)
    assert frechet_inception_distance(a, b) == pytest.approx(_torchmetrics_fid(a, b), rel=1e-5, abs=1e-8)


def test_fid_hand_worked_cases_against_torchmetrics():
    # equal covariances: FID = |mu1 - mu2|^2.  Features {(0,0),(2,0),(0,2),(2,2)} and the same + (3, 4):
    a = np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 2.0], [2.0, 2.0]])
    b = a + [3.0, 4.0]
    assert frechet_inception_distance(a, b) == pytest.approx(25.0)
    assert _torchmetrics_fid(a, b) == pytest.approx(25.0)
    # 1-D: variances 1 and 4 (ddof=1): (sqrt(1) - sqrt(4))^2 = 1
    x = np.array([[-1.0], [1.0], [0.0]])  # mean 0, var (1 + 1 + 0) / 2 = 1
    y = 2 * x  # var 4
    assert frechet_inception_distance(x, y) == pytest.approx(1.0)
    assert _torchmetrics_fid(x, y) == pytest.approx(1.0)
