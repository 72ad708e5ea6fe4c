"""metrics/agreement.py against independent references: scipy's exact binomial interval, brute-force
counting, the flip margin moved onto the bound, and the audited interval's width from PPI's variance."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st
from scipy.stats import binomtest

from t2i_fairness.metrics.agreement import (
    Agreement, Judgement, agreement_by_group, clopper_pearson, disagreeing, flip_margin, labels_for_width,
)


@given(st.integers(1, 200).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
@settings(max_examples=60, deadline=None)
def test_clopper_pearson_is_scipys_exact_interval(kn):
    k, n = kn
    ref = binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    assert clopper_pearson(k, n) == pytest.approx((ref.low, ref.high), abs=1e-9)


def test_agreement_by_group_counts_as_brute_force():
    rng = np.random.default_rng(0)
    groups, judged, truth = rng.choice(["a", "b", "c"], 500), rng.random(500) < 0.6, rng.choice([True, False, None], 500)
    js = [Judgement(str(i), "p", "q", g, "gate", bool(j), t) for i, (g, j, t) in enumerate(zip(groups, judged, truth))]
    got = agreement_by_group(js)
    for g in "abc":
        labelled = [(j, t) for gg, j, t in zip(groups, judged, truth) if gg == g and t is not None]
        pos = [j for j, t in labelled if t]
        neg = [j for j, t in labelled if not t]
        assert (got[g].positives, got[g].hits, got[g].negatives, got[g].rejections) == (
            len(pos), sum(pos), len(neg), sum(not j for j in neg))
        assert got[g].disagreement == pytest.approx((len(pos) - sum(pos) + sum(neg)) / len(labelled))


def test_disagreeing_names_only_groups_whose_interval_lies_below_the_floor():
    sure = Agreement("missed", 50, 10, 50, 50)  # sensitivity 0.2 [0.10, 0.34]
    unsure = Agreement("few", 2, 1, 0, 0)  # 0.5 [0.01, 0.99]: could be fine
    fine = Agreement("fine", 100, 99, 100, 100)
    assert [a.group for a in disagreeing([sure, unsure, fine])] == ["missed"]


@given(st.sampled_from(["min", "max"]), st.floats(0.05, 0.95), st.floats(0.0, 0.9), st.floats(0.01, 0.1))
def test_moving_the_interval_by_the_flip_margin_puts_its_deciding_end_on_the_bound(direction, bound, low, width):
    interval = (low, low + width)
    margin = flip_margin(direction, bound, interval)
    end = interval[1] if direction == "min" else interval[0]
    moved = end + margin if end < bound else end - margin
    assert moved == pytest.approx(bound)


@given(st.floats(1e-3, 0.1), st.floats(0.01, 0.5), st.floats(1.05, 2.0))
@example(0.001, 0.5, 1.5)  # 0.25 / (1.25 * 1e-6) is 200000 and a little float dust: 200000 labels, not 200001
def test_the_label_count_makes_the_ppi_interval_at_most_that_much_wider(se, d, ratio):
    n = labels_for_width(se, d, ratio)
    width = lambda labels: math.sqrt(se**2 + d * (1 - d) / labels)  # noqa: E731  (PPI: scorer term + rectifier term)
    assert width(n) <= ratio * se * (1 + 1e-12)
    assert n == 1 or width(n - 1) > ratio * se  # and it is the fewest


def test_bad_label_arguments_are_refused():
    with pytest.raises(ValueError, match="se"):
        labels_for_width(0.0, 0.1)
    with pytest.raises(ValueError, match="ratio"):
        labels_for_width(0.01, 0.1, ratio=1.0)


def test_an_audit_is_planned_for_the_disagreement_its_labels_cannot_rule_out():
    """A scorer that agreed with all 128 labels is not planned as never wrong (1 label): the plan uses the
    disagreement's 95% upper limit (0.023), so it asks for labels in the hundreds at a 0.03 standard error."""
    from types import SimpleNamespace

    from t2i_fairness.report.judged import judged_lines, planned_disagreement

    assert planned_disagreement(0.0, 128) == pytest.approx(1 - 0.05 ** (1 / 128))  # Clopper-Pearson at k = 0
    record = SimpleNamespace(gate="test_cis[k2]", bound=0.7, interval=(0.75, 0.9), status="pass", direction="min",
                             uncertainty={"se": 0.03}, details={"scorer": {"judgements": 256, "judged_by": "clip",
                                                                           "disagreement": 0.0, "labels": 128}})
    (line,) = judged_lines([record])[2:]
    expected = labels_for_width(0.03, planned_disagreement(0.0, 128), 1.1)
    assert 100 < expected < 1000
    assert (f"an audit of {expected} labels gives an interval within 1.1x the scorer-only one (disagreement 0 "
            "measured on 128 labels, planned at its 95% upper limit 0.0231)") in line


def test_the_plan_says_how_many_labels_an_audit_of_the_selected_judged_gates_needs(tmp_path):
    import json

    from t2i_fairness.report.judged import audit_plan_lines, planned_disagreement

    gates = [{"gate": f"test_cis[k{k}]", "status": "pass", "uncertainty": {"se": se},
              "details": {"scorer": {"judgements": 256, "judged_by": "clip", "disagreement": 0.0, "labels": 128}}}
             for k, se in ((1, 0.03), (2, 0.02))] + [{"gate": "test_region_precision[x]", "status": "pass", "details": {}}]
    (tmp_path / "run.json").write_text(json.dumps({"gates": gates}))
    assert audit_plan_lines(tmp_path / "nowhere", ["test_cis[k1]"]) == []
    (line,) = audit_plan_lines(tmp_path, ["test_cis[k1]", "test_cis[k2]", "test_region_precision[x]"])
    most = labels_for_width(0.02, planned_disagreement(0.0, 128), 1.1)  # the narrower interval needs the most
    assert line.startswith(f"audit (from the last run, {tmp_path / 'run.json'}): {most} labels per group give each of "
                           "the 2 judged gate(s) an interval within 1.1x its scorer-only one (the most: test_cis[k2], ")
    assert audit_plan_lines(tmp_path, ["test_region_precision[x]"]) == []


def test_an_audited_judged_gate_says_it_rests_on_labels_not_on_an_assumed_scorer_error():
    from types import SimpleNamespace

    from t2i_fairness.report.judged import judged_lines

    audit = {"labels": 128, "judgements": 512, "scorer_only": {"status": "fail", "value": 0.0}}
    record = SimpleNamespace(gate="test_cis_component_rate_floor", bound=0.5, interval=(0.55, 0.93), status="pass",
                             direction="min", uncertainty={"se": 0.1},
                             details={"component": "lotion", "audit": audit,
                                      "scorer": {"judgements": 512, "judged_by": "clip", "labels": 0}})
    assert judged_lines([record])[2:] == ["test_cis_component_rate_floor (lotion): pass, audited: 128 human labels and "
                                          "512 clip judgements (scorer-only: fail, 0.0000)"]


def test_clips_object_recognition_on_the_references_labelled_images_is_judged_per_region_by_hand(tmp_path):
    """The consistency gates' scorer against the reference set's object labels: each real image judged yes where its
    own object is the closest of the run's object names. Brute force: the tiny CLIP encodes every rendered real
    image again (no cache) and the closest name is picked by hand."""
    import numpy as np

    from t2i_fairness.families.dig_in.study import DigInStudy
    from t2i_fairness.references.images import open_image
    from t2i_fairness.spine.options import T2IOptions
    from t2i_fairness.spine.workbench import Workbench
    from t2i_fairness.vocab.geode import GEODE_OBJECTS

    bench = Workbench(T2IOptions(cache_dir=tmp_path, device="cpu", progress=False))
    study = DigInStudy(bench)
    judged = study.reference_agreement()
    objects = list(bench.options.objects)
    records = [r for ref in study.reference_sets.values() for r in ref.records if r.object in objects]
    clip = bench.scorer("clip")
    image = np.asarray(clip.encode_images([open_image(r) for r in records]), dtype=float)
    text = np.asarray(clip.encode_texts([GEODE_OBJECTS[o] for o in objects]), dtype=float)
    cos = (image / np.linalg.norm(image, axis=1, keepdims=True)) @ (text / np.linalg.norm(text, axis=1, keepdims=True)).T
    expected = [objects[i] == r.object for i, r in zip(cos.argmax(axis=1), records)]
    assert [j.judged for j in judged] == expected and len(judged) == len(records) > 0
    assert [j.group for j in judged] == [r.region for r in records] and all(j.truth is True for j in judged)
    assert judged[0].question.startswith(f"Does the image show a {GEODE_OBJECTS[records[0].object]}? (CLIP picks")
    assert study.reference_agreement("africa") == [j for j in judged if j.group == "africa"] != []
