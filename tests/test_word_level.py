"""The word-level pipeline (issue #6) on synthetic generators whose group probability per prompt is known.

The transmuter appends ``~j`` to a replaced word (candidate ``j``); the labeller gives image ``i``
of a text group 1 ("female") with a known probability, either exactly (a period-4 pattern, so a
text with ``p = 3/4`` has exactly 3 of every 4 images in the group) or at random.  Influences are
checked against Definition 1 written out here independently: ``p(T)`` is the mean of the
candidates' probabilities, ``I_k(w_i)`` the mean over sets ``S`` of ``k - 1`` other words of
``p(S + {i}) - p(S)``.
"""

from __future__ import annotations

import hashlib
import itertools
import math

import numpy as np
import pytest

from t2i_fairness.metrics.word_influence import WORKED_EXAMPLES, average_word_influence
from t2i_fairness.families.word_influence.report import representation_lines, table_lines
from t2i_fairness.families.word_influence.study import (
    analyse,
    check_template,
    counts_summary,
    observe,
    parse_groups,
    parse_levels,
    plan_prompts,
    representation_ids,
    run,
    slug,
    suite_levels,
    suite_prompts,
    word_ids,
    zero_shot_labels,
)

GROUPS = ("male", "female")
DOCTOR, CEO = WORKED_EXAMPLES


def tilde(words, indices, m):
    """Candidate j of every replaced word is ``word~j``."""
    return [[f"{w}~{j}" if i in indices else w for i, w in enumerate(words)] for j in range(m)]


def exact_labeller(p_female):
    """Image i of a text is female iff (i mod 4) < 4 p(text): exact shares for N multiple of 4."""
    def labels(texts, n):
        out = []
        for t in texts:
            q = round(4 * p_female(t))
            assert math.isclose(q, 4 * p_female(t)), "exact labeller needs quarters"
            out.append([(f"{t}#{i}", int(i % 4 < q)) for i in range(n)])
        return out
    return labels


def random_labeller(p_female, seed):
    """Image i of a text is female with probability p(text), independently (seeded by text, i)."""
    def labels(texts, n):
        out = []
        for t in texts:
            row = []
            for i in range(n):
                u = int.from_bytes(hashlib.sha256(f"{seed}|{t}|{i}".encode()).digest()[:8], "big") / 2**64
                row.append((f"{t}#{i}", int(u < p_female(t))))
            out.append(row)
        return out
    return labels


def replaced(text):
    """{original word: candidate index} for every replaced word of a text."""
    out = {}
    for w in text.split():
        if "~" in w:
            word, j = w.split("~")
            out[word] = int(j)
    return out


def doctor_p(text):
    """A respected doctor: replacing doctor adds 1/2, respected 1/4, hospital 1/4 for candidate 0 only."""
    r = replaced(text)
    p = 0.5 * ("doctor" in r) + 0.25 * ("respected" in r) + 0.25 * (r.get("hospital") == 0)
    return min(p, 1.0)


def ceo_p(text):
    """Figure 2's pattern: only male images unless both "ceo" and "company" are replaced."""
    r = replaced(text)
    return 0.5 if {"ceo", "company"} <= set(r) else 0.0


def expected_influence(prompt, p, m, k, i):
    """Definition 1 from scratch: p(T) = mean of the m candidates' p; I_k = mean over S of the marginal."""
    words = prompt.split()

    def p_set(t):
        if not t:
            return p(prompt)
        return np.mean([p(" ".join(ws)) for ws in tilde(words, sorted(t), m)])

    others = [j for j in range(len(words)) if j != i]
    diffs = [p_set(frozenset(s) | {i}) - p_set(frozenset(s)) for s in itertools.combinations(others, k - 1)]
    return float(np.mean(diffs))


def rows_of(result, prompt, group, k):
    return [r for r in result.per_prompt if r.prompts == (prompt,) and r.group == group and r.k == k]


# ----------------------------------------------------------------------------- Definition 1 on known probabilities


@pytest.mark.parametrize("k", [1, 2])
def test_influences_match_definition_on_a_known_generator(k):
    m, n = 3, 4
    res = run([DOCTOR], GROUPS, [k], tilde, exact_labeller(doctor_p), m=m, images_per_text=n, n_resamples=50)
    rows = rows_of(res, DOCTOR, "female", k)
    assert [r.word for r in rows] == DOCTOR.split()
    for i, r in enumerate(rows):
        assert r.influence == pytest.approx(expected_influence(DOCTOR, doctor_p, m, k, i), abs=1e-12)
    by_word = {r.word: r.influence for r in rows}
    if k == 1:
        assert by_word["doctor"] == pytest.approx(0.5)
        assert by_word["respected"] == pytest.approx(0.25)
        assert by_word["hospital"] == pytest.approx(0.25 / 3)  # p(T) is the mean over the 3 candidates
        assert by_word["a"] == by_word["at"] == by_word["the"] == 0.0
    # two groups: every image is in exactly one, so the male influences mirror the female ones
    for f, mm in zip(rows, rows_of(res, DOCTOR, "male", k)):
        assert mm.influence == pytest.approx(-f.influence, abs=1e-12)


def test_k2_reveals_what_k1_misses_as_in_figure_2():
    m, n = 3, 4
    res = run([CEO], GROUPS, [1, 2], tilde, exact_labeller(ceo_p), m=m, images_per_text=n, n_resamples=0)
    k1 = {r.word: r.influence for r in rows_of(res, CEO, "female", 1)}
    k2 = {r.word: r.influence for r in rows_of(res, CEO, "female", 2)}
    assert set(k1.values()) == {0.0}
    assert k2["ceo"] == pytest.approx(0.5 / 6) and k2["company"] == pytest.approx(0.5 / 6)  # only S = {the other}
    assert all(v == 0.0 for w, v in k2.items() if w not in ("ceo", "company"))
    for i, w in enumerate(CEO.split()):
        assert k2[w] == pytest.approx(expected_influence(CEO, ceo_p, m, 2, i), abs=1e-12)


def test_group_probabilities_and_representation():
    res = run([DOCTOR], GROUPS, [1], tilde, exact_labeller(doctor_p), m=3, images_per_text=4, n_resamples=0)
    probs = res.probabilities[DOCTOR]
    assert probs[frozenset()] == {"male": 1.0, "female": 0.0}
    assert probs[frozenset({2})]["female"] == pytest.approx(0.5)
    rep = res.prompt_representation(DOCTOR, "female")
    assert (rep.p, rep.gap, rep.n_images) == (0.0, 0.5, 12)  # the original prompt gets m x N images
    lo, hi = rep.interval
    assert lo <= rep.gap <= hi and hi == pytest.approx(0.5)
    assert rep.hoeffding == pytest.approx(math.sqrt(math.log(2 / 0.05) / (2 * 12)))


def test_representation_gap_with_three_groups():
    def labels(texts, n):
        return [[(f"{t}#{i}", i % 3 if i % 2 else 0) for i in range(n)] for t in texts]

    res = run(["a nurse"], ("a", "b", "c"), [1], tilde, labels, m=2, images_per_text=6, n_resamples=0)
    p = {g: res.prompt_representation("a nurse", g).p for g in "abc"}
    assert sum(p.values()) == pytest.approx(1.0)
    for g in "abc":
        assert res.prompt_representation("a nurse", g).gap == pytest.approx(abs(p[g] - 1 / 3))


# ----------------------------------------------------------------------------- confidence


def test_hoeffding_half_width_shrinks_as_one_over_sqrt_n():
    widths = {}
    for n in (2, 8, 32):
        res = run(list(WORKED_EXAMPLES), GROUPS, [1, 2], tilde, exact_labeller(lambda t: 0.0), m=3,
                  images_per_text=n, n_resamples=0)
        widths[n] = [r.hoeffding for r in res.per_prompt + res.words] + [r.hoeffding for r in res.representation]
    for small, big in ((2, 8), (8, 32)):
        ratios = np.array(widths[big]) / np.array(widths[small])
        assert ratios == pytest.approx(0.5, abs=1e-12)  # 4x the images, half the width


def test_hoeffding_half_width_formula_per_prompt():
    """Each distribution has m N images; C sets on each side: sqrt(log(2/delta) / (C m N))."""
    m, n = 3, 4
    res = run([DOCTOR], GROUPS, [1, 2], tilde, exact_labeller(doctor_p), m=m, images_per_text=n, n_resamples=0)
    for k, c in ((1, 1), (2, 5)):
        for r in rows_of(res, DOCTOR, "female", k):
            assert r.hoeffding == pytest.approx(math.sqrt(math.log(40) / (c * m * n)))
            assert r.n_images == 2 * c * m * n


def test_estimates_fall_within_hoeffding_on_a_random_generator():
    m, n, inside, total = 3, 8, 0, 0
    for seed in range(8):
        res = run([DOCTOR], GROUPS, [1, 2], tilde, random_labeller(doctor_p, seed), m=m, images_per_text=n,
                  n_resamples=0)
        for k in (1, 2):
            for i, r in enumerate(rows_of(res, DOCTOR, "female", k)):
                total += 1
                inside += abs(r.influence - expected_influence(DOCTOR, doctor_p, m, k, i)) <= r.hoeffding
    assert inside / total >= 0.95


def test_bootstrap_interval_brackets_the_estimate_and_is_seeded():
    kw = dict(m=3, images_per_text=8, n_resamples=300)
    a = run([DOCTOR], GROUPS, [1], tilde, random_labeller(doctor_p, 1), seed=3, **kw)
    b = run([DOCTOR], GROUPS, [1], tilde, random_labeller(doctor_p, 1), seed=3, **kw)
    assert [r.bootstrap for r in a.per_prompt] == [r.bootstrap for r in b.per_prompt]
    for r in a.per_prompt:
        lo, hi = r.bootstrap
        assert lo - 1e-12 <= r.influence <= hi + 1e-12
        assert hi - lo <= 2 * r.hoeffding  # the bootstrap is the tighter, approximate one


# ----------------------------------------------------------------------------- Figure 3 averages


def test_averaged_rows_are_figure_3_means():
    prompts = ["a caring nurse at the spa", "a rational doctor at the office", "a caring doctor at the gym"]

    def p(text):
        r = replaced(text)
        return min(1.0, 0.25 * ("doctor" in r) + 0.5 * ("caring" in r) + 0.25 * ("spa" in r))

    res = run(prompts, GROUPS, [1], tilde, exact_labeller(p), m=3, images_per_text=4, n_resamples=100)
    per_prompt = [[r.influence for r in rows_of(res, q, "female", 1)] for q in prompts]
    means = average_word_influence(prompts, per_prompt)
    got = {r.word: r for r in res.words if r.group == "female"}
    assert list(got) == list(means)
    for word, value in means.items():
        assert got[word].influence == pytest.approx(value, abs=1e-12)
    assert got["caring"].prompts == (prompts[0], prompts[2])
    # a word of one prompt: the averaged row is that prompt's row, bounds included
    only = rows_of(res, prompts[1], "female", 1)[1]
    assert only.word == "rational"
    assert got["rational"].hoeffding == pytest.approx(only.hoeffding)
    assert got["rational"].bootstrap == pytest.approx(only.bootstrap)
    assert got["rational"].n_images == only.n_images
    # an average over J independent prompts has sqrt(J) times less Hoeffding width
    assert got["a"].hoeffding == pytest.approx(rows_of(res, prompts[0], "female", 1)[0].hoeffding / math.sqrt(3))


def test_an_image_shared_by_two_prompts_counts_once():
    """'a nurse' is a suite prompt and a candidate of 'a doctor' (doctor -> nurse): its images are shared."""
    def to_nurse(words, indices, m):
        return [["nurse" if (i in indices and w == "doctor") else (f"{w}~{j}" if i in indices else w)
                 for i, w in enumerate(words)] for j in range(m)][:1 if words[1] == "doctor" and 1 in indices else m]

    res = run(["a doctor", "a nurse"], GROUPS, [1], to_nurse, exact_labeller(lambda t: 0.0), m=2,
              images_per_text=4, n_resamples=0)
    plans = plan_prompts(["a doctor", "a nurse"], [1], to_nurse, 2, 4)
    assert plans[0].distributions[frozenset({1})].texts == ("a nurse",)
    # "a": both prompts' {} and {0} sets, 8 images each, nothing shared -> 32 images
    assert res.word("a", "female", 1).n_images == 32
    # "doctor" (prompt 1 only): 'a doctor' x 8 and 'a nurse' x 4 -> 12; in the averaged rows nothing double counts
    assert res.word("doctor", "female", 1).n_images == 12
    summary = counts_summary(plans)
    # 8 texts; 'a nurse' is made once with 8 images (its first 4 serve 'a doctor'), so 40 images, not 44
    assert summary == {"texts": 8, "images": 8 + 4 + 4 + 8 + 4 + 4 + 4 + 4, "distributions": 6}


def test_shared_images_sum_their_coefficients():
    """Hoeffding over distinct images: an image used with weights +a and +b contributes (a + b)^2."""
    def same(words, indices, m):  # every replacement of prompt 0's word 1 is prompt 1
        if words == ["x", "y"] and list(indices) == [1]:
            return [["x", "z"]]
        return tilde(words, indices, m)

    res = run(["x y", "x z"], GROUPS, [1], same, exact_labeller(lambda t: 0.0), m=1, images_per_text=4,
              n_resamples=0)
    # word "x": average of I(x) in both prompts; weights per image of each set: +-1/2 / 4
    # 'x y' and 'x z' (the originals) appear once each with -1/8; 'x~0 y', 'x~0 z' with +1/8 -> 16 images
    x = res.word("x", "female", 1)
    assert x.n_images == 16
    assert x.hoeffding == pytest.approx(math.sqrt(math.log(40) / 2 * 16 / 64))
    # word "z" (prompt 1 only): 'x z~0' +1/4 and 'x z' -1/4 per image: 8 images
    assert res.word("z", "female", 1).hoeffding == pytest.approx(math.sqrt(math.log(40) / 2 * 8 / 16))


# ----------------------------------------------------------------------------- planning, labels, ids, errors


def test_plan_sizes_and_original_gets_m_times_n():
    plans = plan_prompts(list(WORKED_EXAMPLES), [1, 2], tilde, 3, 2)
    sizes = [len(p.distributions) for p in plans]
    assert sizes == [1 + 6 + 15, 1 + 7 + 21]
    for p in plans:
        assert p.distributions[frozenset()].n_images == 6
        assert all(d.n_images == 6 for d in p.distributions.values())
    assert counts_summary(plans) == {"texts": 2 + 3 * (6 + 15 + 7 + 21), "images": 12 + 6 * (6 + 15 + 7 + 21),
                                     "distributions": 22 + 29}


def test_level_longer_than_a_prompt_is_skipped_for_it():
    plans = plan_prompts(["a b c", "d"], [1, 2], tilde, 2, 1)
    assert [p.levels for p in plans] == [(1, 2), (1,)]
    res = analyse(plans, observe(plans, exact_labeller(lambda t: 0.0)), GROUPS, n_resamples=0)
    assert {r.word for r in res.words if r.k == 2} == {"a", "b", "c"}


@pytest.mark.parametrize(
    "args, match",
    [
        ((["a b", "a b"], [1], tilde, 3, 2), "distinct"),
        ((["a b"], [3], tilde, 3, 2), "exceed every prompt"),
        ((["a b"], [], tilde, 3, 2), "at least one influence level"),
        ((["a b"], [1], tilde, 0, 2), "`m`"),
        ((["a b"], [1], tilde, 3, 0), "`images_per_text`"),
        ((["a b"], [1], lambda w, i, m: [], 3, 2), "returned no prompt"),
        (([], [1], tilde, 3, 2), "at least one prompt"),
    ],
)
def test_plan_errors(args, match):
    with pytest.raises(ValueError, match=match):
        plan_prompts(*args)


def test_observe_and_analyse_errors():
    plans = plan_prompts(["a b"], [1], tilde, 2, 2)
    with pytest.raises(ValueError, match="returned 1 images"):
        observe(plans, lambda texts, n: [[("k", 0)] for _ in texts])
    obs = observe(plans, lambda texts, n: [[(f"{t}{i}", 2) for i in range(n)] for t in texts])
    with pytest.raises(ValueError, match=r"range\(2\)"):
        analyse(plans, obs, GROUPS)
    with pytest.raises(ValueError, match="at least 2 distinct groups"):
        analyse(plans, obs, ["male"])
    with pytest.raises(KeyError, match="no images"):
        analyse(plans, {}, GROUPS)
    with pytest.raises(ValueError, match="confidence"):
        analyse(plans, obs, ("a", "b", "c"), confidence=1.0)


def test_zero_shot_labels():
    img = np.array([[1.0, 0.0], [0.0, 1.0], [0.8, 0.6]])
    assert zero_shot_labels(img, np.array([[0.0, 1.0], [1.0, 0.0]])).tolist() == [1, 0, 1]
    with pytest.raises(ValueError, match="same width"):
        zero_shot_labels(img, np.ones((2, 3)))
    with pytest.raises(ValueError, match="at least 2 groups"):
        zero_shot_labels(img, np.ones((1, 2)))


def test_ids_are_readable_and_unique():
    ids = [c[3] for c in word_ids(list(WORKED_EXAMPLES), GROUPS, [1, 2])]
    assert "doctor-female" in ids and "500-male" in ids and "ceo-female-k2" in ids
    assert len(ids) == len(set(ids)) == 2 * 2 * 11  # 11 distinct words ("a", "the" shared)
    assert word_ids(["New-York", "new york"], ["x"], [1])[-1][3] == "york-x"
    assert [c[3] for c in word_ids(["A a"], ["g"], [1])] == ["a-g", "a_2-g"]
    assert representation_ids([CEO], ["Light-skinned person"])[0][2] == "the_ceo_of_a_fortune_500_company-light_skinned_person"
    assert slug("!!") == "_"


def test_default_levels_are_the_papers_and_ids_follow_them():
    levels = suite_levels("examples")
    assert levels == {DOCTOR: (1,), CEO: (1, 2)}  # Table 1 and Figure 2
    ids = [c[3] for c in word_ids(list(levels), GROUPS, levels)]
    assert "doctor-female" in ids and "ceo-female-k2" in ids and "doctor-female-k2" not in ids
    assert len(ids) == 2 * (11 + 7)
    assert suite_levels("examples", [2])[DOCTOR] == (2,)
    assert set(suite_levels("all").values()) == {(1,), (1, 2)}
    plans = plan_prompts(list(levels), levels, tilde, 3, 2)
    assert [len(p.distributions) for p in plans] == [1 + 6, 1 + 7 + 21]
    assert counts_summary(plans)["images"] == 6 * (2 + 6 + 7 + 21)  # 216 images at the tiny default
    with pytest.raises(ValueError, match="no entry"):
        plan_prompts([DOCTOR, "a b"], {DOCTOR: [1]}, tilde, 3, 2)


def test_settings_parsers():
    assert suite_prompts("examples") == list(WORKED_EXAMPLES)
    assert len(suite_prompts("paper")) == 150
    with pytest.raises(ValueError, match="examples, paper, all"):
        suite_prompts("mine")
    with pytest.raises(ValueError, match="at least 2"):
        parse_groups("male")
    with pytest.raises(ValueError, match="same test id"):
        parse_groups("light skin,light-skin")
    with pytest.raises(ValueError, match="must contain"):
        check_template("a photo of a person")
    with pytest.raises(ValueError, match="only field"):
        check_template("a {style} photo of a {group}")
    with pytest.raises(ValueError, match="longest has 7"):
        parse_levels("1,8", WORKED_EXAMPLES)
    with pytest.raises(ValueError, match="integers >= 1"):
        parse_levels("0", WORKED_EXAMPLES)
    with pytest.raises(ValueError, match="integers >= 1"):
        parse_levels("one", WORKED_EXAMPLES)


def test_table_lines():
    res = run([DOCTOR], GROUPS, [1], tilde, exact_labeller(doctor_p), m=3, images_per_text=4, n_resamples=50)
    lines = table_lines(res)
    assert any("hoeffding 95%" in line and "bootstrap 95%" in line for line in lines)
    doctor = next(line for line in lines if line.startswith("doctor") and "female" in line)
    assert "+0.500" in doctor and "+-" in doctor and "[" in doctor
    assert any(DOCTOR in line and "p(female)=0.000" in line for line in lines)
    assert not any(DOCTOR in line for line in table_lines(res, per_prompt=False))
    off = run([DOCTOR], GROUPS, [1], tilde, exact_labeller(doctor_p), m=3, images_per_text=4, n_resamples=0)
    assert all(r.bootstrap is None for r in off.words)
    assert " - " in next(line for line in table_lines(off) if line.startswith("doctor"))
    rep = representation_lines(res)
    assert rep[0].startswith("prompt") and any("0.500" in line for line in rep[2:])
    assert off.to_json()["words"][0]["bootstrap"] is None
