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
    counts = np.bincount([u.cluster for u in big])
    assert len(big) == 30 and counts.max() - counts.min() <= 1  # a second round only once each prompt has one
    assert len(draw_sample({"g2": a}, 10_000, seed=1)) == len(a.units)  # a smaller group: all of it


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
    assert "audit: 16 units of 48 judged, 1 group(s) of 1 gate(s), up to 16 per group" in out  # ceil((1.96/.5)^2)
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
    with pytest.raises(LabelsError, match=r"l3.csv:3: unit .* is labelled twice \(first on line 2\)"):
        read_labels(_labels(tmp_path / "l3.csv", [good, good]), 0)
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
