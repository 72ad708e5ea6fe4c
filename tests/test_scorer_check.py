"""The scorers checked before any gate (spine/scorer_check.py): the golden set's outputs recorded with the
bounds and compared on every run; float32 against bfloat16 on CPU, changed weights and a changed library
version are named; a run whose scorers match says so in one line; ``--t2i-scorer-check stop`` stops first."""

from __future__ import annotations

import json

import numpy as np
import pytest

from t2i_fairness.base.devices import RunContext
from t2i_fairness.models.registry import scorer_kind
from t2i_fairness.spine.scorer_check import (
    TOLERANCE, ScorerCheck, compare, golden_images, golden_outputs, read_record, record_of, scorers_path, write_record,
)

LIBS = {"torch": "2.0.0", "open_clip": "2.24.0"}


def _clip(precision="float32"):
    return scorer_kind("clip").build("tiny", RunContext("cpu", precision))


@pytest.fixture(scope="module")
def fp32():
    return record_of("clip", _clip(), "cpu", "float32", LIBS)


def test_the_golden_set_is_deterministic_and_the_same_scorer_matches_itself(fp32):
    assert [im.tobytes() for im in golden_images()] == [im.tobytes() for im in golden_images()]
    again = record_of("clip", _clip(), "cpu", "float32", LIBS)
    difference, largest = compare("clip", fp32, again)
    assert difference is None and largest == 0.0


def test_bfloat16_against_float32_on_cpu_is_named_with_its_largest_difference(fp32):
    bf16 = record_of("clip", _clip("bfloat16"), "cpu", "bfloat16", LIBS)
    difference, largest = compare("clip", fp32, bf16)
    # an independent reference: the largest relative difference, by hand over the stored projections
    by_hand = max(np.abs(np.subtract(fp32["outputs"][k], bf16["outputs"][k])).max() / np.abs(fp32["outputs"][k]).max()
                  for k in ("images", "texts"))
    assert difference is not None and largest == pytest.approx(by_hand) and largest > TOLERANCE["float32"]
    assert "precision float32 -> bfloat16" in difference.differs and difference.tolerance == TOLERANCE["float32"]
    assert "largest difference" in difference.line() and "precision float32 -> bfloat16" in difference.line()


def test_changed_weights_are_named(fp32):
    import torch

    clip = _clip()
    with torch.no_grad():
        for p in list(clip.model.parameters())[:4]:
            p.add_(0.05 * torch.randn_like(p, generator=torch.Generator().manual_seed(0)))
    clip.fingerprint += ":retrained"
    difference, _ = compare("clip", fp32, record_of("clip", clip, "cpu", "float32", LIBS))
    assert difference is not None and any(d.startswith("weights ") and d.endswith(":retrained") for d in difference.differs)


def test_a_changed_library_version_is_named_when_outputs_move_and_noted_when_they_do_not(fp32):
    recorded = json.loads(json.dumps(fp32))
    recorded["libraries"]["open_clip"] = "2.20.0"  # the record was made under another open_clip
    now = record_of("clip", _clip(), "cpu", "float32", LIBS)
    check = ScorerCheck(scorers_path("t/tiny.yaml"), {"clip": now}, {"clip": recorded})
    difference, _ = compare("clip", recorded, now)
    assert difference is None  # same outputs: no alarm
    recorded["outputs"]["images"][0][0] += 0.01  # what the other version gave
    difference, _ = compare("clip", recorded, now)
    assert difference is not None and difference.differs == ("library open_clip 2.20.0 -> 2.24.0",)
    assert difference.output == "images"
    check.differences.append(difference)
    assert check.lines() == [f"t2i-fairness: scorer check FAILED: {difference.line()}"]


def test_a_record_round_trips_and_a_bad_file_is_refused_by_name(tmp_path, fp32):
    path = scorers_path(tmp_path / "tiny.yaml")
    assert path.name == "tiny.scorers.json" and read_record(path) is None
    write_record(path, {"clip": fp32})
    assert read_record(path) == {"clip": fp32}
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="tiny.scorers.json"):
        read_record(path)


def test_every_kind_gives_golden_outputs_it_has():
    assert set(golden_outputs(_clip())) == {"images", "texts"}
    masked = golden_outputs(scorer_kind("masked_lm").build("tiny", RunContext("cpu")))
    assert set(masked) == {"replacements"} and len(masked["replacements"]) == 3


SLICE = ["fairness_tests/test_cis.py", "-k", "test_cis and k1", "--t2i-cis-k", "1", "--t2i-cis-prompts", "2",
         "--t2i-cis-images", "2", "-p", "no:cacheprovider", "--t2i-no-progress"]


@pytest.mark.slow  # three small runs of one CIS gate on the tiny model
def test_the_update_run_records_the_scorers_and_later_runs_compare_before_generating(pytester):
    import shutil
    from pathlib import Path

    (pytester.path / "fairness_tests").mkdir()
    shutil.copy(Path(__file__).resolve().parents[1] / "fairness_tests" / "test_cis.py", pytester.path / "fairness_tests")
    common = [*SLICE, "--t2i-thresholds", str(pytester.path / "t.yaml"), "--t2i-cache-dir", str(pytester.path / "c"),
              "--t2i-artifacts", str(pytester.path / "art")]
    written = pytester.runpytest_subprocess(*common, "--t2i-update-thresholds")
    assert written.ret == 0 and (pytester.path / "t.scorers.json").is_file(), written.stdout.str()[-2000:]
    same = pytester.runpytest_subprocess(*common)
    assert same.ret == 0
    assert len([l for l in same.stdout.lines if "scorer check" in l and "match" in l]) == 2  # header and summary
    assert json.loads((pytester.path / "art" / "run.json").read_text())["scorer_check"]["ok"] is True
    fresh = [*common[:-4], "--t2i-cache-dir", str(pytester.path / "c2"), *common[-2:]]  # nothing cached: would generate
    moved = pytester.runpytest_subprocess(*fresh, "--t2i-precision", "bfloat16", "--t2i-scorer-check", "stop")
    out = moved.stdout.str() + moved.stderr.str()
    assert moved.ret != 0 and "scorer check FAILED: scorer clip differs from its record" in out, out[-3000:]
    assert "precision float32 -> bfloat16" in out and "stops before generating" in out
    assert not list((pytester.path / "c2").rglob("*.png"))  # stopped before generating
