"""The human audit without a model: judged files, the sample, the page, label checks, the audited evidence."""

from __future__ import annotations

import csv
import json
import re

import numpy as np
import pytest
from PIL import Image

from t2i_fairness.audit import (JudgedShare, JudgedUnit, LabelsError, audited, draw_sample, judged_units,
                                labels_for, read_labels, write_judged)
from t2i_fairness.audit.page import write_page
from t2i_fairness.cli import main


def _share(tmp_path, prompts=12, images=2, k=2, seed=0) -> JudgedShare:
    units = []
    for j in range(prompts):
        for i in range(images):
            path = tmp_path / "img" / f"{j}-{i}.png"
            path.parent.mkdir(exist_ok=True)
            Image.new("RGB", (8, 8), (j * 20, i * 90, 7)).save(path)
            for c in range(k):
                units.append(JudgedUnit(f"{seed}-{j}-{i}#c{c}", str(path), f"A photo of c{j}.", f"Does the image show c{c}?",
                                        "CLIP picked the closest of: 'A photo of c0.' | ''", (j + i + c) % 3 > 0,
                                        f"K={k}", j))
    return JudgedShare("CLIP", tuple(units))


def _labels(path, rows, header=("seed", "gate", "unit", "question", "label")):
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    return path


def test_judged_files_round_trip_and_the_value_is_the_mean_judgement(tmp_path):
    share = _share(tmp_path)
    write_judged(tmp_path / "run", "test_cis[k2]", share, seed=3)
    seed, shares = judged_units(tmp_path / "run")
    assert seed == 3 and shares == {"test_cis[k2]": share}
    assert share.value == pytest.approx(np.mean([u.judged for u in share.units]))
    assert share.cluster_means().mean() == pytest.approx(share.value)  # equal clusters: the same mean
    with pytest.raises(ValueError, match="no judged"):
        judged_units(tmp_path / "empty")


def test_the_sample_is_seeded_stratified_and_one_unit_per_prompt_while_prompts_last(tmp_path):
    a, b = _share(tmp_path), _share(tmp_path, k=3)
    shares = {"g2": a, "g3": JudgedShare("CLIP", tuple(u.__class__(**{**u.__dict__, "unit": "b" + u.unit})
                                                       for u in b.units))}
    drawn = draw_sample(shares, 10, seed=1)
    assert drawn == draw_sample(shares, 10, seed=1) != draw_sample(shares, 10, seed=2)
    for gate in shares:
        mine = [d.unit for d in drawn if d.gate == gate]
        assert len(mine) == 10 and len({u.cluster for u in mine}) == 10  # 12 prompts: one unit each
    big = [d.unit for d in draw_sample({"g2": a}, 30, seed=1)]
    assert len(big) == 12 and len({u.cluster for u in big}) == 12  # at most one unit per prompt: 12 prompts
    # gates judging the same group of the same units draw the same ones (the page asks each once)
    assert [d.unit for d in draw_sample({"x": a, "y": a}, 5, seed=1) if d.gate == "x"] == \
        [d.unit for d in draw_sample({"x": a, "y": a}, 5, seed=1) if d.gate == "y"]


def test_the_page_is_one_offline_file_with_every_image_inline(tmp_path):
    share = _share(tmp_path)
    drawn = draw_sample({"test_cis[k2]": share}, 5, seed=0)
    page, sample = write_page(drawn, 0, tmp_path / "out")
    text = page.read_text()
    assert text.count("data:image/png;base64,") == 5
    assert not re.search(r"(src|href)=\"(https?:)?//", text) and "http://" not in text and "https://" not in text
    blob = json.loads(re.search(r'<script id="sample" type="application/json">(.*?)</script>', text, re.S)
                      .group(1).replace("<\\/", "</"))
    assert [i["unit"] for i in blob["items"]] == [d.unit.unit for d in drawn] and blob["seed"] == 0
    assert all("judged" not in i for i in blob["items"])  # labelled blind
    rows = list(csv.DictReader(sample.open()))
    assert [r["unit"] for r in rows] == [d.unit.unit for d in drawn]


def test_the_cli_writes_the_page_and_the_sample_in_seconds(tmp_path, capsys):
    import time

    write_judged(tmp_path / "run", "test_cis[k2]", _share(tmp_path), seed=0)
    start = time.perf_counter()
    assert main(["audit", str(tmp_path / "run"), "--width", "0.5"]) == 0
    assert time.perf_counter() - start < 10
    out = capsys.readouterr().out
    # ceil((1.96 / .5)^2) = 16 per group asked; 12 prompts give 12
    assert "audit: 12 units of 48 judged, 1 group(s) of 1 gate(s), up to 16 per group and one per prompt" in out
    assert ": 12 questions (one drawn for several gates is asked once" in out
    assert (tmp_path / "run" / "audit" / "audit.html").is_file()
    assert main(["audit", str(tmp_path / "nothing")]) == 2
    assert "no judged/*.json.gz" in capsys.readouterr().err


def test_labels_that_do_not_match_the_run_are_refused_with_the_file_and_line(tmp_path):
    share = _share(tmp_path)
    u = share.units[0]
    good = [0, "g", u.unit, u.question, "yes"]
    with pytest.raises(LabelsError, match=r"l1.csv:1: missing column\(s\) \['label'\]"):
        read_labels(_labels(tmp_path / "l1.csv", [good[:4]], header=("seed", "gate", "unit", "question")), 0)
    with pytest.raises(LabelsError, match=r"l2.csv:3: label 'maybe' is not yes, no or skip"):
        read_labels(_labels(tmp_path / "l2.csv", [good, [0, "g", "x", "q", "maybe"]]), 0)
    with pytest.raises(LabelsError, match=r"l3.csv:3: unit .* is labelled twice for g \(first on line 2\)"):
        read_labels(_labels(tmp_path / "l3.csv", [good, good]), 0)
    assert len(read_labels(_labels(tmp_path / "l3b.csv", [good, [0, "h", *good[2:]]]), 0)) == 2  # one unit, two gates
    with pytest.raises(LabelsError, match=r"l4.csv:2: the label file is from a run of seed 0, this run's seed is 7"):
        read_labels(_labels(tmp_path / "l4.csv", [good]), 7)
    unknown = read_labels(_labels(tmp_path / "l5.csv", [good, [0, "g", "zzz#c0", u.question, "no"]]), 0)
    with pytest.raises(LabelsError, match=r"l5.csv:3: unit 'zzz#c0' is not an image g judged in this run"):
        labels_for(unknown, "g", share)
    wrong = read_labels(_labels(tmp_path / "l6.csv", [[0, "g", u.unit, "Is it a cat?", "no"]]), 0)
    with pytest.raises(LabelsError, match=r"l6.csv:2: question 'Is it a cat\?' is not the one the scorer was asked"):
        labels_for(wrong, "g", share)
    fine = read_labels(_labels(tmp_path / "l7.csv", [good, [0, "g", share.units[1].unit, share.units[1].question,
                                                             "skip"]]), 0)
    assert labels_for(fine, "g", share) == [(0, 1)] and len(fine) == 1  # a skip is no label


def test_audited_evidence_is_ppi_on_prompt_means_and_says_what_it_rests_on(tmp_path):
    from t2i_fairness.metrics.ppi import prediction_powered

    share = _share(tmp_path)
    drawn = draw_sample({"g": share}, 10, seed=0)
    rows = [[0, "g", d.unit.unit, d.unit.question, "yes" if d.unit.judged or i % 4 == 0 else "no"]
            for i, d in enumerate(drawn)]
    labels = read_labels(_labels(tmp_path / "l.csv", rows), 0)
    result = audited("g", share, labels)
    truth = np.array([r[4] == "yes" for r in rows], float)
    judged = np.array([d.unit.judged for d in drawn], float)
    expected = prediction_powered(truth, judged, share.cluster_means(), means=True)
    assert result.evidence.as_tuple() == pytest.approx(expected.as_tuple())
    assert (result.labels, result.judgements) == (10, 48)
    sens = result.agreement["K=2"]["sensitivity"]
    assert sens[0] == pytest.approx(judged[truth == 1].mean()) and sens[3] == int(truth.sum())
    assert result.agreement["K=2"]["specificity"][0] == 1.0
    assert re.fullmatch(r"10 human labels \(.*l.csv\), 48 CLIP judgements; scorer sensitivity in K=2 0\.\d\d "
                        r"\[0\.\d\d, 0\.\d\d\] \(n=\d+\); scorer specificity in K=2 1\.00 \[0\.\d\d, 1\.00\] \(n=\d+\)",
                        result.rests_on()), result.rests_on()
    none = audited("other", share, labels)
    assert none.evidence is None and "not audited: no label of this gate" in none.rests_on()


def test_an_audited_gate_decides_on_the_labels_and_says_when_its_verdict_differs_from_the_scorer_only_one(tmp_path):
    """A scorer that says yes to everything: the scorer-only share is 1 and passes ``min 0.5``; 80 labels say the
    images show the component a quarter of the time: the audited gate fails, and says both."""
    import dataclasses
    from pathlib import Path

    from t2i_fairness.gating.gate import GateContext, decide
    from t2i_fairness.gating.indicator import Indicator
    from t2i_fairness.gating.thresholds import Bound, ThresholdFile
    from t2i_fairness.metrics.intervals import precision_interval
    from t2i_fairness.spine.options import T2IOptions

    units = tuple(JudgedUnit(f"u{j}-{i}", "", "p", "Does the image show c?", "", 1, "K=1", j)
                  for j in range(400) for i in range(4))
    share = JudgedShare("CLIP", units)
    ind = Indicator(1.0, len(units), "share", precision_interval(np.ones(len(units), bool)), judged=share)
    drawn = draw_sample({"g": share}, 80, seed=0)
    rows = [[0, "g", d.unit.unit, d.unit.question, "yes" if k % 4 == 0 else "no"] for k, d in enumerate(drawn)]
    options = dataclasses.replace(T2IOptions(), artifacts=tmp_path / "art")
    thresholds = ThresholdFile(Path("t.yaml"), {"g": Bound("min", 0.5)})
    plain = decide(ind, GateContext("g", "t::g", None, options, thresholds, dict))
    assert plain.status == "pass" and "rests on" not in plain.message
    assert judged_units(tmp_path / "art") == (0, {"g": share})  # written on every run, for the audit to sample
    labels = read_labels(_labels(tmp_path / "l.csv", rows), 0)
    record = decide(ind, GateContext("g", "t::g", None, dataclasses.replace(options, audit=labels), thresholds, dict))
    assert record.status == "fail" and record.value == pytest.approx(0.25)
    assert "rests on 80 human labels" in record.message and "1,600 CLIP judgements" in record.message
    assert "scorer specificity in K=1 0.00" in record.message
    assert "the verdict differs from the scorer-only one (pass, 1.0000): the audit changed it" in record.message
    assert record.details["audit"]["scorer_only"]["status"] == "pass"


def _worst_and_distance(tmp_path):
    """A rate floor over components c0..c2 (4 prompts x 3 images each, prompts clustered) and a word-level distance
    ``|p(text a) - p(text b) - 0|`` over two texts of 6 independent images each."""
    units = [JudgedUnit(f"{c}-{j}-{i}#{c}", "", f"p{j}", f"Does the image show {c}?", "", int((j + i) % 3 > c_i), c,
                        10 * c_i + j) for c_i, c in enumerate(("c0", "c1", "c2")) for j in range(4) for i in range(3)]
    floor = JudgedShare("CLIP", tuple(units), form="worst", total=5)
    texts = [JudgedUnit(f"{t}{i}#female", "", t, "Does the image show a female?", "", int(i < (4 if t == "a" else 1)),
                        t, i) for t in ("a", "b") for i in range(6)]
    distance = JudgedShare("CLIP", tuple(texts), form="distance", weights=(("a", 1.0), ("b", -1.0)), centre=0.0)
    return floor, distance


def test_a_worst_and_a_distance_round_trip_and_their_values_are_the_scorers_by_hand(tmp_path):
    floor, distance = _worst_and_distance(tmp_path)
    for name, share in (("floor", floor), ("influence", distance)):
        write_judged(tmp_path / "run", name, share, seed=2)
    assert judged_units(tmp_path / "run") == (2, {"floor": floor, "influence": distance})
    by_group = {c: np.mean([u.judged for u in floor.units if u.group == c]) for c in ("c0", "c1", "c2")}
    assert floor.value == min(by_group.values()) and floor.groups == ["c0", "c1", "c2"]
    assert distance.value == pytest.approx(abs(4 / 6 - 1 / 6)) and distance.groups == ["a", "b"]
    with pytest.raises(ValueError, match="`form` must be one of"):
        JudgedShare("CLIP", (), form="median")


def test_a_floor_is_the_worst_of_its_groups_audited_and_a_distance_the_union_bound_of_its_texts(tmp_path):
    from t2i_fairness.metrics.evidence import WorstOf
    from t2i_fairness.metrics.ppi import PredictionPoweredSum, prediction_powered

    floor, distance = _worst_and_distance(tmp_path)
    drawn = draw_sample({"floor": floor, "influence": distance}, 10, seed=0)
    assert len([d for d in drawn if d.gate == "floor"]) == 12  # one per prompt: 4 prompts x 3 components
    rows = [[0, d.gate, d.unit.unit, d.unit.question, "yes" if d.unit.judged else "no"] for d in drawn]
    labels = read_labels(_labels(tmp_path / "l.csv", rows), 0)
    worst = audited("floor", floor, labels)
    assert isinstance(worst.evidence, WorstOf) and worst.evidence.selection == 5
    c2 = [d.unit for d in drawn if d.gate == "floor" and d.unit.group == "c2"]
    expected = prediction_powered([u.judged for u in c2], [u.judged for u in c2], floor.by_group()["c2"].cluster_means(),
                                  means=True)
    assert worst.evidence.groups[2].as_tuple() == pytest.approx(expected.as_tuple())
    both = audited("influence", distance, labels)
    assert isinstance(both.evidence, PredictionPoweredSum) and both.evidence.estimate == pytest.approx(distance.value)
    assert both.labels == 12 and both.evidence.absolute
    # a group the value reads with no label: not audited, and the groups are named
    partial = read_labels(_labels(tmp_path / "p.csv", [r for r in rows if not r[2].startswith("c1-")]), 0)
    missing = audited("floor", floor, partial)
    assert missing.evidence is None and missing.unlabelled_groups == ("c1",)
    assert "not audited: 1 of its groups have no label in" in missing.rests_on() and "(c1)" in missing.rests_on()


def test_the_drop_per_component_is_audited_as_the_linear_form_of_its_k_groups(tmp_path):
    """CIS's drop per component is minus the least-squares slope of CIS_K over K: a linear form of the K groups'
    judged shares, each clustered by prompt; audited, the union bound of their PPI limits (no distance)."""
    from t2i_fairness.metrics.cis import degradation_slope
    from t2i_fairness.metrics.ppi import PredictionPoweredSum

    units = tuple(JudgedUnit(f"k{k}-{j}-{i}#c{c}", "", f"p{j}", f"Does the image show c{c}?", "", int((j + i + c) % 4 > 0),
                             f"K={k}", 100 * k + j) for k in (1, 2, 4) for j in range(6) for i in range(2) for c in range(k))
    ks = [1, 2, 4]
    weights = tuple((f"K={k}", -degradation_slope(ks, np.eye(3)[i])) for i, k in enumerate(ks))
    share = JudgedShare("CLIP", units, form="linear", weights=weights)
    means = [np.mean([u.judged for u in units if u.group == f"K={k}"]) for k in ks]
    assert share.value == pytest.approx(-degradation_slope(ks, means))
    drawn = draw_sample({"drop": share}, 6, seed=0)
    rows = [[0, "drop", d.unit.unit, d.unit.question, "yes" if d.unit.judged else "no"] for d in drawn]
    result = audited("drop", share, read_labels(_labels(tmp_path / "l.csv", rows), 0))
    assert isinstance(result.evidence, PredictionPoweredSum) and not result.evidence.absolute
    assert result.labels == 18 and result.evidence.low <= result.evidence.estimate <= result.evidence.high
