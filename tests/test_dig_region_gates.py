"""DIG In region gates end to end through pytester, on a fast fake generator and a manifest reference."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

FAKEGEN = '''
import numpy as np
from PIL import Image

class Fake:
    """Images whose pixels depend only on (prompt, seed): a deterministic stand-in model."""
    def __init__(self, tag):
        self.fingerprint = "fake:" + tag
        self.tag = tag
    def generate(self, prompts, seeds):
        out = []
        for p, s in zip(prompts, seeds):
            rng = np.random.default_rng([s, len(p), len(self.tag)])
            out.append(Image.fromarray(rng.integers(0, 255, (32, 32, 3), dtype=np.uint8)))
        return out

def model_a():
    return Fake("a")

def model_b():
    return Fake("bb")
'''


@pytest.fixture
def suite(pytester):
    """The repo's region gate file (its fixtures come with the plugin) in a temporary folder, with a manifest reference."""
    (pytester.path / "fairness_tests").mkdir()
    shutil.copy(REPO / "fairness_tests" / "test_dig_in_region.py", pytester.path / "fairness_tests")
    pytester.makepyfile(region_fakegen=FAKEGEN)  # not "fakegen": tests/fakegen.py comes first on this process's path
    from t2i_fairness.references.sets import render_synthetic

    ref = pytester.path / "ref"
    rows = ["path,object,region,country"]
    for region in ("africa", "europe"):
        for obj in ("bag", "stove"):
            for i in range(6):
                rel = f"{region}/{obj}/{i}.png"
                (ref / region / obj).mkdir(parents=True, exist_ok=True)
                render_synthetic(obj, region, i, seed=1, size=40).save(ref / rel)
                rows.append(f"{rel},{obj},{region},")
    (ref / "manifest.csv").write_text("\n".join(rows) + "\n")
    return pytester


def run(pytester, model, *extra):
    return pytester.runpytest_inprocess(
        "fairness_tests", "-p", "no:cacheprovider", "--t2i-model", f"python:region_fakegen:{model}",
        "--t2i-objects", "bag,stove", "--t2i-images-per-prompt", "3", "--t2i-reference", f"mini={pytester.path / 'ref'}",
        "--t2i-thresholds", str(pytester.path / "thr.yaml"), "--t2i-no-progress", *extra,
    )


def test_region_gates_ids_reference_reuse_and_updates(suite):
    # --t2i-dedupe-scope group: a region's gates then read its own prompts only (triage); under the default
    # set scope they read the whole template (tests/test_plan_selection.py)
    first = run(suite, "model_a", "-k", "region and africa", "--t2i-dedupe-scope", "group", "--t2i-update-thresholds", "-q")
    first.assert_outcomes(passed=first.parseoutcomes()["passed"])
    for pattern in (
        "*test_region_coverage[[]mini-object_in_region-africa[]]*written*",
        "*test_region_precision[[]mini-object_in_country-africa[]]*written*",
        "*test_region_coverage[[]mini-object-africa[]]*written*",
        "*test_object_region_coverage[[]mini-object_in_country-stove-africa[]]*written*",
        # Africa's 18 generated images (2 objects x {1 + Africa + its 3 countries} prompts x 3, 3, 1 images)
        # + the 24 reference images; the object-region groups read the region groups' rows back, which this
        # run made: distinct entries, so nothing is "from cache" (made by an earlier run)
        "*features:InceptionFeatures: 42 computed, 0 from cache*",
        "*radii: 3 computed, 0 from cache*",  # Africa's region and 2 object-region groups, shared by 3 templates
    ):
        first.stdout.fnmatch_lines([pattern])
    assert "europe" not in first.stdout.str().split("t2i-fairness gates")[1]

    # Another model against the same reference: no reference image is encoded again, radii come from the cache.
    second = run(suite, "model_b", "-k", "region_coverage and africa", "--t2i-dedupe-scope", "group", "-q")
    out = second.stdout.str()
    assert "radii: 0 computed" in out, out
    # Africa's 18 generated images are encoded (no other region's: -k triages); the 24 reference images
    # are not (their features live in the cached manifolds).
    assert "features:InceptionFeatures: 18 computed" in out, out
    assert "were set under other settings" in out and "model: fake:a -> fake:bb" in out


def test_object_region_indicators_read_the_studys_groups_and_skip_a_pair_without_a_manifold():
    """``DigInStudy.object_region_precision``/``coverage`` read the object-region group of ``scores(...)`` and skip a
    pair that has none (fewer than k + 2 real images). A second method of the same name once replaced that helper
    with the group builder: the skip was dead and each call rebuilt the group outside the study's memo."""
    import inspect
    import math
    from types import SimpleNamespace

    import numpy as np

    from t2i_fairness.families.base import Study
    from t2i_fairness.families.dig_in.study import DigInStudy, DigScores, GroupScore
    from t2i_fairness.metrics.manifold import Membership

    inside = np.eye(4, 6, dtype=bool)
    group = GroupScore(1.0, 4 / 6, 4, 6, Membership(inside, np.arange(4)))

    class Study_(DigInStudy):
        def __init__(self):
            Study.__init__(self, SimpleNamespace(options=SimpleNamespace(confidence=0.95, nearest_k=3)))

        def scores(self, reference, template):
            return DigScores(region={}, object_region={("bag", "africa"): group})

    assert list(inspect.signature(DigInStudy._object_region).parameters) == ["self", "reference", "template", "object",
                                                                             "region"]
    s = Study_()
    assert s.object_region_precision("geode", "object_in_region", "bag", "africa").value == 1.0
    assert s.object_region_coverage("geode", "object_in_region", "bag", "africa").value == 4 / 6
    skipped = s.object_region_precision("geode", "object_in_region", "car", "africa")
    assert math.isnan(skipped.value) and "fewer than k+2" in skipped.skip
