"""The labelling page in a real browser (headless Chromium driven by playwright), end to end: a CIS run writes its
judgements, ``t2i-fairness audit`` writes the page, a person's keys are recorded and survive a reload, and the CSV
the page saves is what ``--t2i-audit`` reads."""

from __future__ import annotations

import csv
import json
import os
import shutil
from pathlib import Path

import pytest

from t2i_fairness.cli import main

REPO = Path(__file__).resolve().parents[1]

FAKEGEN = '''
import numpy as np
from PIL import Image

class Fake:
    fingerprint = "auditfake:v1"
    def generate(self, prompts, seeds):
        return [Image.fromarray(np.random.default_rng([s, len(p)]).integers(0, 255, (24, 24, 3), dtype=np.uint8))
                for p, s in zip(prompts, seeds)]

def make():
    return Fake()
'''

needs_browser = pytest.mark.skipif(
    shutil.which("chromium") is None and not os.environ.get("CI"),
    reason="headless Chromium not installed (Debian: apt-get install chromium; .ci/run installs it in CI)")


def _run(pytester, *extra):
    return pytester.runpytest_inprocess(
        "fairness_tests/test_cis.py", "-k", "test_cis and k2", "-p", "no:cacheprovider",
        "--t2i-model", "python:auditfake:make", "--t2i-thresholds", str(pytester.path / "thr.yaml"),
        "--t2i-cache-dir", str(pytester.path / "cache"), "--t2i-artifacts", str(pytester.path / "art"),
        "--t2i-no-progress", "--t2i-cis-k", "2", "--t2i-cis-prompts", "8", "--t2i-cis-images", "2", *extra)


@needs_browser
def test_the_page_records_keys_resumes_after_a_reload_and_its_csv_is_what_the_audit_reads(pytester, tmp_path):
    try:
        from playwright import sync_api
    except ImportError:  # the dev extra installs it; CI must not pass by skipping
        if os.environ.get("CI"):
            pytest.fail("CI is set but playwright is not installed (pip install -e '.[dev]')")
        pytest.skip("playwright not installed (pip install -e '.[dev]')")
    (pytester.path / "fairness_tests").mkdir()
    shutil.copy(REPO / "fairness_tests" / "test_cis.py", pytester.path / "fairness_tests")
    pytester.makepyfile(auditfake=FAKEGEN)
    _run(pytester, "--t2i-update-thresholds").assert_outcomes(passed=1)
    art = pytester.path / "art"
    assert main(["audit", str(art), "--per-group", "8"]) == 0  # one unit of each of the 8 prompts
    page_file = art / "audit" / "audit.html"

    requests: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox"])
        try:
            context = browser.new_context(accept_downloads=True, offline=True)
            context.on("request", lambda r: requests.append(r.url))
            page = context.new_page()
            page.goto(page_file.as_uri())
            assert page.text_content("#progress") == "0 of 8 answered"
            first = page.text_content("#question")
            assert first.startswith("Does the image show ") and page.eval_on_selector("#image", "i => i.naturalWidth") == 24
            for key in "yns":
                page.keyboard.press(key)
            assert page.text_content("#progress") == "3 of 8 answered"
            # resumes: the three answers are kept, the fourth question is shown. Chromium hands localStorage
            # writes to its browser process asynchronously; a reload a few ms after the keys (a busy CI
            # machine) can read the store before they arrive, so it is given up to 5 s, as a person would
            for _ in range(10):
                page.wait_for_timeout(500)
                page.reload()
                if page.text_content("#progress") != "0 of 8 answered":
                    break
            assert page.text_content("#progress") == "3 of 8 answered"
            assert page.text_content("#position") == "4 / 8"
            page.keyboard.press("ArrowLeft")
            assert page.text_content("#current") == "your answer: skip"
            page.keyboard.press("y")  # the skipped one answered after all
            for key in "ynyny":
                page.keyboard.press(key)
            assert page.text_content("#progress") == "8 of 8 answered" and page.is_visible("#finished")
            with page.expect_download() as download:
                page.click("#save")
            saved = tmp_path / "labels.csv"
            download.value.save_as(saved)
        finally:
            browser.close()
    assert all(u.startswith(("file:", "data:", "blob:")) for u in requests), requests

    rows = list(csv.DictReader(saved.open()))
    sample = list(csv.DictReader((art / "audit" / "audit-sample.csv").open()))
    assert [r["unit"] for r in rows] == [r["unit"] for r in sample] and rows[0]["question"] == first
    assert [r["label"] for r in rows] == ["yes", "no", "yes", "yes", "no", "yes", "no", "yes"]

    audited = _run(pytester, "--t2i-audit", str(saved))
    audited.assert_outcomes(passed=1)
    record = json.loads((art / "run.json").read_text())["gates"][0]
    assert record["details"]["audit"]["labels"] == 8 and record["details"]["audit"]["judgements"] == 32  # 8 prompts x 2 images x K=2
    assert "rests on 8 human labels" in record["message"] and "scorer sensitivity in K=2" in record["message"]
    assert record["uncertainty"]["method"].startswith("prediction-powered (exact")

    other_seed = _run(pytester, "--t2i-audit", str(saved), "--t2i-seed", "1")
    assert other_seed.ret == 4
    other_seed.stderr.fnmatch_lines([f"*--t2i-audit: {saved}:2: the label file is from a run of seed 0, this run's seed is 1*"])
