"""The audit answered from the procedural truth (``t2i-fairness audit RUN --from-truth``): its labels are what each
sampled image truly shows, they round-trip into ``--t2i-audit``, and with them a scorer-bias canary no longer fails
the audited gate while a real generator regression still does."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from PIL import Image

from t2i_fairness.audit import JudgedShare, JudgedUnit, draw_sample, write_judged
from t2i_fairness.audit.from_truth import write_truth_labels
from t2i_fairness.base.cache import decode_png, encode_png
from t2i_fairness.base.truth import truth_of
from t2i_fairness.cli import main
from t2i_fairness.generators.procedural import ProceduralGenerator


def _procedural_share(tmp_path) -> JudgedShare:
    gen, units = ProceduralGenerator(), []
    for j, text in enumerate(["a photo of a crab and a macaw.", "a photo of a steel drum and a crab."]):
        for seed in range(3):
            path = tmp_path / f"{j}-{seed}.png"
            path.write_bytes(encode_png(gen.generate([text], [seed])[0]))
            for c in ("crab", "macaw", "steel drum"):
                units.append(JudgedUnit(f"{j}-{seed}#{c}", str(path), text, f"Does the image show a {c}?", "", 1, "K=2",
                                        len(units)))  # each unit its own cluster: the sample draws every one
    return JudgedShare("CLIP", tuple(units))


def test_labels_from_truth_are_what_each_image_carries_and_a_non_procedural_image_is_refused(tmp_path, capsys):
    share = _procedural_share(tmp_path)
    drawn = draw_sample({"g": share}, len(share.units), seed=0)
    rows = list(csv.DictReader((write_truth_labels(drawn, 0, tmp_path)).read_text().splitlines()))
    assert len(rows) == len(share.units) and {r["label"] for r in rows} == {"yes", "no"}
    for row, d in zip(rows, drawn):  # brute force: decode each image again, read its truth
        shown = truth_of(decode_png(Path(d.unit.image).read_bytes()))["concepts"]
        assert (row["unit"], row["label"]) == (d.unit.unit, "yes" if row["unit"].split("#")[1] in shown else "no")
    plain = tmp_path / "plain.png"
    Image.new("RGB", (8, 8)).save(plain)
    write_judged(tmp_path / "run", "g", JudgedShare("CLIP", (JudgedUnit("x#crab", str(plain), "p", "q?", "", 1, "K=2", 0),)), 0)
    assert main(["audit", str(tmp_path / "run"), "--per-group", "1", "--from-truth"]) == 2
    assert "plain.png: the image of unit 'x#crab' carries no truth: --from-truth labels only a --t2i-model " \
           "procedural run" in capsys.readouterr().err


# -- the scorer-bias canary on the procedural world, audited from the truth ------------------------------------

MISS = "*=0.3"  # the smallest of 0.1, 0.2, 0.3 that fails the scorer-only CIS_2 gate at this size (0.2: inconclusive)
LABELS = 128  # one per prompt (the most the audit draws: a prompt's second unit would move with its first)
SIZES = ("--t2i-cis-k", "2", "--t2i-cis-prompts", "128", "--t2i-cis-images", "4", "-k", "test_cis and k2")


def _run(pytester, art: str, *extra):
    result = pytester.runpytest_subprocess(
        "fairness_tests/test_cis.py", "-p", "no:cacheprovider", "--t2i-model", "procedural", "--t2i-scorers",
        "procedural", "--t2i-no-progress", "--t2i-thresholds", "t.yaml", "--t2i-cache-dir", "cache",
        "--t2i-artifacts", art, *SIZES, *extra, timeout=900)
    gates = {r["gate"]: r for r in json.loads((pytester.path / art / "run.json").read_text())["gates"]}
    return result, gates["test_cis[k2]"]


@pytest.fixture
def cis_suite(pytester):
    (pytester.path / "fairness_tests").mkdir()
    shutil.copy(Path(__file__).resolve().parents[1] / "fairness_tests" / "test_cis.py", pytester.path / "fairness_tests")
    return pytester


def _audited(pytester, art: str, *extra):
    """A run, the audit of its judged units answered from the truth, and the same run decided with that audit."""
    scorer_only = _run(pytester, art, *extra)[1]
    assert main(["audit", str(pytester.path / art), "--per-group", str(LABELS), "--from-truth"]) == 0
    labels = pytester.path / art / "audit" / "labels.csv"
    assert len(labels.read_text().splitlines()) - 1 == LABELS
    result, gate = _run(pytester, art + "-audited", *extra, "--t2i-audit", str(labels))
    assert gate["details"]["audit"]["scorer_only"]["status"] == scorer_only["status"], result.stdout.str()[-3000:]
    return result, scorer_only, gate


@pytest.mark.slow  # six CIS_2 runs (128 prompts x 4 images; the images generated twice: plain and under the canary)
def test_a_scorer_bias_fails_scorer_only_but_not_audited_and_a_generator_regression_fails_both(cis_suite):
    assert _run(cis_suite, "null", "--t2i-update-thresholds")[0].ret == 0
    result, scorer_only, audited = _audited(cis_suite, "biased", "--t2i-procedural-miss", MISS)  # generator unchanged
    assert scorer_only["status"] == "fail" and scorer_only["details"]["scorer"]["pooled_disagrees"] is True
    assert audited["status"] == "pass", result.stdout.str()[-3000:]
    assert audited["details"]["audit"]["labels"] == LABELS and "the audit changed it" in audited["message"]
    assert audited["details"]["audit"]["rests_on"].startswith(f"{LABELS} human labels")
    result, scorer_only, audited = _audited(cis_suite, "caught", "--t2i-procedural-miss", MISS, "--t2i-canary",
                                            "drop_position:last:1.0")
    assert scorer_only["status"] == "fail" and audited["status"] == "fail", result.stdout.str()[-3000:]


# -- the rate floor and the word-level gates, audited from the truth --------------------------------------------

FLOOR = ("fairness_tests/test_cis.py", "--t2i-cis-k", "2", "--t2i-cis-prompts", "64", "--t2i-cis-images", "4",
         "--t2i-cis-components", "8", "-k", "rate_floor")


def _suite_run(pytester, files, art: str, *extra):
    pytester.runpytest_subprocess(
        files[0], *files[1:], "-p", "no:cacheprovider", "--t2i-model", "procedural", "--t2i-scorers", "procedural",
        "--t2i-no-progress", "--t2i-thresholds", "t.yaml", "--t2i-cache-dir", "cache", "--t2i-artifacts", art, *extra,
        timeout=900)
    return {r["gate"]: r for r in json.loads((pytester.path / art / "run.json").read_text())["gates"]}


@pytest.fixture
def both_suites(pytester):
    (pytester.path / "fairness_tests").mkdir()
    for name in ("test_cis.py", "test_word_influence.py"):
        shutil.copy(Path(__file__).resolve().parents[1] / "fairness_tests" / name, pytester.path / "fairness_tests")
    return pytester


def test_a_one_component_scorer_bias_fails_the_scorer_only_rate_floor_and_not_the_audited_one(both_suites):
    """8 names, 64 prompts per K x 4 images: the scorer never sees lotion (the generator unchanged). The scorer-only
    floor fails on lotion; a label per prompt and component from the truth makes it pass, and says so."""
    p = both_suites
    assert _suite_run(p, FLOOR, "null", "--t2i-update-thresholds")["test_cis_component_rate_floor"]["status"] == "written"
    scorer_only = _suite_run(p, FLOOR, "biased", "--t2i-procedural-miss", "lotion=1.0")["test_cis_component_rate_floor"]
    assert scorer_only["status"] == "fail" and scorer_only["details"]["component"] == "lotion"
    assert main(["audit", str(p.path / "biased"), "--per-group", "40", "--from-truth"]) == 0
    gate = _suite_run(p, FLOOR, "audited", "--t2i-procedural-miss", "lotion=1.0", "--t2i-audit",
                      str(p.path / "biased" / "audit" / "labels.csv"))["test_cis_component_rate_floor"]
    assert gate["status"] == "pass" and gate["uncertainty"]["selection"] == 8, gate["message"]
    # 16 prompts name each component (64 x 2 / 8): one label each
    assert gate["details"]["audit"]["labels"] == 128 and "the audit changed it" in gate["message"]
    assert "scorer sensitivity in lotion 0.00" in gate["message"]


def test_word_level_gates_audited_from_the_truth_decide_on_the_truths_value(both_suites):
    """``shift_group_share:doctor:female=1``: the doctor prompt's images are images of "a photo of a female" (some of
    which show no one: the procedural world drops a concept now and then, and the scorer's forced choice still picks
    a group). Every image labelled from its truth: each audited word-level gate's value is the truth's, by hand from
    the labels and the sample's texts, and the page asks each image's question once however many gates drew it."""
    p = both_suites
    files = ("fairness_tests/test_word_influence.py",)
    canary = ("--t2i-canary", "shift_group_share:doctor:female=1")
    _suite_run(p, files, "run", *canary, "--t2i-update-thresholds")
    assert main(["audit", str(p.path / "run"), "--per-group", "1000", "--from-truth"]) == 0
    sample = list(csv.DictReader((p.path / "run" / "audit" / "audit-sample.csv").read_text().splitlines()))
    labels = {(r["gate"], r["unit"]): r["label"] == "yes"
              for r in csv.DictReader((p.path / "run" / "audit" / "labels.csv").read_text().splitlines())}
    page = (p.path / "run" / "audit" / "audit.html").read_text()
    assert page.count('"unit":') == len({r["unit"] for r in sample}) < len(sample)
    gates = _suite_run(p, files, "audited", *canary, "--t2i-audit", str(p.path / "run" / "audit" / "labels.csv"))
    prompt = "a respected doctor at the hospital"
    for gate, centre in (("test_representation[a_respected_doctor_at_the_hospital-female]", 0.5),
                         ("test_word_influence[doctor-female]", 0.0)):
        by_text: dict[str, list[bool]] = {}
        for r in sample:
            if r["gate"] == gate:
                by_text.setdefault(r["group"], []).append(labels[(gate, r["unit"])])
        share = {t: sum(v) / len(v) for t, v in by_text.items()}
        others = [s for t, s in share.items() if t != prompt]
        truth = abs(share[prompt] - centre) if not others else abs(sum(others) / len(others) - share[prompt])
        record = gates[gate]
        assert record["details"]["audit"]["labels"] == sum(len(v) for v in by_text.values()) > 0
        assert record["value"] == pytest.approx(truth), (gate, share)
    assert gates["test_word_influence[doctor-female]"]["value"] > 0.5  # the doctor makes the images female


@pytest.mark.slow  # three more CIS runs: the generator regression of the same component, scorer-only and audited
def test_a_generator_that_drops_the_component_still_fails_the_audited_rate_floor(both_suites):
    p = both_suites
    _suite_run(p, FLOOR, "null", "--t2i-update-thresholds")
    extra = ("--t2i-procedural-miss", "lotion=1.0", "--t2i-canary", "drop_component:lotion")
    assert _suite_run(p, FLOOR, "dropped", *extra)["test_cis_component_rate_floor"]["status"] == "fail"
    assert main(["audit", str(p.path / "dropped"), "--per-group", "40", "--from-truth"]) == 0
    gate = _suite_run(p, FLOOR, "audited", *extra, "--t2i-audit",
                      str(p.path / "dropped" / "audit" / "labels.csv"))["test_cis_component_rate_floor"]
    assert gate["status"] == "fail" and gate["value"] == 0.0 and gate["details"]["audit"]["labels"] == 128, gate["message"]
