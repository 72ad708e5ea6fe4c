"""The CIS gates end to end: the repository's ``fairness_tests/test_cis.py`` (fixtures from the plugin)
in a pytester folder on a fast fake generator, with the tiny offline scorers.

Each run is a subprocess that loads the scorers (a few seconds); four runs cover the update flow,
the report, the cache, provenance, FID per K, the undefined order test and single-K skips.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------- the study, without models


class StubBench:
    """Stands in for the Workbench: an image is (prompt, index); records each images() call."""

    class options:
        seed = 0

    def __init__(self):
        self.calls = []

    def images(self, prompts, n, desc=""):
        self.calls.append((list(prompts), n))
        return [[(p, i) for i in range(n)] for p in prompts]


def test_each_occurrence_of_a_prompt_gets_fresh_images():
    from t2i_fairness.families.cis.options import CisOptions
    from t2i_fairness.families.cis.study import CisStudy

    bench = StubBench()
    study = CisStudy(bench, CisOptions(images=2))
    rows = study.images([("crab",), ("sock",), ("crab",), ("crab",)], desc="")
    assert rows == [
        [("A photo of a crab.", 0), ("A photo of a crab.", 1)],
        [("A photo of a sock.", 0), ("A photo of a sock.", 1)],
        [("A photo of a crab.", 2), ("A photo of a crab.", 3)],
        [("A photo of a crab.", 4), ("A photo of a crab.", 5)],
    ]
    assert bench.calls == [(["A photo of a sock."], 2), (["A photo of a crab."], 6)]


def test_drop_interval_brackets_the_least_squares_drop():
    from t2i_fairness.families.cis.study import Scored, drop_interval, slope_weights
    from t2i_fairness.metrics.cis import degradation_slope

    rng = np.random.default_rng(0)
    ks = [1, 2, 4, 8]
    results = [Scored(k, [("x",)] * 30, np.clip(rng.normal(1 - 0.08 * k, 0.1, size=(30, 2)), 0, 1), [], 0) for k in ks]
    drop = -degradation_slope(ks, [r.cis for r in results])
    assert float(slope_weights(ks) @ [r.cis for r in results]) == pytest.approx(-drop)
    low, high = drop_interval(results).as_tuple()
    assert low < drop < high and 0.06 < drop < 0.1


def test_inception_score_splits_rule():
    from t2i_fairness.families.cis.study import is_splits

    assert [is_splits(n) for n in (1, 8, 199, 200, 999, 1000, 30000)] == [1, 1, 1, 2, 9, 10, 10]


# ----------------------------------------------------------------------------- the gates end to end

FAKEGEN = '''
import numpy as np
from PIL import Image

class Fake:
    """Noise images from (prompt, seed) only: a deterministic stand-in model."""
    fingerprint = "cisfake:v1"
    def generate(self, prompts, seeds):
        return [Image.fromarray(np.random.default_rng([s, len(p)]).integers(0, 255, (24, 24, 3), dtype=np.uint8))
                for p, s in zip(prompts, seeds)]

def make():
    return Fake()
'''


@pytest.fixture
def suite(pytester):
    """The repo's CIS gate file (its fixtures come with the plugin) in a temporary folder with a fake model."""
    (pytester.path / "fairness_tests").mkdir()
    shutil.copy(REPO / "fairness_tests" / "test_cis.py", pytester.path / "fairness_tests")
    pytester.makepyfile(cisfake=FAKEGEN)
    return pytester


def run(pytester, *extra):
    return pytester.runpytest_inprocess(
        "fairness_tests/test_cis.py", "-p", "no:cacheprovider", "--t2i-model", "python:cisfake:make",
        "--t2i-thresholds", str(pytester.path / "thr.yaml"), "--t2i-cache-dir", str(pytester.path / "cache"),
        "--t2i-artifacts", str(pytester.path / "art"), "--t2i-no-progress",
        "--t2i-cis-k", "1,2,4", "--t2i-cis-prompts", "3", "--t2i-cis-images", "2", *extra,
    )


def test_gates_report_and_update_then_pass(suite):
    first = run(suite, "--t2i-update-thresholds", "--junitxml", "junit.xml", "--t2i-report", "report")
    first.assert_outcomes(passed=6)
    out = first.stdout.str()
    _order_power_is_shown(suite.path, out)
    for gate in ("test_cis[k1]", "test_cis[k2]", "test_cis[k4]", "test_cis_drop_per_component",
                 "test_cis_component_rate_floor"):
        assert f"  {gate}: new -> " in out, out
    # the order test is a test: judged at the run's level, no bound written from its p-value
    assert "  test_cis_order_invariance: new -> " not in out, out
    assert "test_cis_order_invariance" not in (suite.path / "thr.yaml").read_text()
    first.stdout.fnmatch_lines([
        "t2i-fairness CIS: K=1,2,4; 3 prompts per K, 2 images per prompt*",
        "*-- CIS: Components Inclusion Score vs K --*",
        " K  prompts  images  CIS_K  95% CI * ceiling  CIS/ceil  IS * FID",
        " 1        3       6  *",
        " 4        3       6  *",
        "77-token rule: no prompt exceeded CLIP's 77 tokens",
        "FID not computed: no --t2i-cis-fid-reference",
        "drop per component: * points of CIS per added component [[]*, *[]] (least-squares slope over K=1,2,4; *",
        "ceiling drop per component: *",
        "*-- CIS order invariance (K=4) --*",
        "K=4: 3 prompts x 2 images per group; * of 3 shuffles left the order unchanged",
        "inclusion by position 1..4 minus the mean over positions *",
        # 6 gates: level 0.05 / 6, B = 9,999; 3 prompts x 2 images cannot go below 2 / C(4, 2)^3 = 9.3e-3
        "position test [[]the gate[]]: T = * df), permutation p = * (9999 within-prompt permutations, resolution "
        "0.0001; asymptotic chi-square p = *); * of 3 prompts informative",
        "power of the position test against the first-named component drawn 0.2 more often than the last-named "
        "* 0 at 3 prompts x 2 images, K=4: the smallest p this design can give is 0.0093 > 0.0083, at this run's "
        "level 0.00833 (alpha 0.05 over 6 gate(s), holm first step); at the paper's size, * at 1000 prompts x 16 images, K=4 (200 simulated "
        "studies), *",
        "chi-square by component (the paper's statistic*",
        "as the paper scores *",
        "chi-square on components detected per image (2 x *), no power against an order effect *",
        "*-- CIS per-component generation rate (K=2,4) --*",
        "most ignored: *",
        "most prominent: *",
    ])
    # images: 3 prompts x 2 images x 3 K + shuffled K=4 + single components for the composites
    assert "text:cis-tables:" in out
    art = suite.path / "art"
    assert (art / "test_cis_drop_per_component" / "cis_vs_k.png").stat().st_size > 1000
    assert (art / "test_cis[k4]" / "cis_k4.json").exists()
    _units_are_kept(suite.path)

    # Again with another rate floor: nothing is generated or encoded again, every bound still applies,
    # and the run says they were set under another CIS setting.
    second = run(suite, "--t2i-cis-rate-min-images", "1")
    second.assert_outcomes(passed=6)
    out = second.stdout.str()
    assert "images: 0 generated" in out and "features:open_clip: 0 computed" in out, out
    assert "WARNING: 5 gate(s) were set under other settings:" in out and "cis_rate_min_images: 2 -> 1" in out, out


def _units_are_kept(path: Path) -> None:
    """A CIS gate keeps its prompts' shares (the units its value is the mean of) in run.json and the history."""
    import json

    from t2i_fairness.history.store import HistoryStore

    gate = next(g for g in json.loads((path / "art" / "run.json").read_text())["gates"] if g["gate"] == "test_cis[k2]")
    assert gate["units"]["ids"] == ["0", "1", "2"] and sum(gate["units"]["values"]) / 3 == pytest.approx(gate["value"])
    store = HistoryStore(path / "t2i-history.sqlite", create=False)
    (row,) = [r for r in store.gates(store.runs()[-1].id) if r.gate == "test_cis[k2]"]
    store.close()
    assert list(row.unit_values().values()) == gate["units"]["values"]


def _order_power_is_shown(path: Path, out: str) -> None:
    """The order gate's power in the terminal table, JUnit and the HTML report, and counted underpowered: at
    3 prompts x 2 images its p-value cannot go below 2 / C(4, 2)^3 = 0.0093 > the run's level 0.0083."""
    import html
    import json
    import xml.etree.ElementTree as ET

    table = out.split("t2i-fairness gates")[1]
    (row,) = [line for line in table.splitlines() if line.startswith("test_cis_order_invariance ")]
    assert row.split()[-3:] == ["<0.1%", "ok,", "underpowered"], row
    assert "gate(s) underpowered" in table and "verdict: PASSED: 6 gates (5 gates written, 1 gate ok (1 underpowered))" in out
    (listed,) = [line for line in table.splitlines() if line.startswith("  test_cis_order_invariance: ")]
    assert "cannot fail at this level: 3 prompts give no p below 0.0093" in listed and "0.2 order effect" in listed
    case = next(c for c in ET.parse(path / "junit.xml").iter("testcase") if c.get("name") == "test_cis_order_invariance")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["power"] == "<0.1%" and props["verdict"] == "pass, underpowered" and "0.0093" in props["underpowered"]
    run_json = json.loads((path / "art" / "run.json").read_text())
    assert "test_cis_order_invariance" in [g["gate"] for g in run_json["power"]["gates"]]
    page = (path / "report" / "index.html").read_text()
    at = page.index('test_cis_order_invariance')
    cell = page[page.index('<td class="num power">', at):].split("</td>", 1)[0]
    assert html.unescape(cell.split(">", 1)[1]) == "<0.1%"


def test_fid_per_k_folders_and_an_undefined_order_test(suite):
    """FID where DIR/k<K> exists, a reason where it does not; the order test on one prompt whose shuffle
    left the order unchanged has nothing to compare (no informative prompt: no degrees of freedom), so
    the gate is skipped with the reason, never given p = 1; the rate floor, a share clustered by prompt, is
    skipped too: no component is named by two prompts. (Deterministic: fake model, seeded tiny CLIP.)"""
    from PIL import Image

    ref = suite.path / "ref" / "k1"
    ref.mkdir(parents=True)
    for i in range(4):
        Image.new("RGB", (20, 20), (60 * i, 10, 0)).save(ref / f"{i}.png")
    result = run(suite, "--t2i-cis-k", "1,2", "--t2i-cis-prompts", "2", "--t2i-cis-images", "1",
                 "--t2i-cis-order-prompts", "1", "--t2i-cis-fid-reference", str(ref.parent),
                 "--t2i-update-thresholds", "-rs")
    result.assert_outcomes(passed=3, skipped=2)
    result.stdout.fnmatch_lines([
        " 1        2       2  * (ref 4)", " 2        2       2  * -",
        "FID not computed: needs >= 2 images on each side (0 reference, 2 generated)",
        "K=2: 1 prompts x 1 images per group; 1 of 1 shuffles left the order unchanged",
        "position test [[]the gate[]]: T = 0.000 (0 df), permutation p = 1 *; 0 of 1 prompts informative",
        "SKIPPED [[]1[]] fairness_tests/test_cis.py:*: order test undefined: no prompt is informative *",
        "SKIPPED [[]1[]] fairness_tests/test_cis.py:*: no component was requested in >= 1 images by >= 2 prompts*",
    ])
    table = result.stdout.str().split("t2i-fairness gates")[1].split("gates, ")[0]
    rows = [line for line in table.splitlines() if line.startswith("test_cis_order_invariance")]
    assert not rows  # no value was recorded for the skipped gate (the outcome lines above the table name it as skipped)
    assert "skipped: fairness_tests/test_cis.py::test_cis_order_invariance" in table


def test_single_k_skips_the_drop_and_order_needs_k_two(suite):
    result = run(suite, "--t2i-cis-k", "1", "--t2i-cis-prompts", "2", "--t2i-cis-images", "1",
                 "--t2i-update-thresholds", "-rs")
    result.assert_outcomes(passed=1, skipped=3)
    result.stdout.fnmatch_lines([
        "*the drop per component needs two values of K; --t2i-cis-k gives only K=1*",
        "*order invariance needs a K >= 2; --t2i-cis-k gives [[]1[]]*",
        "*per-component rates need a K >= 2*",
    ])


@pytest.mark.parametrize("args, message", [
    (("--t2i-cis-k", "1,two"), "--t2i-cis-k: '1,two': expected comma-separated integers"),
    (("--t2i-cis-k", "2,13"), "--t2i-cis-k: '2,13': K must be between 1 and 12"),
    (("--t2i-cis-k", "2,2"), "--t2i-cis-k: '2,2': a K is repeated"),
    (("--t2i-cis-prompts", "0"), "--t2i-cis-prompts: must be >= 1, got 0"),
    (("--t2i-cis-images", "-1"), "--t2i-cis-images: must be >= 1, got -1"),
    (("--t2i-cis-fid-reference", "/no/such/folder"), "--t2i-cis-fid-reference: '/no/such/folder': not a folder"),
    (("--t2i-cis-order-test", "chi2"), "--t2i-cis-order-test: invalid choice: 'chi2'"),
])
def test_bad_options_are_usage_errors_naming_the_option(suite, args, message):
    result = suite.runpytest("fairness_tests/test_cis.py", "--collect-only", "-p", "no:cacheprovider", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str(), result.stderr.str()
