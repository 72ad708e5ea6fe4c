"""Tests of the word-influence math against the definitions written out independently here."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from t2i_fairness.metrics.stats import hoeffding_half_width_difference
from t2i_fairness.metrics.word_influence import (
    ADJECTIVES,
    PERSONS,
    PLACES,
    WORKED_EXAMPLES,
    average_word_influence,
    filter_candidates,
    group_probabilities,
    influence_bootstrap_intervals,
    influence_half_widths,
    influence_scores,
    influence_weights,
    large_scale_prompts,
    prompt_words,
    representation_gap,
    required_sets,
    transmute,
)

FAST = settings(max_examples=40, deadline=None)

TABLE_1 = {  # "a respected doctor at the hospital", g = female; p(g) with each word replaced
    frozenset(): 0.160,
    frozenset({0}): 0.133,
    frozenset({1}): 0.267,
    frozenset({2}): 0.533,
    frozenset({3}): 0.200,
    frozenset({4}): 0.200,
    frozenset({5}): 0.000,
}


def all_subsets(n):
    return [frozenset(c) for r in range(n + 1) for c in itertools.combinations(range(n), r)]


def ref_influence(p, n, k, i):
    """I_k(w_i) = mean over S (k-1 other words) of p(S + {i}) - p(S), by bit masks."""
    diffs = []
    for mask in range(2**n):
        s = frozenset(j for j in range(n) if mask >> j & 1)
        if i in s or len(s) != k - 1:
            continue
        diffs.append(p[s | {i}] - p[s])
    return sum(diffs) / len(diffs)


@st.composite
def synthetic(draw, max_n=6):
    n = draw(st.integers(1, max_n))
    k = draw(st.integers(1, n))
    values = draw(st.lists(st.floats(0, 1), min_size=2**n, max_size=2**n))
    return n, k, dict(zip(all_subsets(n), values))


# ----------------------------------------------------------------------------- influence


def test_reproduces_table_1_of_the_paper():
    got = influence_scores(TABLE_1, n_words=6, k=1)
    assert [round(v, 3) for v in got] == [-0.027, 0.107, 0.373, 0.040, 0.040, -0.160]
    assert got[2] == pytest.approx(0.533 - 0.160)
    assert max(range(6), key=got.__getitem__) == prompt_words(WORKED_EXAMPLES[0]).index("doctor")


@FAST
@given(synthetic())
def test_k1_is_the_direct_difference(case):
    n, _, p = case
    assert influence_scores(p, n, 1) == pytest.approx([p[frozenset({i})] - p[frozenset()] for i in range(n)])


@FAST
@given(synthetic())
def test_k_level_matches_the_definition(case):
    n, k, p = case
    got = influence_scores(p, n, k)
    assert got == pytest.approx([ref_influence(p, n, k, i) for i in range(n)], abs=1e-12)
    assert all(-1 - 1e-12 <= v <= 1 + 1e-12 for v in got)


def test_k2_on_a_known_synthetic_table():
    # n = 3 words; p(T) chosen by hand.  I_2(w_0) = ([p{0,1} - p{1}] + [p{0,2} - p{2}]) / 2
    p = {
        frozenset({0}): 0.1, frozenset({1}): 0.2, frozenset({2}): 0.3,
        frozenset({0, 1}): 0.6, frozenset({0, 2}): 0.5, frozenset({1, 2}): 0.4,
    }  # fmt: skip
    got = influence_scores(p, 3, 2)
    assert got == pytest.approx([
        ((0.6 - 0.2) + (0.5 - 0.3)) / 2,
        ((0.6 - 0.1) + (0.4 - 0.3)) / 2,
        ((0.5 - 0.1) + (0.4 - 0.2)) / 2,
    ])  # fmt: skip


@FAST
@given(
    st.integers(1, 6).flatmap(
        lambda n: st.tuples(st.just(n), st.integers(1, n), st.lists(st.floats(-0.05, 0.05), min_size=n, max_size=n))
    )
)
def test_additive_model_gives_each_word_its_own_effect_at_every_level(case):
    n, k, effects = case
    p = {s: 0.5 + sum(effects[j] for j in s) for s in all_subsets(n)}
    assert influence_scores(p, n, k) == pytest.approx(effects, abs=1e-12)


def test_ceo_example_all_male_gives_zero_influence_at_k1():
    n = len(prompt_words(WORKED_EXAMPLES[1]))
    assert n == 7
    p = {s: 0.0 for s in required_sets(n, 1)}  # every image male: p(female) = 0
    assert influence_scores(p, n, 1) == [0.0] * n


@FAST
@given(st.integers(1, 7).flatmap(lambda n: st.tuples(st.just(n), st.integers(1, n))))
def test_required_sets_are_exactly_the_sets_used(case):
    n, k = case
    sets = required_sets(n, k)
    assert len(sets) == len(set(sets)) == math.comb(n, k - 1) + math.comb(n, k)
    assert {len(s) for s in sets} <= {k - 1, k}
    assert sets == sorted(sets, key=lambda s: (len(s), sorted(s)))
    # exactly these sets suffice: an influence computation touches nothing else
    p = {s: 0.5 for s in sets}
    assert influence_scores(p, n, k) == [0.0] * n
    used = set().union(*(influence_weights(n, k, i) for i in range(n)))
    assert used == set(sets)


def test_missing_set_raises_key_error_naming_it():
    p = dict(TABLE_1)
    del p[frozenset({3})]
    with pytest.raises(KeyError, match=r"no entry for replaced set \{3\}.*required_sets\(6, 1\)"):
        influence_scores(p, 6, 1)
    p = dict(TABLE_1)
    del p[frozenset()]
    with pytest.raises(KeyError, match=r"replaced set \{\}"):
        influence_scores(p, 6, 1)


@pytest.mark.parametrize(
    "p, n, k, match",
    [
        (TABLE_1, 6, 0, r"`k` must be in \[1, n_words=6\], but got 0"),
        (TABLE_1, 6, 7, r"`k` must be in \[1, n_words=6\], but got 7"),
        (TABLE_1, 0, 1, "`n_words` must be at least 1"),
        ({**TABLE_1, frozenset({1}): 1.5}, 6, 1, r"`probabilities\[\{1\}\]` must be in \[0, 1\], but got 1.5"),
        ({**TABLE_1, frozenset({1}): "x"}, 6, 1, r"must be a number in \[0, 1\], but got 'x'"),
    ],
)
def test_influence_value_errors(p, n, k, match):
    with pytest.raises(ValueError, match=match):
        influence_scores(p, n, k)


# ----------------------------------------------------------------------------- confidence


def test_k1_half_width_is_the_two_mean_hoeffding_bound():
    counts = {s: 15 for s in required_sets(6, 1)}
    counts[frozenset()] = 25
    got = influence_half_widths(counts, 6, 1)
    assert got == pytest.approx([hoeffding_half_width_difference(15, 25)] * 6)
    assert got[0] == pytest.approx(math.sqrt(math.log(2 / 0.05) / 2 * (1 / 15 + 1 / 25)))


@pytest.mark.parametrize("n_words, k", [(4, 2), (5, 3), (6, 2), (3, 3)])
def test_k_level_half_width_with_equal_counts(n_words, k):
    n = 40
    c = math.comb(n_words - 1, k - 1)
    got = influence_half_widths({s: n for s in required_sets(n_words, k)}, n_words, k, delta=0.1)
    assert got == pytest.approx([math.sqrt(math.log(2 / 0.1) / (c * n))] * n_words)
    quadrupled = influence_half_widths({s: 4 * n for s in required_sets(n_words, k)}, n_words, k, delta=0.1)
    assert [q / g for q, g in zip(quadrupled, got)] == pytest.approx([0.5] * n_words)


def test_half_width_missing_count_names_set():
    with pytest.raises(KeyError, match=r"`counts` has no entry for replaced set \{0, 1\}"):
        influence_half_widths({s: 5 for s in required_sets(3, 2) if s != frozenset({0, 1})}, 3, 2)


def test_hoeffding_covers_k2_influence_in_simulation():
    rng = np.random.default_rng(0)
    n_words, k, n = 3, 2, 20
    truth = {s: 0.2 + 0.2 * len(s) + 0.05 * min(s, default=0) for s in required_sets(n_words, k)}
    exact = influence_scores(truth, n_words, k)
    hw = influence_half_widths({s: n for s in truth}, n_words, k)
    misses = 0
    for _ in range(500):
        est = influence_scores({s: rng.binomial(n, p) / n for s, p in truth.items()}, n_words, k)
        misses += any(abs(e - x) > h for e, x, h in zip(est, exact, hw))
    assert misses / 500 <= 0.05 * n_words  # per-word level 0.05, union over words


def test_bootstrap_intervals_contain_the_estimate_and_are_seeded():
    rng = np.random.default_rng(3)
    ind = {s: rng.binomial(1, 0.2 + 0.1 * len(s), 60) for s in required_sets(4, 2)}
    est = influence_scores(group_probabilities(ind), 4, 2)
    ci = influence_bootstrap_intervals(ind, 4, 2, n_resamples=400, seed=9)
    assert ci == influence_bootstrap_intervals(ind, 4, 2, n_resamples=400, seed=9)
    for e, (lo, hi) in zip(est, ci):
        assert lo <= e + 1e-9 and e - 1e-9 <= hi
    hw = influence_half_widths({s: 60 for s in ind}, 4, 2)
    assert all((hi - lo) / 2 < h for (lo, hi), h in zip(ci, hw))  # bootstrap is the cheaper, tighter one


def test_bootstrap_interval_errors():
    with pytest.raises(KeyError, match=r"`indicators` has no entry for replaced set \{1\}"):
        influence_bootstrap_intervals({frozenset(): [0, 1], frozenset({0}): [1]}, 2, 1)
    with pytest.raises(ValueError, match=r"values in \[0, 1\]"):
        influence_bootstrap_intervals({frozenset(): [0, 2], frozenset({0}): [1]}, 1, 1)


def test_group_probabilities_are_means():
    assert group_probabilities({frozenset(): [0, 1, 1, 1]}) == {frozenset(): 0.75}
    with pytest.raises(ValueError, match="non-empty"):
        group_probabilities({frozenset(): []})


def test_representation_gap():
    assert representation_gap(0.5, 2) == 0.0
    assert representation_gap(0.0, 4) == 0.25
    assert representation_gap(0.16, 2) == pytest.approx(0.34)
    with pytest.raises(ValueError, match="`n_groups` must be an integer >= 2, but got 1"):
        representation_gap(0.5, 1)
    with pytest.raises(ValueError, match=r"`p` must be a probability in \[0, 1\], but got 1.2"):
        representation_gap(1.2, 2)


# ----------------------------------------------------------------------------- candidates


def test_filter_candidates_excludes_original_pieces_punctuation_and_stop_tokens():
    cands = [
        ("doctor", 0.9), ("DOCTOR", 0.8), ("##s", 0.7), ("...", 0.6), ("[MASK]", 0.55), ("<unk>", 0.5),
        ("physician", 0.3), ("surgeon", 0.4), ("Physician", 0.2), ("nurse", 0.1), ("$", 0.05), (" ", 0.04),
    ]  # fmt: skip
    assert filter_candidates(cands, "Doctor", 2) == ["surgeon", "physician"]
    assert filter_candidates(cands, "Doctor", 10) == ["surgeon", "physician", "nurse"]


def test_filter_candidates_keeps_function_words_and_numbers():
    # the paper's own transmutations replace "a" with "the"
    assert filter_candidates([("the", 0.5), ("a", 0.4), ("500", 0.3), ("highly", 0.2)], "a", 3) == ["the", "500", "highly"]


def test_filter_candidates_ties_keep_input_order_and_custom_stop_list():
    assert filter_candidates([("b", 0.5), ("a", 0.5), ("c", 0.5)], "x", 3) == ["b", "a", "c"]
    assert filter_candidates([("b", 0.5), ("a", 0.5)], "x", 3, stop_tokens={"B"}) == ["a"]


@pytest.mark.parametrize(
    "cands, m, match",
    [
        ([("a", 0.1)], 0, "`m` must be a positive integer, but got 0"),
        ([("a", float("nan"))], 1, r"`candidates\[0\]` score must be finite"),
        ([("a",)], 1, r"`candidates\[0\]` must be a \(token, score\) pair"),
    ],
)
def test_filter_candidates_errors(cands, m, match):
    with pytest.raises(ValueError, match=match):
        filter_candidates(cands, "x", m)


# ----------------------------------------------------------------------------- prompt suite


def test_large_scale_suite_has_150_distinct_template_prompts():
    prompts = large_scale_prompts()
    assert len(prompts) == len(set(prompts)) == 150
    for prompt in prompts:
        a, adj, person, at, the, place = prompt_words(prompt)
        assert (a, at, the) == ("a", "at", "the")
        assert adj in ADJECTIVES and person in PERSONS and place in PLACES
    assert sum("nurse" in p.split() for p in prompts) == 30
    assert "a confident doctor at the mall" in prompts


def test_worked_examples_and_transmute():
    words = prompt_words(WORKED_EXAMPLES[0])
    assert transmute(words, {0: "the", 5: "clinic"}) == "the respected doctor at the clinic"
    with pytest.raises(ValueError, match=r"positions must be in range\(6\), but got \[6\]"):
        transmute(words, {6: "x"})


def test_average_word_influence_matches_a_by_hand_average_over_the_suite():
    prompts = large_scale_prompts()
    rng = np.random.default_rng(0)
    influences = [rng.uniform(-1, 1, 6).tolist() for _ in prompts]
    got = average_word_influence(prompts, influences)
    for word in ["nurse", "caring", "salon", "the"]:
        vals = [inf[p.split().index(word)] for p, inf in zip(prompts, influences) if word in p.split()]
        assert got[word] == pytest.approx(sum(vals) / len(vals))
    assert set(got) == {"a", "at", "the", *ADJECTIVES, *PERSONS, *PLACES}


def test_average_counts_each_prompt_once_per_word():
    got = average_word_influence([["the", "x", "the"], ["the"]], [[0.2, 0.0, 0.4], [0.0]])
    assert got["the"] == pytest.approx((0.3 + 0.0) / 2)


def test_average_errors():
    with pytest.raises(ValueError, match="same length"):
        average_word_influence(["a b"], [])
    message = r"`influences\[0\]` must have one value per word of prompt 0 \(2 words\), but got 1"
    with pytest.raises(ValueError, match=message):
        average_word_influence(["a b"], [[0.1]])
