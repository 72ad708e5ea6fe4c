"""Tests of the Components Inclusion Score math against brute-force references written here."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from t2i_fairness.metrics.cis import (
    DEFAULT_KS,
    check_token_lengths,
    component_generation_rates,
    components_inclusion_score,
    degradation_slope,
    detected_subsets,
    extreme_components,
    frechet_distance,
    frechet_inception_distance,
    gaussian_statistics,
    image_scores,
    imagenet_classnames,
    inception_score,
    inception_score_splits,
    indefinite_article,
    lookup_subsets,
    lookup_table,
    order_invariance_test,
    order_invariance_test_by_component,
    render_prompt,
    sample_component_prompts,
    sample_fitting_prompts,
    sample_prompt_suite,
    shuffle_components,
    shuffled_prompts,
    tile_composite,
)

FAST = settings(max_examples=40, deadline=None)
POOL = [f"thing{i}" for i in range(30)] + ["acoustic guitar", "crab", "macaw", "egg", "umbrella"]
names = st.lists(st.sampled_from(POOL), min_size=1, max_size=6, unique=True)


# ----------------------------------------------------------------------------- brute-force references


def ref_table(components):
    """Every subset via bit masks, rendered independently of the module (prototype punctuation)."""
    k = len(components)
    out = {}
    for mask in range(2**k):
        subset = [components[i] for i in range(k) if mask >> i & 1]
        if not subset:
            out[""] = 0
            continue
        phrases = [("an " if c[0].lower() in "aeiou" else "a ") + c for c in subset]
        body = phrases[0] if len(phrases) == 1 else ", ".join(phrases[:-1]) + ", and " + phrases[-1]
        out["A photo of " + body + "."] = len(subset)
    return out


def ref_cis(logits, counts):
    """Paper Eq. 1-2 literally: softmax, argmax, L(.)/K, mean over images."""
    k = max(counts)
    total = 0.0
    for row in logits:
        e = [math.exp(v - max(row)) for v in row]
        probs = [v / sum(e) for v in e]
        best = max(range(len(probs)), key=lambda j: (probs[j], -j))  # first maximum
        total += counts[best] / k
    return total / len(logits)


def ref_inception_score(probs):
    probs = np.asarray(probs, dtype=float)
    n, c = probs.shape
    marginal = [sum(probs[i][j] for i in range(n)) / n for j in range(c)]
    kl_sum = 0.0
    for i in range(n):
        for j in range(c):
            if probs[i][j] > 0:
                kl_sum += probs[i][j] * math.log(probs[i][j] / marginal[j])
    return math.exp(kl_sum / n)


# ----------------------------------------------------------------------------- prompts


def test_render_prompt_follows_the_paper_template():
    assert render_prompt(["crab"]) == "A photo of a crab."
    assert render_prompt(["crab", "macaw"]) == "A photo of a crab, and a macaw."
    assert (
        render_prompt(["crab", "macaw", "steel drum", "red butterfly"])
        == "A photo of a crab, a macaw, a steel drum, and a red butterfly."
    )
    assert (
        render_prompt(["acoustic guitar", "balaclava ski mask", "sock", "vase"])
        == "A photo of an acoustic guitar, a balaclava ski mask, a sock, and a vase."
    )


@pytest.mark.parametrize(
    "word, article",
    [("egg", "an"), ("Otterhound", "an"), ("umbrella", "an"), ("Irish Setter", "an"), ("crab", "a"), ("yurt", "a")],
)
def test_article_is_chosen_by_first_letter(word, article):
    assert indefinite_article(word) == article


@pytest.mark.parametrize(
    "components, error, match",
    [
        ([], ValueError, "at least one component"),
        (["crab", "crab"], ValueError, r"must not repeat a component, but \['crab'\]"),
        (["crab", " "], ValueError, r"`components\[1\]` must be a non-empty string"),
        ("crab", TypeError, "not a single string"),
    ],
)
def test_render_prompt_rejects_bad_components(components, error, match):
    with pytest.raises(error, match=match):
        render_prompt(components)


@FAST
@given(st.integers(1, 8), st.integers(1, 20), st.integers(0, 2**32 - 1))
def test_sampled_prompts_are_distinct_components_from_the_pool_and_seeded(k, m, seed):
    prompts = sample_component_prompts(k, m, seed, classnames=POOL)
    assert len(prompts) == m
    for p in prompts:
        assert len(p) == k and len(set(p)) == k and set(p) <= set(POOL)
    assert prompts == sample_component_prompts(k, m, seed, classnames=POOL)


def test_sampling_uses_numpy_default_rng_as_documented():
    rng = np.random.default_rng(3)
    expected = [tuple(POOL[i] for i in rng.choice(len(POOL), size=4, replace=False)) for _ in range(5)]
    assert sample_component_prompts(4, 5, 3, classnames=POOL) == expected


def test_different_seeds_give_different_prompts():
    assert sample_component_prompts(4, 10, 0, classnames=POOL) != sample_component_prompts(4, 10, 1, classnames=POOL)


def test_duplicate_classnames_are_collapsed_so_prompts_never_repeat_a_component():
    pool = ["missile", "missile", "sock"]
    for seed in range(20):
        assert sorted(sample_component_prompts(2, 1, seed, classnames=pool)[0]) == ["missile", "sock"]


def test_default_pool_is_deduplicated_imagenet_names():
    names_ = imagenet_classnames()
    assert len(names_) == len(set(names_)) == 998
    prompts = sample_component_prompts(8, 3, seed=0)
    assert all(set(p) <= set(names_) for p in prompts)


@pytest.mark.parametrize(
    "args, error, match",
    [
        ((0, 1, 0), ValueError, "`k` must be an integer >= 1"),
        ((2, 0, 0), ValueError, "`m` must be an integer >= 1"),
        ((40, 1, 0), ValueError, r"`k` must be at most the number of distinct class names \(35\)"),
        ((2.0, 1, 0), TypeError, "`k`"),
        ((2, 1, None), TypeError, "`seed`"),
    ],
)
def test_sampling_errors(args, error, match):
    with pytest.raises(error, match=match):
        sample_component_prompts(*args, classnames=POOL)


def test_prompt_suite_defaults_and_per_k_independence():
    assert DEFAULT_KS == (1, 2, 4, 8)
    suite = sample_prompt_suite(5, seed=11, classnames=POOL)
    assert sorted(suite) == [1, 2, 4, 8]
    assert all(len(v) == 5 and all(len(p) == k for p in v) for k, v in suite.items())
    assert sample_prompt_suite(5, seed=11, ks=(4,), classnames=POOL)[4] == suite[4]
    with pytest.raises(ValueError, match="distinct"):
        sample_prompt_suite(5, seed=1, ks=(2, 2), classnames=POOL)


def test_check_token_lengths_names_the_offending_prompt():
    count = lambda t: len(t.split()) + 2  # noqa: E731 - stand-in tokenizer
    long = render_prompt([f"thing{i}" for i in range(40)])
    assert count(long) == 86  # 3 + 40 * 2 + "and" + 2 special tokens
    assert check_token_lengths(["a photo of a crab."], count) == [7]
    with pytest.raises(ValueError, match=r"text 1 'A photo of a thing0, .*' has 86 tokens, more than the limit of 77"):
        check_token_lengths(["a photo of a crab.", long], count)


# ----------------------------------------------------------------------------- lookup table


def test_k3_table_has_eight_entries_with_the_right_counts():
    table = lookup_table(["crab", "egg", "sock"])
    assert [c for _, c in table] == [1, 1, 1, 2, 2, 2, 3, 0]
    assert table[-1] == ("", 0)
    assert table[3] == ("A photo of a crab, and an egg.", 2)
    assert table[-2] == ("A photo of a crab, an egg, and a sock.", 3)


@FAST
@given(names)
def test_table_is_every_subset_with_its_size(components):
    table = lookup_table(components)
    assert len(table) == 2 ** len(components)
    assert dict(table) == ref_table(components)
    assert len({t for t, _ in table}) == len(table)
    assert table[-2] == (render_prompt(components), len(components))  # the full prompt, then ""
    assert table[-1] == ("", 0)
    subsets = lookup_subsets(components)
    assert [len(s) for s in subsets] == [c for _, c in table]
    for s in subsets:  # components keep their prompt order inside an entry
        assert list(s) == [c for c in components if c in s]


@FAST
@given(names, names)
def test_counts_depend_only_on_k(a, b):
    if len(a) == len(b):
        assert [c for _, c in lookup_table(a)] == [c for _, c in lookup_table(b)]


# ----------------------------------------------------------------------------- score


def logits_for(k):
    n_entries = 2**k
    return hnp.arrays(
        np.float64,
        st.tuples(st.integers(1, 12), st.just(n_entries)),
        elements=st.floats(-20, 20, allow_nan=False).map(lambda v: round(v, 1)),  # coarse: creates ties
    )


@FAST
@given(st.integers(1, 4).flatmap(lambda k: st.tuples(st.just(k), logits_for(k))))
def test_cis_matches_the_papers_softmax_argmax_formula(case):
    k, logits = case
    counts = [c for _, c in lookup_table([f"thing{i}" for i in range(k)])]
    got = components_inclusion_score(logits, counts)
    assert got == pytest.approx(ref_cis(logits.tolist(), counts))
    assert 0.0 <= got <= 1.0


@FAST
@given(st.integers(1, 4).flatmap(lambda k: st.tuples(st.just(k), logits_for(k))), st.randoms(use_true_random=False))
def test_permuting_images_does_not_change_cis(case, rnd):
    k, logits = case
    counts = [c for _, c in lookup_table([f"thing{i}" for i in range(k)])]
    order = list(range(len(logits)))
    rnd.shuffle(order)
    assert components_inclusion_score(logits[order], counts) == pytest.approx(components_inclusion_score(logits, counts))


@pytest.mark.parametrize("k", [1, 2, 3, 4, 8])
def test_peak_on_full_entry_scores_one_and_on_empty_entry_zero(k):
    counts = [c for _, c in lookup_table([f"thing{i}" for i in range(k)])]
    full = np.zeros((3, 2**k))
    full[:, -2] = 5.0  # the full prompt is second to last
    empty = np.zeros((3, 2**k))
    empty[:, -1] = 5.0  # the empty string is last
    assert components_inclusion_score(full, counts) == 1.0
    assert components_inclusion_score(empty, counts) == 0.0
    assert components_inclusion_score(np.vstack([full, empty]), counts) == 0.5


def test_stacked_prompts_weigh_every_image_equally():
    a, b = ["crab", "egg"], ["sock", "vase"]
    counts = [c for _, c in lookup_table(a)]
    # table order: [first, second, both, ""]
    la = np.array([[0, 9, 0, 0], [0, 0, 9, 0]], dtype=float)  # 1/2, 1
    lb = np.array([[0, 0, 0, 9], [9, 0, 0, 0]], dtype=float)  # 0, 1/2
    assert components_inclusion_score(np.vstack([la, lb]), counts) == pytest.approx((0.5 + 1 + 0 + 0.5) / 4)
    assert components_inclusion_score(la, counts) == pytest.approx(0.75)


@FAST
@given(names.flatmap(lambda c: st.tuples(st.just(c), logits_for(len(c)))))
def test_detected_subsets_agree_with_scores(case):
    components, logits = case
    counts = [c for _, c in lookup_table(components)]
    detected = detected_subsets(logits, components)
    scores = image_scores(logits, counts)
    assert [len(d) / len(components) for d in detected] == pytest.approx(scores.tolist())
    assert all(set(d) <= set(components) for d in detected)


def test_cis_works_with_a_reduced_table():
    # K = max(counts) also for tables that are not all 2^K subsets
    assert components_inclusion_score([[0, 1, 0], [0, 0, 1]], [0, 2, 4]) == pytest.approx((0.5 + 1.0) / 2)


@pytest.mark.parametrize(
    "logits, counts, match",
    [
        (np.zeros(4), [0, 1, 1, 2], r"`logits` must have shape \(images, table entries\).*\(4,\)"),
        (np.zeros((0, 4)), [0, 1, 1, 2], "both > 0"),
        (np.zeros((2, 4)), [0, 1, 2], r"one entry per logits column \(4\), but got shape \(3,\)"),
        (np.full((2, 2), np.nan), [0, 1], "finite"),
        (np.zeros((2, 2)), [0, -1], "non-negative"),
        (np.zeros((2, 2)), [0, 0], r"K >= 1"),
        (np.zeros((2, 2)), [0, 0.5], "non-negative integers"),
    ],
)
def test_score_errors_name_argument_and_shape(logits, counts, match):
    with pytest.raises(ValueError, match=match):
        components_inclusion_score(logits, counts)


def test_detected_subsets_requires_a_full_table():
    with pytest.raises(ValueError, match=r"one entry per logits column \(3\)"):
        detected_subsets(np.zeros((1, 3)), ["crab", "egg"])


# ----------------------------------------------------------------------------- per component


@FAST
@given(
    st.lists(
        names.flatmap(lambda r: st.tuples(st.just(r), st.lists(st.sampled_from(r), unique=True))),
        min_size=1,
        max_size=20,
    )
)
def test_generation_rates_match_counting_by_hand(images):
    requested = [r for r, _ in images]
    detected = [d for _, d in images]
    rates = component_generation_rates(requested, detected)
    for c in {c for r in requested for c in r}:
        asked = sum(c in r for r in requested)
        found = sum(c in d for d in detected)
        assert (rates[c].requested, rates[c].detected) == (asked, found)
        assert rates[c].rate == pytest.approx(found / asked)
    assert set(rates) == {c for r in requested for c in r}


def test_extreme_components_orders_and_filters():
    requested = [("crab", "egg", "sock")] * 4 + [("vase",)]
    detected = [("crab",), ("crab", "egg"), ("crab",), ("crab", "sock")] + [()]
    rates = component_generation_rates(requested, detected)
    low, high = extreme_components(rates, n=2)
    assert [r.component for r in low] == ["vase", "egg"]  # 0/1, then 1/4 (egg before sock by name)
    assert [r.component for r in high] == ["crab", "egg"]
    low, _ = extreme_components(rates, n=5, min_requested=2)
    assert "vase" not in [r.component for r in low]


def test_generation_rates_reject_unrequested_detections():
    with pytest.raises(ValueError, match=r"`detected\[0\]` has components not requested for that image: \['vase'\]"):
        component_generation_rates([("crab",)], [("vase",)])
    with pytest.raises(ValueError, match="one entry per image"):
        component_generation_rates([("crab",)], [])


# ----------------------------------------------------------------------------- order invariance


def test_shuffles_are_permutations_and_seeded():
    prompts = sample_component_prompts(8, 20, 0, classnames=POOL)
    shuffled = shuffled_prompts(prompts, seed=5)
    assert shuffled == shuffled_prompts(prompts, seed=5)
    assert all(sorted(a) == sorted(b) for a, b in zip(prompts, shuffled))
    assert any(a != b for a, b in zip(prompts, shuffled))
    assert shuffle_components(["a", "b", "c"], 4) == shuffle_components(["a", "b", "c"], np.random.default_rng(4))


def ref_pearson(table):
    table = np.asarray(table, dtype=float)
    expected = table.sum(1, keepdims=True) * table.sum(0, keepdims=True) / table.sum()
    return float(((table - expected) ** 2 / expected).sum())


def test_chi_square_matches_pearson_by_hand_and_drops_empty_columns():
    original = [0, 1, 1, 3, 3, 3, 1]  # no image with 2 or 4 components
    shuffled = [1, 1, 3, 3, 0, 0, 0]
    r = order_invariance_test(original, shuffled, k=4)
    table = [[1, 3, 3], [3, 2, 2]]
    assert r.columns == (0, 1, 3)
    assert r.table.tolist() == table
    assert r.dof == 2
    assert r.statistic == pytest.approx(ref_pearson(table))
    from scipy.stats import chi2

    assert r.pvalue == pytest.approx(chi2.sf(ref_pearson(table), 2))


def test_identical_groups_are_not_rejected():
    counts = [0, 1, 2, 2, 3, 4, 4, 4]
    r = order_invariance_test(counts, counts, k=4)
    assert (r.statistic, r.dof, r.pvalue) == (0.0, 4, 1.0)
    r = order_invariance_test([2, 2], [2, 2, 2], k=2)  # one category only
    assert (r.statistic, r.dof, r.pvalue) == (0.0, 0, 1.0)


def test_pvalues_are_roughly_uniform_under_the_null_and_tiny_when_different():
    rng = np.random.default_rng(0)
    probs = [0.05, 0.1, 0.2, 0.3, 0.2, 0.1, 0.05, 0.0, 0.0]
    pvals = [
        order_invariance_test(rng.choice(9, 400, p=probs), rng.choice(9, 400, p=probs), k=8).pvalue
        for _ in range(200)
    ]
    assert 0.0 <= np.mean(np.array(pvals) < 0.05) <= 0.12
    assert 0.35 <= np.mean(pvals) <= 0.65
    shifted = [0.0, 0.0, 0.05, 0.05, 0.1, 0.2, 0.3, 0.2, 0.1]
    r = order_invariance_test(rng.choice(9, 400, p=probs), rng.choice(9, 400, p=shifted), k=8)
    assert r.pvalue < 1e-20


def test_order_invariance_errors():
    with pytest.raises(ValueError, match=r"`shuffled_counts` must hold counts in \[0, 2\], but got \[3\]"):
        order_invariance_test([0, 1], [3], k=2)
    with pytest.raises(ValueError, match="`original_counts` must be a non-empty"):
        order_invariance_test([], [1], k=2)


def test_by_component_variant_has_components_minus_one_dof():
    original = [("crab", "egg"), ("crab",), ("sock",), ()]
    shuffled = [("crab",), ("egg", "sock"), ("crab", "sock"), ("vase",)]
    r = order_invariance_test_by_component(original, shuffled)
    assert r.dof == 3  # crab, egg, sock, vase
    assert int(r.table.sum()) == 10  # N = detections in both groups
    assert r.table.tolist() == [[2, 1, 1, 0], [2, 1, 2, 1]]
    assert r.statistic == pytest.approx(ref_pearson(r.table))


# ----------------------------------------------------------------------------- tile composite


@pytest.mark.parametrize(
    "k, grid", [(1, (1, 1)), (2, (2, 1)), (3, (2, 2)), (4, (2, 2)), (5, (3, 2)), (8, (3, 3)), (9, (3, 3))]
)
def test_tile_grid_is_near_square(k, grid):
    from PIL import Image

    images = [Image.new("RGB", (10 + i, 20), (i, 0, 0)) for i in range(k)]
    out = tile_composite(images, tile_size=8)
    assert out.size == (grid[0] * 8, grid[1] * 8)
    assert out.mode == "RGB"


def test_tiles_land_row_by_row_and_empty_cells_keep_background():
    from PIL import Image

    colours = [(255, 0, 0), (0, 255, 0), (0, 0, 255)]
    blue_array = np.zeros((12, 12, 3), np.uint8)
    blue_array[..., 2] = 255
    images = [Image.new("RGB", (30, 50), c) for c in colours[:2]] + [blue_array]
    out = np.asarray(tile_composite(images, tile_size=10, background=(7, 7, 7)))
    assert tuple(out[5, 5]) == colours[0]
    assert tuple(out[5, 15]) == colours[1]
    assert tuple(out[15, 5]) == colours[2]
    assert tuple(out[15, 15]) == (7, 7, 7)


def test_tile_composite_errors():
    with pytest.raises(ValueError, match="at least one image"):
        tile_composite([])
    with pytest.raises(TypeError, match=r"`images\[0\]` must be a PIL image or a numpy array, but got str"):
        tile_composite(["not an image"])


# ----------------------------------------------------------------------------- degradation


@FAST
@given(st.lists(st.floats(0, 1), min_size=4, max_size=4))
def test_slope_is_least_squares(values):
    ks = [1, 2, 4, 8]
    assert degradation_slope(ks, values) == pytest.approx(np.polyfit(ks, values, 1)[0], abs=1e-9)


def test_slope_of_linear_data_and_relative_modes():
    assert degradation_slope([1, 2, 4, 8], [1 - 0.05 * k for k in (1, 2, 4, 8)]) == pytest.approx(-0.05)
    values = [147.81, 72.76, 35.23, 18.20]
    assert degradation_slope([1, 2, 4, 8], values, relative_to="first") == pytest.approx(
        np.polyfit([1, 2, 4, 8], np.array(values) / values[0], 1)[0]
    )
    assert degradation_slope([1, 2, 4, 8], values, relative_to="mean") == pytest.approx(
        np.polyfit([1, 2, 4, 8], np.array(values) / np.mean(values), 1)[0]
    )


def test_average_of_model_slopes_is_slope_of_average_curve():
    ks = [1, 2, 4, 8]
    a, b = [1.0, 0.9, 0.76, 0.67], [1.0, 0.7, 0.5, 0.3]
    mean_curve = [(x + y) / 2 for x, y in zip(a, b)]
    assert degradation_slope(ks, mean_curve) == pytest.approx((degradation_slope(ks, a) + degradation_slope(ks, b)) / 2)


@pytest.mark.parametrize(
    "ks, values, kwargs, match",
    [
        ([1, 1], [0.5, 0.4], {}, "two distinct values"),
        ([1, 2], [0.5], {}, "equal length"),
        ([1, 2], [0.5, 0.4], {"relative_to": "max"}, r"`relative_to` must be one of \(None, 'first', 'mean'\)"),
        ([1, 2], [0.0, 0.4], {"relative_to": "first"}, "cannot normalise"),
    ],
)
def test_slope_errors(ks, values, kwargs, match):
    with pytest.raises(ValueError, match=match):
        degradation_slope(ks, values, **kwargs)


# ----------------------------------------------------------------------------- inception score


@st.composite
def prob_matrices(draw):
    n = draw(st.integers(1, 10))
    c = draw(st.integers(1, 6))
    raw = draw(hnp.arrays(np.float64, (n, c), elements=st.floats(0, 10)))
    raw[:, 0] += 1e-3  # no all-zero rows
    return raw / raw.sum(axis=1, keepdims=True)


@FAST
@given(prob_matrices())
def test_inception_score_matches_brute_force_and_is_bounded(p):
    got = inception_score(p)
    assert got == pytest.approx(ref_inception_score(p), rel=1e-9)
    assert 1.0 - 1e-9 <= got <= p.shape[1] + 1e-9


@pytest.mark.parametrize("c", [1, 2, 10, 1000])
def test_uniform_predictions_score_one_and_confident_distinct_classes_score_c(c):
    assert inception_score(np.full((7, c), 1.0 / c)) == pytest.approx(1.0)
    assert inception_score(np.eye(c)) == pytest.approx(float(c))


def test_splits_are_consecutive_chunks():
    p = np.vstack([np.eye(4), np.full((4, 4), 0.25)])
    assert inception_score_splits(p, splits=2).tolist() == pytest.approx([4.0, 1.0])
    assert inception_score(p, splits=2) == pytest.approx(2.5)
    assert inception_score_splits(p, splits=3).tolist() == pytest.approx(
        [ref_inception_score(p[:3]), ref_inception_score(p[3:6]), ref_inception_score(p[6:])]
    )


@pytest.mark.parametrize(
    "probs, splits, match",
    [
        (np.ones(3) / 3, 1, r"`probs` must have shape \(images, classes\)"),
        (np.ones((2, 3)), 1, "row 0 sums to 3"),
        (-np.eye(2), 1, "non-negative"),
        (np.eye(2), 3, r"`splits` must be at most the number of images \(2\)"),
    ],
)
def test_inception_errors(probs, splits, match):
    with pytest.raises(ValueError, match=match):
        inception_score(probs, splits)


def test_module_has_no_heavy_imports_at_load():
    import subprocess
    import sys

    code = "import sys, t2i_fairness.metrics.cis; print(any(m in sys.modules for m in ('torch', 'open_clip', 'PIL')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ----------------------------------------------------------------------------- 77-token rule

LONG_POOL = [f"thing{i}" for i in range(20)] + ["a very very long component name indeed", "another long long name"]


def test_fitting_prompts_equal_plain_sampling_when_everything_fits():
    prompts, rejected = sample_fitting_prompts(3, 7, seed=[0, 3], fits=lambda c: True, classnames=LONG_POOL)
    assert prompts == sample_component_prompts(3, 7, seed=[0, 3], classnames=LONG_POOL)
    assert rejected == []


def test_prompts_that_do_not_fit_are_replaced_by_the_next_draws():
    fits = lambda comps: all(len(c) < 20 for c in comps)  # noqa: E731
    prompts, rejected = sample_fitting_prompts(2, 30, seed=5, fits=fits, classnames=LONG_POOL)
    draws = sample_component_prompts(2, len(prompts) + len(rejected), seed=5, classnames=LONG_POOL)
    assert rejected and all(not fits(p) for p in rejected)
    assert prompts == [d for d in draws if fits(d)]  # the first m draws that fit, in draw order
    assert draws[-1] == prompts[-1]  # and no draw beyond the m-th fitting one


def test_fitting_prompts_give_up_naming_a_prompt_that_does_not_fit():
    with pytest.raises(ValueError, match=r"only 0 of 50 prompts with k=2 .*'A photo of"):
        sample_fitting_prompts(2, 3, seed=0, fits=lambda c: False, classnames=LONG_POOL, max_draws=50)


def test_real_clip_token_counts_with_the_rule():
    """Eight long ImageNet names exceed CLIP's 77 tokens; the rule keeps only prompts that fit."""
    from t2i_fairness.models.clip import ClipModel

    clip = ClipModel.from_profile("tiny")
    long_names = ["Mexican hairless dog (xoloitzcuintli)", "military hat (bearskin or shako)", "sulphur-crested cockatoo",
                  "shoji screen or room divider", "red-breasted merganser", "desert grassland whiptail lizard",
                  "black-and-white colobus", "Entlebucher Sennenhund"]
    assert clip.count_tokens(render_prompt(long_names)) > 77
    fits = lambda comps: clip.count_tokens(render_prompt(comps)) <= 77  # noqa: E731
    prompts, rejected = sample_fitting_prompts(8, 30, seed=0, fits=fits, classnames=long_names + ["cat"])
    assert len(prompts) == 30 and all(fits(p) for p in prompts)
    assert rejected and all(set(p) == set(long_names) for p in rejected)  # only the all-long draw is too long


# ----------------------------------------------------------------------------- FID


def brute_force_fid(a, b):
    """FID as pytorch-fid writes it: scipy.linalg.sqrtm of the product of the covariances."""
    from scipy import linalg

    mu1, mu2 = a.mean(0), b.mean(0)
    s1, s2 = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
    covmean = linalg.sqrtm(s1 @ s2).real
    return float(((mu1 - mu2) ** 2).sum() + np.trace(s1) + np.trace(s2) - 2 * np.trace(covmean))


@pytest.mark.parametrize("seed", range(5))
def test_fid_matches_the_sqrtm_formula(seed):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(80, 6)) @ rng.normal(size=(6, 6))
    b = rng.normal(size=(60, 6)) @ rng.normal(size=(6, 6)) + rng.normal(size=6)
    assert frechet_inception_distance(a, b) == pytest.approx(brute_force_fid(a, b), rel=1e-8, abs=1e-8)


def test_fid_is_symmetric_zero_on_itself_and_finite_with_fewer_images_than_dimensions():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(10, 32)), rng.normal(size=(12, 32)) + 0.5
    assert frechet_inception_distance(a, b) == pytest.approx(frechet_inception_distance(b, a), rel=1e-6)
    assert frechet_inception_distance(a, a) == pytest.approx(0.0, abs=1e-9)
    # singular covariances (10 images in 32 dimensions): still the sqrtm value
    assert frechet_inception_distance(a, b) == pytest.approx(brute_force_fid(a, b), rel=1e-6)


def test_frechet_distance_of_known_gaussians():
    # 1-D: (m1 - m2)^2 + (s1 - s2)^2 for standard deviations s
    assert frechet_distance([1.0], [[4.0]], [3.0], [[9.0]]) == pytest.approx(4.0 + 1.0)
    mu1, s1 = gaussian_statistics([[0.0, 0.0], [2.0, 2.0], [0.0, 2.0], [2.0, 0.0]])
    assert mu1.tolist() == [1.0, 1.0] and s1 == pytest.approx(np.eye(2) * 4 / 3)


@pytest.mark.parametrize("args, match", [
    (([[1.0, 2.0]], [[1.0, 2.0], [3.0, 4.0]]), r"at least 2 images, but got shape \(1, 2\)"),
    ((np.ones((3, 2)), np.ones((3, 3))), "same width"),
    ((np.array([[1.0, np.nan], [0.0, 1.0]]), np.ones((3, 2))), "finite"),
])
def test_fid_errors_name_argument_and_shape(args, match):
    with pytest.raises(ValueError, match=match):
        frechet_inception_distance(*args)


def test_frechet_distance_shape_errors():
    with pytest.raises(ValueError, match=r"`sigma1` and `sigma2` must have shape \(2, 2\)"):
        frechet_distance([0.0, 0.0], np.eye(3), [0.0, 0.0], np.eye(2))
