"""Decomposed-DIG follows its paper where the fork's code departs from it, and the fork where the paper is
silent (issue #15, findings 4, 5 and 6). Every expected number below was worked out by hand from 1-D
features with k = 1 (radius of a real point = distance to its nearest other real point; a generated
point is inside a ball iff its distance is strictly less than the radius; precision = share of the
generated images inside some ball, over every generated image of the group; coverage = share of the
real points whose ball holds a generated point with a feature).
"""

from __future__ import annotations

import numpy as np
import pytest

from t2i_fairness.families import FAMILIES
from t2i_fairness.metrics.manifold import ReferenceManifold
from t2i_fairness.spine.options import resolve_options

NAN = float("nan")


def col(*values):
    return np.array(values, dtype=np.float64).reshape(-1, 1)


def family_options(**given):
    raw = {"--t2i-reference": []}
    raw.update(given)
    return resolve_options(lambda flag: raw.get(flag), families=FAMILIES).family("decomposed")


# -- finding 4: "no background" means no background patch (paper), not fewer than 25 (fork) ----------

REAL_BG = [0.0, 1.0, 10.0, 11.0]
REAL_BG_PATCHES = [100, 100, 20, 100]
GEN_BG = [0.5, 10.5, 30.0]
GEN_BG_PATCHES = [150, 10, 150]


def bg_scores(min_bg_patches):
    from t2i_fairness.families.decomposed.rules import background_misses, score_setup, select_real

    sel = select_real(["bag"] * 4, [True] * 4, [True] * 4, bg_patches=REAL_BG_PATCHES, min_bg_patches=min_bg_patches)
    real = col(*REAL_BG)[sel.keep_bg]
    m = ReferenceManifold.build(real, nearest_k=1)
    fake = col(*GEN_BG)
    fake[background_misses([True] * 3, GEN_BG_PATCHES, min_bg_patches)] = NAN
    return sel, score_setup(m, fake)


def test_a_background_needs_one_patch_as_the_paper_says():
    # radii 1, 1, 1, 1; 0.5 lies in the ball of 0, 10.5 in that of 10, 30 in none -> precision 2/3;
    # 0 and 1 hold 0.5, 10 and 11 hold 10.5 -> coverage 4/4.
    sel, s = bg_scores(1)
    assert sel.keep_bg.tolist() == [True, True, True, True]
    assert (s.precision, s.coverage, s.n_fake) == (pytest.approx(2 / 3), 1.0, 3)


def test_the_fork_s_25_background_patches_are_an_option():
    # Real 10 (20 patches) leaves BG-only: radii of 0, 1, 11 are 1, 1, 10. Generated 10.5 (10 patches)
    # is a miss: precision 1/3 (0.5 only). Coverage with 0.5 and 30: 0 and 1 yes, 11 (|11-0.5| = 10.5,
    # not < 10) no -> 2/3.
    sel, s = bg_scores(25)
    assert sel.keep_bg.tolist() == [True, True, False, True]
    assert sel.keep.tolist() == [True] * 4  # it stays in Obj-only and Full, and is no segmentation failure
    assert sel.report()["real_below_bg_min_patches"] == 1
    assert (s.precision, s.coverage, s.n_fake, s.n_missing) == (pytest.approx(1 / 3), pytest.approx(2 / 3), 3, 1)


def test_25_background_patches_are_enough_and_24_are_not():
    from t2i_fairness.families.decomposed.rules import background_misses, select_real

    sel = select_real(["bag"] * 2, [True] * 2, [True] * 2, bg_patches=[24, 25], min_bg_patches=25)
    assert sel.keep_bg.tolist() == [False, True]
    assert background_misses([True, True], [24, 25], 25).tolist() == [True, False]


def test_an_unsegmented_generated_image_is_used_whole_in_bg_only_or_missed_as_the_fork_does():
    from t2i_fairness.families.decomposed.rules import background_misses, score_setup

    # Real 0, 1, 10 (radii 1, 1, 9). Generated 0.5 (segmented), 0.6 (no mask: its BG-only feature is
    # the whole image), 30. Paper: 0.5 and 0.6 inside -> precision 2/3; 0 and 1 covered -> 2/3.
    # Fork: 0.6 is a miss -> precision 1/3; 0 and 1 still hold 0.5 -> coverage 2/3.
    m = ReferenceManifold.build(col(0.0, 1.0, 10.0), nearest_k=1)
    segmented = [True, False, True]
    whole = col(0.5, 0.6, 30.0)
    s = score_setup(m, whole)
    assert (s.precision, s.coverage) == (pytest.approx(2 / 3), pytest.approx(2 / 3))
    missed = col(0.5, 0.6, 30.0)
    missed[background_misses(segmented, unsegmented="miss")] = NAN
    s = score_setup(m, missed)
    assert (s.precision, s.coverage, s.n_fake) == (pytest.approx(1 / 3), pytest.approx(2 / 3), 3)
    assert not background_misses(segmented).any()  # the paper's default changes nothing


def test_the_background_options_default_to_the_paper_and_switch_to_the_fork():
    o = family_options()
    assert (o.bg_min_patches, o.bg_unsegmented) == (1, "whole")
    o = family_options(**{"--t2i-bg-min-patches": 25, "--t2i-bg-unsegmented": "miss"})
    assert (o.bg_min_patches, o.bg_unsegmented) == (25, "miss")


# -- finding 5: a class goes with over 100 failures of 1,020 images ---------------------------------

def excluded(failures, images=1020, limit=None):
    from t2i_fairness.families.decomposed.rules import select_real

    has_object = [i >= failures for i in range(images)]
    args = () if limit is None else (limit,)
    return "hand_soap" in select_real(["hand_soap"] * images, has_object, [True] * images, *args).excluded_classes


@pytest.mark.parametrize("failures, paper, rate", [(100, False, False), (101, True, False), (102, True, False),
                                                   (103, True, True)])
def test_a_class_with_over_100_failures_of_1020_is_excluded(failures, paper, rate):
    # The paper: "over 100 segmentation failures out of 1020 images"; the rate 0.1 keeps 101 and 102
    # (102/1020 is exactly 0.1, not above it).
    assert excluded(failures) is paper
    assert excluded(failures, limit="0.1") is rate


def test_the_rule_is_proportional_for_other_sizes():
    # 1,080 images (180 x 6): 106 x 1020 = 108,120 > 100 x 1080 = 108,000; 105 x 1020 = 107,100 is not.
    assert excluded(105, 1080) is False
    assert excluded(106, 1080) is True


def test_the_failure_limit_option_defaults_to_the_paper_s_words():
    paper = family_options(**{"--t2i-preset": "paper"})
    assert paper.limit_text == "100/1020" and paper.failure_limit * 1020 == 100
    assert family_options(**{"--t2i-segmentation-failure-limit": "0.1"}).failure_limit * 10 == 1
    from t2i_fairness.errors import OptionError

    with pytest.raises(OptionError, match="--t2i-segmentation-failure-limit: must be FAILURES/IMAGES"):
        family_options(**{"--t2i-segmentation-failure-limit": "ten"})


# -- finding 6: generated images are not de-duplicated (the fork) unless asked ----------------------

REAL = col(0.0, 1.0, 5.0, 6.0)  # radii all 1
FAKE = col(0.2, 0.2, 0.2, 5.5, 20.0, 30.0)


def test_generated_duplicates_stay_in_the_denominator_as_in_the_fork():
    from t2i_fairness.families.decomposed.rules import score_setup

    # No dedupe: 0.2 (x3) and 5.5 inside -> precision 4/6; 0 and 1 hold 0.2, 5 and 6 hold 5.5 -> 4/4.
    m = ReferenceManifold.build(REAL, nearest_k=1)
    s = score_setup(m, FAKE)
    assert (s.precision, s.coverage, s.n_fake, s.n_duplicates) == (pytest.approx(4 / 6), 1.0, 6, 0)


def test_drop_all_on_generated_images_is_the_option():
    from t2i_fairness.families.decomposed.rules import score_setup

    # drop_all leaves 5.5, 20, 30: precision 1/3; 5 and 6 covered -> 2/4.
    m = ReferenceManifold.build(REAL, nearest_k=1)
    s = score_setup(m, FAKE, dedupe="drop_all")
    assert (s.precision, s.coverage, s.n_fake, s.n_duplicates) == (pytest.approx(1 / 3), 0.5, 3, 3)
    # the same rows found as duplicates over a whole template (--t2i-dedupe-scope set) count the same
    gone = np.array([True, True, True, False, False, False])
    s = score_setup(m, FAKE, duplicates=gone)
    assert (s.precision, s.coverage, s.n_fake, s.n_duplicates) == (pytest.approx(1 / 3), 0.5, 3, 3)


def test_the_study_s_auto_fake_dedupe_is_the_fork_s_none():
    from types import SimpleNamespace

    from t2i_fairness.families.decomposed.study import DecomposedStudy

    study = DecomposedStudy.__new__(DecomposedStudy)
    for given, expected in (("auto", "none"), ("drop_all", "drop_all")):
        study.bench = SimpleNamespace(options=SimpleNamespace(fake_dedupe=given, dedupe="drop_all"))
        assert study.fake_dedupe() == expected


# -- the options through the study, end to end (the suite of tests/test_decomposed_gates.py) -----------

from test_decomposed_gates import run, suite  # noqa: E402,F401  (the pytester suite with its masks)


def test_the_fork_s_bg_rules_run_through_the_study(suite):
    import json

    # "bag in Africa" #0 has an empty mask: whole in BG-only by default, a BG-only miss with `miss`.
    # Every other mask is a corner square of a third of the side: on the tiny ViT's 4 x 4 grid of
    # 16-px patches it covers 2 x 2 patches, leaving 12 background patches (>= 2: nothing leaves).
    result = run(suite, "-k", "bg_coverage and object_in_region and africa", "--t2i-update-thresholds",
                 "--t2i-bg-min-patches", "2", "--t2i-bg-unsegmented", "miss", "--t2i-fake-dedupe", "drop_all",
                 "--t2i-dedupe-scope", "group")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "*BG-only needs 2 background patches; unsegmented generated images are BG-only misses*",
        "*real images with fewer than 2 background patches (left out of BG-only): 0*",
        # the selection reads Africa alone (triage): its 3 bags, its 3 stoves of the excluded class
        "*{object} in {region}: 3 generated images (3 more of excluded classes left out), 1 without object "
        "segmentation (misses in Obj-only, misses in BG-only too), 0 with fewer than 2 background patches*",
    ])
    data = json.loads((suite.path / "art" / "test_bg_coverage[mini-object_in_region-africa]" / "decomposed_dig.json").read_text())
    africa = data["templates"]["object_in_region"]["regions"]["africa"]["bg"]
    assert (africa["n_fake"], africa["n_missing"]) == (3, 1)  # the 3 bags; the unsegmented one a miss
    assert data["real_images"]["min_bg_patches"] == 2
