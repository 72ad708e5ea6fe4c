"""Decomposed-DIG gates end to end through pytester: a fake generator, a manifest reference and
precomputed masks (``--t2i-masks``), so the paper's rules can be set up image by image."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

REPO = Path(__file__).resolve().parents[1]

FAKEGEN = '''
from t2i_fairness.references.sets import render_synthetic

class Fake:
    """Synthetic scenes of the prompt's object and region (another seed than the reference's)."""
    def __init__(self):
        self.fingerprint = "fake:decomposed"
    def generate(self, prompts, seeds):
        out = []
        for p, s in zip(prompts, seeds):
            obj = "bag" if "bag" in p else "stove"
            region = "africa" if "Afric" in p else "europe"
            out.append(render_synthetic(obj, region, s % 1000, seed=2, size=32))
        return out

def model():
    return Fake()
'''

PROMPTS = {"object_in_region": "{o} in {R}", "regional_adjective": "{A} {o}"}
REGIONS = {"africa": ("Africa", "African"), "europe": ("Europe", "European")}


def square(size, fill=True):
    mask = np.zeros((size, size), np.uint8)
    if fill:
        mask[: size // 3, : size // 3] = 255
    return Image.fromarray(mask)


@pytest.fixture
def suite(pytester):
    """The repo's Decomposed-DIG gate file with a manifest reference (bag, stove x africa, europe x 6) and a mask folder.

    Masks: every reference image has a corner object except two stoves (2 of 12 = 17 % > 10 %: the
    class is excluded); the generated "bag in Africa" #0 has an empty mask (no object segmentation).
    """
    (pytester.path / "fairness_tests").mkdir()
    shutil.copy(REPO / "fairness_tests" / "test_decomposed_dig.py", pytester.path / "fairness_tests")
    pytester.makepyfile(decomposed_fakegen=FAKEGEN)  # not "fakegen": tests/fakegen.py comes first on this process's path
    from t2i_fairness.references.sets import render_synthetic

    ref, masks = pytester.path / "ref", pytester.path / "masks"
    rows = ["path,object,region,country"]
    for region in REGIONS:
        for obj in ("bag", "stove"):
            (ref / region / obj).mkdir(parents=True)
            (masks / "reference" / region / obj).mkdir(parents=True)
            for i in range(6):
                render_synthetic(obj, region, i, seed=1, size=40).save(ref / region / obj / f"{i}.png")
                rows.append(f"{region}/{obj}/{i}.png,{obj},{region},")
                failed = obj == "stove" and region == "africa" and i < 2
                square(40, not failed).save(masks / "reference" / region / obj / f"{i}.png")
    (ref / "manifest.csv").write_text("\n".join(rows) + "\n")
    for template, fmt in PROMPTS.items():
        for region, (name, adjective) in REGIONS.items():
            for obj in ("bag", "stove"):
                prompt = fmt.format(o=obj, R=name, A=adjective)
                (masks / "generated" / prompt).mkdir(parents=True)
                for i in range(3):
                    square(32, not (prompt == "bag in Africa" and i == 0)).save(masks / "generated" / prompt / f"{i}.png")
    return pytester


def run(pytester, *extra):
    return pytester.runpytest_inprocess(
        "fairness_tests", "-p", "no:cacheprovider", "--t2i-model", "python:decomposed_fakegen:model",
        "--t2i-objects", "bag,stove", "--t2i-images-per-prompt", "3", "--t2i-reference", f"mini={pytester.path / 'ref'}",
        "--t2i-masks", str(pytester.path / "masks"), "--t2i-thresholds", str(pytester.path / "thr.yaml"),
        "--t2i-artifacts", str(pytester.path / "art"), "--t2i-no-progress", *extra,
    )


def test_decomposed_gates_ids_paper_rules_table1_and_diagnostics(suite):
    first = run(suite, "-k", "bg_coverage or template_improvement or diagnostics", "--t2i-update-thresholds")
    first.assert_outcomes(passed=first.parseoutcomes()["passed"])
    out = first.stdout.str()
    for pattern in (
        "*test_bg_coverage[[]mini-object_in_region-africa[]]*written*",
        "*test_bg_coverage[[]mini-regional_adjective-europe[]]*written*",
        "*test_worst_region_bg_coverage[[]mini-object_in_region[]]*written*",
        "*test_template_improvement[[]mini[]]*written*",
        "*Decomposed-DIG (Table 1): mini*",
        "*real images: 24, segmentation failed (excluded): 2; classes excluded (more than 100/1020 = 9.8% failures, paper preset limit): stove (17%)*",
        "*{object} in {region}: 6 generated images (6 more of excluded classes left out), 1 without object segmentation*",
        "*{regional adjective} {object}: 6 generated images (6 more of excluded classes left out), 0 without object*",
        "Orig.*", "New*", "Delta*", "Delta (%)*",
        "*Decomposed-DIG diagnostics: mini / object_in_region*",
        # 24 reference + 2 x 12 generated images; a region's slice (its gate) and the worst-region
        # gate's every-region slice share 6 of them, read back from the cache: made by this run, so
        # counted once, as computed (distinct entries; "from cache" is what an earlier run made)
        "*masks: 48 computed, 0 from cache*",
    ):
        first.stdout.fnmatch_lines([pattern])
    assert "test_bg_precision" not in out  # deselected gates are not measured

    # The paper's rules, read back from the JSON artifact: stove dropped on both sides, the
    # unsegmented bag in Africa a miss for Obj-only precision and used whole for BG-only.
    data = json.loads((suite.path / "art" / "test_bg_coverage[mini-object_in_region-africa]" / "decomposed_dig.json").read_text())
    assert data["real_images"]["excluded_classes"] == {"stove": pytest.approx(2 / 12)}
    africa = data["templates"]["object_in_region"]["regions"]["africa"]
    assert (africa["obj"]["n_fake"], africa["obj"]["n_used"], africa["obj"]["n_missing"]) == (3, 2, 1)
    assert africa["obj"]["precision"] <= 2 / 3  # at most the two segmented images are hits
    assert (africa["bg"]["n_fake"], africa["bg"]["n_used"], africa["bg"]["n_missing"]) == (3, 3, 0)
    assert africa["obj"]["n_real"] == 6  # the six bags; the stoves are excluded
    assert data["templates"]["object_in_region"]["generated_of_excluded_classes"] == {"africa": 3, "europe": 3}
    diag = suite.path / "art" / "test_decomposed_diagnostics[mini-object_in_region]"
    assert set(json.loads((diag / "diagnostics.json").read_text())) == {"africa", "europe"}

    # A second run reuses every mask, feature and manifold.
    second = run(suite, "-k", "bg_coverage and africa")
    # (Africa's only: 24 reference + 2 templates x 2 objects x 3 generated images)
    second.stdout.fnmatch_lines(["*masks: 0 computed, 36 from cache*", "*radii: 0 computed*"])
    second.assert_outcomes(passed=2)


def test_options_and_their_errors(suite):
    result = run(suite, "--t2i-masks", str(suite.path / "nowhere"), "-k", "bg_coverage")
    result.stderr.fnmatch_lines(["*--t2i-masks*not a directory*"])
    result = run(suite, "--t2i-segmentation-failure-limit", "2", "-k", "bg_coverage")
    result.stderr.fnmatch_lines(["*--t2i-segmentation-failure-limit: must be a failure rate in [[]0, 1[]], got '2'*"])
    # A looser limit keeps the stoves: 2 failed of 12 is not above 50 %.
    # (with the worst-region gate: Table 1 needs every region, a region's gate alone measures only its own)
    loose = run(suite, "--t2i-segmentation-failure-limit", "0.5", "-k", "bg_coverage and object_in_region",
                "--t2i-update-thresholds")
    loose.stdout.fnmatch_lines([
        "*classes excluded (more than 0.5 = 50.0% failures, --t2i-segmentation-failure-limit limit): none*",
        "*{object} in {region}: 12 generated images, 1 without object segmentation*",
    ])
    data = json.loads((suite.path / "art" / "test_bg_coverage[mini-object_in_region-africa]" / "decomposed_dig.json").read_text())
    assert data["templates"]["object_in_region"]["regions"]["africa"]["bg"]["n_real"] == 10  # 6 bags, 4 of 6 stoves
    (suite.path / "masks" / "generated" / "bag in Africa" / "2.png").unlink()
    missing = run(suite, "-k", "bg_coverage and object_in_region and africa")
    missing.stdout.fnmatch_lines(["*--t2i-masks: no mask for image key 'generated/bag in Africa/2'*"])
    missing.assert_outcomes(failed=1)
