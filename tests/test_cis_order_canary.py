"""The order test catches a planted position effect end to end (issue #28, item 3): the repository's
``fairness_tests/test_cis.py`` on the procedural model, with ``--t2i-canary drop_position:last`` (the
component named last left out of half the images of every CIS prompt of two or more components).

The tiny scorers' CLIP has random weights and cannot see which components an image shows (no CIS
canary is seen with it: docs/decisions.md), so these runs score with the product's procedural scorers
(``--t2i-scorers procedural``: CLIP reads the components each procedural image carries). The generator,
the canary, the study, the gate, the verdicts and the catch report are the suite's own.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# K = 1 (a slice the canary never touches) and 4 (the order test's); the drop per component is left out (its
# single-component ceiling images would double the run), so 4 gates: level 0.05 / 4, B = 9,999
SIZES = ["--t2i-cis-k", "1,4", "--t2i-cis-prompts", "30", "--t2i-cis-images", "4", "-k", "not drop"]


@pytest.fixture
def suite(pytester):
    (pytester.path / "fairness_tests").mkdir()
    shutil.copy(REPO / "fairness_tests" / "test_cis.py", pytester.path / "fairness_tests")
    return pytester


def _run(pytester, *extra):
    result = pytester.runpytest_subprocess(
        "fairness_tests/test_cis.py", "-p", "no:cacheprovider", "--t2i-model", "procedural", "--t2i-scorers", "procedural", "--t2i-no-progress",
        "--t2i-thresholds", str(pytester.path / "t.yaml"), "--t2i-cache-dir", str(pytester.path / "cache"),
        "--t2i-artifacts", str(pytester.path / "art"), *SIZES, *extra, timeout=900)
    records = {r["gate"]: r for r in json.loads((pytester.path / "art" / "run.json").read_text())["gates"]}
    return result, records


@pytest.mark.slow  # 53 s: the whole CIS suite under a canary; the order test's power and size on small data: test_cis_order.py
def test_drop_position_is_caught_by_the_order_test_and_by_no_gate_of_another_slice(suite):
    written, null = _run(suite, "--t2i-update-thresholds")
    assert written.ret == pytest.ExitCode.OK, written.stdout.str()[-3000:]
    order = null["test_cis_order_invariance"]
    assert order["status"] == "pass" and order["p_value"] > 0.05, order  # no order effect in the procedural world
    written.stdout.fnmatch_lines([
        "*-- CIS order invariance (K=4) --*",
        "K=4: 30 prompts x 4 images per group; * of 30 shuffles left the order unchanged",
        "position test [[]the gate[]]: T = * (3 df), permutation p = * (9999 within-prompt permutations, "
        "resolution 0.0001; asymptotic chi-square p = *); * of 30 prompts informative",
        "power of the position test against the first-named component drawn 0.2 more often than the last-named *",
        "chi-square on components detected per image *no power against an order effect*",
    ])

    caught, records = _run(suite, "--t2i-canary", "drop_position:last")
    out = caught.stdout.str()
    order = records["test_cis_order_invariance"]
    assert order["status"] == "fail" and order["p_value"] <= 0.05 / 4, out[-3000:]  # rejected at the first step
    profile = order["details"]["profile"]
    assert profile[-1] == min(profile) < -0.1, profile  # the last-named component is the one drawn less
    caught.stdout.fnmatch_lines([
        "canary drop_position:last (position last): caught by 1 of 1 gate(s) of its slice; 0 false alarm(s) among "
        "1 gate(s) of other slices; * of 2 pooled gate(s) failed",
        "  caught: test_cis_order_invariance",
    ])
    # CIS_1 never sees a targeted image: its value is the null run's, to the bit
    assert records["test_cis[k1]"]["status"] == "pass" and records["test_cis[k1]"]["value"] == null["test_cis[k1]"]["value"]

    # the paper's statistic on the same images (all from the cache): the gate reads it instead
    paper, paper_records = _run(suite, "--t2i-canary", "drop_position:last", "--t2i-cis-order-test", "paper")
    assert "images: 0 generated" in paper.stdout.str()
    paper.stdout.fnmatch_lines(["position test: T = * (3 df), asymptotic chi-square p = *",
                                "chi-square by component (the paper's statistic, *) [[]the gate[]]: X2(*) = *, "
                                "permutation p = * (9999 within-prompt permutations, *"])
    by_component = paper_records["test_cis_order_invariance"]
    assert by_component["details"]["test"] == "paper" and by_component["status"] == "fail"
    assert by_component["details"]["statistic"] != order["details"]["statistic"]  # another statistic, same images
