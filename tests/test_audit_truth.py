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
                units.append(JudgedUnit(f"{j}-{seed}#{c}", str(path), text, f"Does the image show a {c}?", "", 1, "K=2", j))
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
LABELS = 200  # of the run's 256 judged units (one per prompt while prompts last); the issue allows 400
SIZES = ("--t2i-cis-k", "2", "--t2i-cis-prompts", "32", "--t2i-cis-images", "4", "-k", "test_cis and k2")


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


@pytest.mark.slow  # six CIS_2 runs (32 prompts x 4 images; the images generated twice: plain and under the canary)
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
