"""Word influence gates through pytester: option errors, ids, the update flow and the report, end to end
on a fast fake generator (tiny masked LM and tiny CLIP)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

FAKEGEN = '''
import numpy as np
from PIL import Image

class Fake:
    """Images whose pixels depend only on (prompt, seed): a deterministic stand-in model."""
    fingerprint = "fake:word"
    def generate(self, prompts, seeds):
        return [Image.fromarray(np.random.default_rng([s, len(p)]).integers(0, 255, (32, 32, 3), dtype=np.uint8))
                for p, s in zip(prompts, seeds)]

def model():
    return Fake()
'''


@pytest.fixture
def suite(pytester):
    """The repo's word influence gate file (its fixtures come with the plugin) in a temporary folder."""
    (pytester.path / "fairness_tests").mkdir()
    shutil.copy(REPO / "fairness_tests" / "test_word_influence.py", pytester.path / "fairness_tests")
    pytester.makepyfile(wi_fakegen=FAKEGEN)  # not "fakegen": tests/fakegen.py comes first on this process's path
    return pytester


def run(pytester, *extra):
    return pytester.runpytest_inprocess(
        "fairness_tests", "-p", "no:cacheprovider", "--t2i-model", "python:wi_fakegen:model",
        "--t2i-thresholds", str(pytester.path / "thr.yaml"), "--t2i-cache-dir", str(pytester.path / "cache"),
        "--t2i-artifacts", str(pytester.path / "artifacts"), "--t2i-no-progress", *extra,
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["--t2i-wi-groups", "male"], "--t2i-wi-groups: expected at least 2 comma-separated groups"),
        (["--t2i-wi-groups", "light skin,light-skin"], "--t2i-wi-groups: groups ['light skin', 'light-skin'] give the same test id"),
        (["--t2i-wi-template", "a photo"], "--t2i-wi-template: the template must contain {group}"),
        (["--t2i-wi-template", "a {x} {group}"], "--t2i-wi-template: the template 'a {x} {group}' must have {group} as its only field"),
        (["--t2i-wi-k", "8"], "--t2i-wi-k: k=8 needs prompts of at least 8 words; the longest has 7"),
        (["--t2i-wi-k", "1,x"], "--t2i-wi-k: expected comma-separated integers >= 1"),
        (["--t2i-wi-replacements", "0"], "--t2i-wi-replacements: must be >= 1, got 0"),
        (["--t2i-wi-images", "0"], "--t2i-wi-images: must be >= 1, got 0"),
        (["--t2i-wi-prompts", "mine"], "argument --t2i-wi-prompts: invalid choice: 'mine'"),
    ],
)
def test_bad_options_are_usage_errors_naming_the_option(suite, args, message):
    result = run(suite, "--collect-only", "-q", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert (f"ERROR: {message}" if message.startswith("--") else message) in err, err


def test_ids_follow_groups_levels_and_suite(suite):
    result = run(suite, "--collect-only", "-q", "-k", "word_influence",
                 "--t2i-wi-groups", "Light-skinned person, dark-skinned person", "--t2i-wi-k", "2")
    out = result.stdout.str()
    assert "test_word_influence[doctor-light_skinned_person-k2]" in out
    assert "test_word_influence[500-dark_skinned_person-k2]" in out
    assert "test_representation[the_ceo_of_a_fortune_500_company-light_skinned_person]" in out
    assert "-male" not in out and "doctor-light_skinned_person]" not in out  # k=1 not asked
    paper = run(suite, "--collect-only", "-q", "--t2i-wi-prompts", "paper", "-k", "word_influence")
    paper.stdout.fnmatch_lines(["*collected*"])
    out = paper.stdout.str()
    assert "test_representation[a_confident_doctor_at_the_office-female]" in out
    assert "test_word_influence[salon-female]" in out and "-k2]" not in out
    # 19 words x 2 groups, 150 prompts x 2 groups, one report
    assert out.count("::test_word_influence[") == 38 and out.count("::test_representation[") == 300


def test_update_then_pass_with_the_table_and_artifacts(suite):
    first = run(suite, "-k", "word_influence", "--t2i-wi-images", "1", "--t2i-bootstrap", "50",
                "--t2i-update-thresholds")
    first.assert_outcomes(passed=36 + 4 + 1)
    out = first.stdout.str()
    for pattern in (
        "*test_word_influence[[]doctor-female[]]*written*",
        "*test_word_influence[[]ceo-female-k2[]]*written*",
        "*test_representation[[]a_respected_doctor_at_the_hospital-female[]]*written*",
        "-- Word influence --",
        "word*group*k*influence*hoeffding 95%*bootstrap 95%*n*prompts*",
        "'the ceo of a fortune 500 company' (original: p(male)=*",
        "-- Word influence: representation per prompt*",
    ):
        first.stdout.fnmatch_lines([pattern])
    assert "t2i-fairness word influence: examples (2 prompts), groups male,female" in out
    # k=1 for the doctor (7 distributions) and k=1,2 for the ceo (29): 3 images each -> 108 images
    assert "images: 108 generated, 0 from cache" in out, out
    data = json.loads((suite.path / "artifacts" / "test_word_influence_report" / "word_influence.json").read_text())
    assert data["settings"]["levels"] == {"a respected doctor at the hospital": [1],
                                          "the ceo of a fortune 500 company": [1, 2]}
    assert {(w["word"], w["k"]) for w in data["words"]} >= {("doctor", 1), ("ceo", 2)}
    assert (suite.path / "artifacts" / "test_word_influence_report" / "word_influence.png").stat().st_size > 1000

    second = run(suite, "-k", "word_influence", "--t2i-wi-images", "1", "--t2i-bootstrap", "50", "-q")
    second.assert_outcomes(passed=36 + 4 + 1)
    second.stdout.fnmatch_lines(["*40 gates, 0 failed*", "images: 0 generated, 108 from cache"])
