"""DIG In's Object Consistency Indicator against a hand-written percentile, properties, errors."""

from __future__ import annotations

import doctest
import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from t2i_fairness.metrics import consistency
from t2i_fairness.metrics.consistency import cosine_similarities, object_consistency, object_percentiles


def brute_p10(values) -> float:
    """The 10th percentile by hand: sort, then interpolate between the two ranks around 0.1*(n-1)."""
    xs = sorted(float(v) for v in values)
    rank = 0.1 * (len(xs) - 1)
    lo = int(math.floor(rank))
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (rank - lo) * (xs[hi] - xs[lo])


def brute_consistency(by_object) -> float:
    p = [brute_p10(v) for v in by_object.values()]
    return sum(p) / len(p)


scores = st.floats(min_value=-1.0, max_value=1.0, allow_nan=False)
score_lists = st.lists(scores, min_size=1, max_size=40)
by_object = st.dictionaries(st.sampled_from(["bag", "car", "dog", "stove", "tree", "cooking_pot"]), score_lists,
                            min_size=1, max_size=6)


def test_doctests_run():
    assert doctest.testmod(consistency, raise_on_error=False).failed == 0


def test_known_values():
    # 11 values 0.0..1.0: rank 1.0 -> exactly the second value; 2 values: rank 0.1 -> 10% of the way up.
    assert object_percentiles({"bag": [i / 10 for i in range(11)]})["bag"] == pytest.approx(0.1)
    assert object_percentiles({"car": [0.5, 0.0]})["car"] == pytest.approx(0.05)
    assert object_consistency({"bag": [i / 10 for i in range(11)], "car": [0.5, 0.0]}) == pytest.approx(0.075)


@settings(max_examples=200, deadline=None)
@given(by_object)
def test_matches_brute_force(data):
    assert object_consistency(data) == pytest.approx(brute_consistency(data), abs=1e-12)
    for obj, values in data.items():
        assert object_percentiles(data)[obj] == pytest.approx(brute_p10(values), abs=1e-12)


@settings(max_examples=100, deadline=None)
@given(by_object)
def test_bounded_by_min_and_max_of_inputs(data):
    everything = [v for vs in data.values() for v in vs]
    value = object_consistency(data)
    assert min(everything) - 1e-12 <= value <= max(everything) + 1e-12


@settings(max_examples=100, deadline=None)
@given(by_object, st.data())
def test_raising_a_score_never_lowers_it(data, draw):
    obj = draw.draw(st.sampled_from(sorted(data)))
    i = draw.draw(st.integers(0, len(data[obj]) - 1))
    bump = draw.draw(st.floats(0.0, 1.0))
    raised = {k: list(v) for k, v in data.items()}
    raised[obj][i] += bump
    assert object_consistency(raised) >= object_consistency(data) - 1e-12


@settings(max_examples=100, deadline=None)
@given(by_object, st.randoms(use_true_random=False))
def test_permutation_invariant(data, rnd):
    shuffled_items = list(data.items())
    rnd.shuffle(shuffled_items)
    shuffled = {}
    for k, v in shuffled_items:
        v = list(v)
        rnd.shuffle(v)
        shuffled[k] = v
    assert object_consistency(shuffled) == pytest.approx(object_consistency(data), abs=1e-12)


@settings(max_examples=100, deadline=None)
@given(scores, scores, st.integers(1, 50), st.integers(1, 50))
def test_objects_weigh_equally_whatever_their_image_count(x, y, k, m):
    """An object with 1 image counts as much as one with 50: the mean is over objects, not images."""
    assert object_consistency({"bag": [x] * k, "car": [y] * m}) == pytest.approx((x + y) / 2, abs=1e-12)


def test_one_object_is_its_own_percentile():
    rng = random.Random(0)
    values = [rng.uniform(-1, 1) for _ in range(60)]
    assert object_consistency({"bag": values}) == pytest.approx(float(np.percentile(values, 10)))


@pytest.mark.parametrize(
    "data, match",
    [
        ({}, "empty"),
        ({"bag": [0.1], "hat": []}, "'hat' has no CLIPScores"),
        ({"bag": [0.1, float("nan")]}, "'bag' has 1 non-finite"),
        ({"toy": [float("inf"), 0.2, float("-inf")]}, "'toy' has 2 non-finite"),
    ],
)
def test_errors_name_the_problem_and_the_object(data, match):
    with pytest.raises(ValueError, match=match):
        object_consistency(data)


def test_cosine_similarities_match_a_loop():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(7, 5)), rng.normal(size=(7, 5))
    expected = [float(x @ y / math.sqrt((x @ x) * (y @ y))) for x, y in zip(a, b)]
    np.testing.assert_allclose(cosine_similarities(a, b), expected, rtol=1e-12)
    # Raw cosines: a negative similarity stays negative (no clamping, no x100).
    assert cosine_similarities([[1.0, 0.0]], [[-1.0, 0.0]]).tolist() == [-1.0]


@pytest.mark.parametrize(
    "a, b, match",
    [
        (np.ones((2, 3)), np.ones((3, 3)), r"same shape, but got \(2, 3\) and \(3, 3\)"),
        (np.ones(3), np.ones(3), "2-D"),
        ([[0.0, 0.0]], [[1.0, 0.0]], "zero norm"),
    ],
)
def test_cosine_similarities_errors(a, b, match):
    with pytest.raises(ValueError, match=match):
        cosine_similarities(a, b)
