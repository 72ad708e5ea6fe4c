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
