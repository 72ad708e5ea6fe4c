"""Evidence beside a failing gate: DIG In's and Decomposed-DIG's precision/coverage gates, in the HTML
report, in Allure and in a browser.

The repository's own gates run on the procedural smoke world (fast, offline) with a bound raised so
that Africa's coverage (and, for Decomposed-DIG, Africa's Obj-only precision) fails; its section of
the report must then show the generated images beside their nearest real ones and the real images no
generated image reached (counted in headless Chromium, every image decoded), and nothing for a passing
gate. The grids' counts are checked against the gate's own number; with ``--alluredir`` the failing
gate's Allure result lists the same grids as PNG attachments. The shared pieces
(:mod:`t2i_fairness.report.evidence`, :func:`~t2i_fairness.metrics.manifold.pair_distances`) are
checked against independent references first.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from test_html_report import needs_chromium, open_in_chromium
from test_outcome import Dom

GATE = "test_region_coverage[synthetic-object_in_region-africa]"
PASSING = "test_region_coverage[synthetic-object_in_region-europe]"
DEC_COVERAGE = "test_bg_coverage[synthetic-object_in_region-africa]"
DEC_PRECISION = "test_obj_precision[synthetic-object_in_region-africa]"
DEC_PASSING = ("test_bg_coverage[synthetic-object_in_region-europe]", "test_obj_precision[synthetic-object_in_region-europe]")
GRIDS = ["evidence_generated_vs_nearest_real.png", "evidence_real_not_reached.png"]
PNG = b"\x89PNG\r\n\x1a\n"


def _suite(root, module: str, select: str, bounds: dict[str, float], *extra: str):
    """Run one suite module of the wheel on the procedural world with ``bounds`` (gate -> min); returns the root."""
    import os
    import subprocess
    import sys

    (root / "pytest.ini").write_text("[pytest]\n")
    (root / "thr.yaml").write_text("gates:\n" + "".join(f"  {g}:\n    min: {b}\n" for g, b in bounds.items()))
    cmd = [sys.executable, "-m", "pytest", "--pyargs", f"t2i_fairness.fairness_tests.{module}", "-p", "no:cacheprovider",
           "-k", select, "--t2i-model", "procedural",
           "--t2i-objects", "bag,car", "--t2i-images-per-prompt", "4", "--t2i-thresholds", "thr.yaml",
           "--t2i-cache-dir", "cache", "--t2i-artifacts", "art", "--t2i-report", "report", "--t2i-no-progress", *extra]
    done = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=900, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 1, done.stdout[-4000:] + done.stderr[-2000:]
    return root, done.stdout


def _record(root, gate: str) -> dict:
    return next(g for g in json.loads((root / "art" / "run.json").read_text())["gates"] if g["gate"] == gate)


def _evidence_files(root, gate: str) -> list[str]:
    folder = root / "art" / gate
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("evidence")) if folder.exists() else []


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One run of two DIG In region coverage gates (Africa's bound raised to fail), HTML report and Allure results."""
    root, out = _suite(tmp_path_factory.mktemp("evidence"), "test_dig_in_region",
                       "test_region_coverage and object_in_region- and (africa or europe)", {GATE: 0.99, PASSING: 0.0},
                       "--alluredir", "allure")
    assert "1 failed, 1 passed" in out, out[-3000:]
    return root


@pytest.fixture(scope="module")
def decomposed_run(tmp_path_factory):
    """One run of Decomposed-DIG's BG-only coverage and Obj-only precision gates of Africa (bounds raised to
    fail) and Europe (bounds at 0), with the HTML report."""
    root, out = _suite(tmp_path_factory.mktemp("decomposed_evidence"), "test_decomposed_dig",
                       "(test_bg_coverage or test_obj_precision) and object_in_region- and (africa or europe)",
                       {DEC_COVERAGE: 0.99, DEC_PRECISION: 0.99, **{g: 0.0 for g in DEC_PASSING}})
    assert "2 failed, 2 passed" in out, out[-3000:]
    return root


# -- the shared pieces, against independent references ---------------------------------------------

def test_pair_distances_agree_with_scipy_cdist():
    from scipy.spatial.distance import cdist

    from t2i_fairness.metrics.manifold import pair_distances

    rng = np.random.default_rng(0)
    real, fake = rng.normal(size=(37, 5)), rng.normal(size=(11, 5)) * 3
    got = pair_distances(real, fake, block_elements=40)  # several blocks
    assert got.shape == (11, 37)
    np.testing.assert_allclose(got, cdist(fake, real), rtol=1e-13, atol=0)
    with pytest.raises(ValueError, match="same width"):
        pair_distances(real, fake[:, :3])
    with pytest.raises(ValueError, match="fake has NaN"):
        pair_distances(real, np.full((1, 5), np.nan))


def test_group_evidence_counts_are_the_gates_precision_and_coverage():
    """Inside and reached decided as the gate decides them (metrics.manifold.precision_coverage); images
    without a feature are misses in the sample total; the grids are PNGs and list the missing image first."""
    from PIL import Image

    from t2i_fairness.metrics.manifold import ReferenceManifold, precision_coverage
    from t2i_fairness.report.evidence import GeneratedImage, GroupEvidence, RealImage, evidence_grids

    rng = np.random.default_rng(1)
    real, fake = rng.normal(size=(30, 4)), rng.normal(size=(20, 4)) + 0.8
    m = ReferenceManifold.build(real, 3)
    pc = precision_coverage(m, fake, dedupe="none")
    img = lambda: Image.new("RGB", (8, 8), "gray")  # noqa: E731
    ev = GroupEvidence("africa", [GeneratedImage(f"bag in Africa", i, img) for i in range(20)],
                       [RealImage(f"r{j}.png", "bag", "africa", img) for j in range(30)], fake, m.features, m.radii,
                       space="BG-only ViT", missing=[GeneratedImage("bag in Africa", 99, img)])
    brute = np.sqrt(((fake[:, None, :] - real[None, :, :]) ** 2).sum(-1)) < np.asarray(m.radii)[None, :]
    assert ev.generated_inside == round(pc["precision"] * 20) == int(brute.any(1).sum())
    assert ev.real_reached / 30 == pytest.approx(pc["coverage"]) and ev.real_reached == int(brute.any(0).sum())
    assert ev.n_generated == 21 and 0 < ev.real_reached < 30
    grids = evidence_grids(ev, "coverage", limit=4, thumb=32)
    assert all(grids[name][:8] == PNG for name in GRIDS)
    summary = grids["evidence.json"]
    assert summary["furthest_generated"][0] == {"prompt": "bag in Africa", "seed": 99, "d_over_r": None, "nearest_real": None}
    assert len(summary["real_not_reached"]) == 30 - ev.real_reached
    assert "evidence_real_not_reached.png" not in evidence_grids(ev, "precision", thumb=32)


# -- DIG In ---------------------------------------------------------------------------------------

def test_the_failing_coverage_gate_leaves_both_grids_and_the_passing_one_none(run):
    assert _evidence_files(run, GATE) == ["evidence.json", *GRIDS]
    assert not (run / "art" / PASSING).exists()


def test_the_evidence_counts_agree_with_the_gate(run):
    data = json.loads((run / "art" / GATE / "evidence.json").read_text())
    record = _record(run, GATE)
    assert data["real"] == record["n"] and data["real_reached"] / data["real"] == pytest.approx(record["value"])
    assert len(data["real_not_reached"]) == data["real"] - data["real_reached"] > 0
    assert all(r["nearest_generated_d_over_r"] >= 1 for r in data["real_not_reached"])
    first = data["furthest_generated"][0]
    assert first["prompt"].endswith("in Africa") and isinstance(first["seed"], int)


def _images_in_chromium(report, profile) -> dict:
    """The report opened in headless Chromium without an error, every image decoded: images per section."""
    page, console = open_in_chromium(report, profile)
    assert page.root.get("data-ready") == "1" and console == [] and json.loads(page.root["data-errors"]) == []
    assert page.root["data-images"] == page.root["data-images-loaded"]  # every image decoded
    return Dom(report.read_text()).images


@needs_chromium
def test_in_chromium_the_failing_gate_section_shows_generated_and_real_images(run, tmp_path):
    report = run / "report" / "index.html"
    sections = {k: v for k, v in _images_in_chromium(report, tmp_path / "profile").items() if "test_region_coverage" in k}
    assert list(sections.values()) == [2] and "africa" in next(iter(sections))  # generated-vs-real and not-reached grids
    text = report.read_text()
    assert "evidence_generated_vs_nearest_real.png" in text and "evidence_real_not_reached.png" in text


def test_with_alluredir_the_failing_gates_result_attaches_the_evidence_pngs_and_the_passing_one_none(run):
    """``--alluredir``: the Reporter attaches every artifact to the test's Allure result, the evidence too."""
    results = {}  # gate id -> its Allure result (the test's name, its parameters)
    for path in (run / "allure").glob("*-result.json"):
        result = json.loads(path.read_text())
        params = {p["name"]: p["value"] for p in result.get("parameters", [])}
        name = result["fullName"].rsplit("#", 1)[-1]
        results[f"{name}[{params['reference']}-{params['template']}-{params['region']}]"] = result
    assert sorted(results) == sorted([GATE, PASSING])
    failing = {a["name"]: a for a in results[GATE].get("attachments", [])}
    assert results[GATE]["status"] == "failed" and set(GRIDS) <= set(failing)
    for name in GRIDS:
        attached = run / "allure" / failing[name]["source"]
        assert failing[name]["type"] == "image/png" and attached.read_bytes()[:8] == PNG
        assert attached.read_bytes() == (run / "art" / GATE / name).read_bytes()  # the grid of the artifacts folder
    assert json.loads((run / "allure" / failing["evidence.json"]["source"]).read_text())["group"] == "africa"
    passing = [a["name"] for a in results[PASSING].get("attachments", [])]
    assert results[PASSING]["status"] == "passed" and not [n for n in passing if n.startswith("evidence")]


# -- Decomposed-DIG -------------------------------------------------------------------------------

def test_decomposed_failing_gates_leave_their_grids_and_the_passing_ones_none(decomposed_run):
    assert _evidence_files(decomposed_run, DEC_COVERAGE) == ["evidence.json", *GRIDS]
    assert _evidence_files(decomposed_run, DEC_PRECISION) == ["evidence.json", GRIDS[0]]  # no not-reached grid for precision
    for gate in DEC_PASSING:
        assert _evidence_files(decomposed_run, gate) == []


def test_decomposed_evidence_counts_agree_with_the_gate_in_its_masked_space(decomposed_run):
    coverage = json.loads((decomposed_run / "art" / DEC_COVERAGE / "evidence.json").read_text())
    record = _record(decomposed_run, DEC_COVERAGE)
    assert coverage["space"] == "BG-only ViT" and coverage["real"] == record["n"]
    assert coverage["real_reached"] / coverage["real"] == pytest.approx(record["value"], abs=1e-12)
    assert len(coverage["real_not_reached"]) == coverage["real"] - coverage["real_reached"] > 0
    assert all(r["path"].split("/")[-3] == "africa" for r in coverage["real_not_reached"])
    precision = json.loads((decomposed_run / "art" / DEC_PRECISION / "evidence.json").read_text())
    record = _record(decomposed_run, DEC_PRECISION)
    assert precision["space"] == "Obj-only ViT" and precision["generated"] == record["n"]  # the sample total, misses in
    assert precision["generated_inside"] / precision["generated"] == pytest.approx(record["value"], abs=1e-12)
    missing = [g for g in precision["furthest_generated"] if g["d_over_r"] is None]  # nothing segmented: listed first
    assert precision["furthest_generated"][: len(missing)] == missing
    assert len(missing) == min(precision["generated_without_feature"], 8)
    assert all(g["prompt"].endswith("in Africa") and isinstance(g["seed"], int) for g in precision["furthest_generated"])


@needs_chromium
def test_in_chromium_the_failing_decomposed_gates_sections_show_their_grids(decomposed_run, tmp_path):
    images = _images_in_chromium(decomposed_run / "report" / "index.html", tmp_path / "profile")
    shown = {k: v for k, v in images.items() if "test_bg_coverage" in k or "test_obj_precision" in k}
    assert sorted(shown.values()) == [1, 2], images  # precision: generated-vs-real; coverage: both grids
    assert all("africa" in k for k in shown)
