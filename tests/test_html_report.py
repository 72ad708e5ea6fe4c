"""The own HTML report (``--t2i-report``) and the Allure labels: unit, end to end, and in a browser.

The browser test opens the report in headless Chromium (Debian's ``chromium``; ``.ci/run`` installs
it) and checks what a person sees: the gate table's rows with verdict, estimate, interval and
bound, every image decoded, and no script or console error.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from PIL import Image

from t2i_fairness.report.html import SMOKE_BANNER, SYNTHETIC_BANNER, header_for, render_report, write_report
from t2i_fairness.report.labels import gate_labels
from t2i_fairness.spine.options import T2IOptions
from t2i_fairness.gating.session import GateSession


def _png(color=(200, 40, 40), size=(24, 16)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, format="PNG")
    return buf.getvalue()


def _record(gate, status, value, bound, interval=None, direction="min", details=None, nodeid=None):
    return dict(gate=gate, nodeid=nodeid or f"fairness_tests/test_x.py::{gate}", value=value, n=12, direction=direction,
                status=status, bound=bound, write=None, message=f"{gate}: {value} vs {direction} {bound}",
                provenance={"model": "tiny"}, interval=interval, details=details or {})


@pytest.fixture
def session(tmp_path):
    """Two gates (one failed), a summary section, and a PNG and a JSON artifact of one test."""
    s = GateSession(tmp_path / "thr.yaml")
    s.add(_record("test_region_precision[synthetic-object-africa]", "pass", 0.75, 0.5, [0.6, 0.9]))
    s.add(_record("test_region_coverage[synthetic-object-africa]", "fail", 0.25, 0.5, [0.125, 0.375]))
    s.add_section({"title": "DIG In Region Indicator: synthetic / object", "lines": ["africa  precision 0.750"]})
    folder = tmp_path / "art" / "test_region_coverage[synthetic-object-africa]"
    folder.mkdir(parents=True)
    (folder / "bars.png").write_bytes(_png())
    (folder / "regions.json").write_text(json.dumps({"africa": {"coverage": 0.25}}))
    for name in ("bars.png", "regions.json"):
        s.add_artifact({"nodeid": "fairness_tests/test_x.py::test_region_coverage[synthetic-object-africa]",
                        "path": f"{folder.name}/{name}"})
    return s


class Page(HTMLParser):
    """What a reader sees of a report: the <html> attributes, gate table rows (cell texts), images."""

    def __init__(self, text: str):
        super().__init__()
        self.root: dict = {}
        self.rows: list[list[str]] = []
        self.images: list[dict] = []
        self.hrefs: list[str] = []
        self._table = self._cell = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "html":
            self.root = a
        elif tag == "table":
            self._table = a.get("id")
        elif tag == "tr" and self._table == "gate-table" and "gate" in (a.get("class") or ""):
            self.rows.append([])
        elif tag == "td" and self._table == "gate-table" and self.rows:
            self.rows[-1].append("")
            self._cell = True
        elif tag == "img":
            self.images.append(a)
        elif tag == "a" and "href" in a:
            self.hrefs.append(a["href"])
        elif tag == "details":
            self._cell = False  # the details drawer is not part of what the row shows

    def handle_endtag(self, tag):
        if tag == "table":
            self._table = None
        elif tag == "td":
            self._cell = None

    def handle_data(self, data):
        if self._cell and self.rows:
            self.rows[-1][-1] += data


def test_failed_gate_shows_estimate_interval_and_bound_first(session, tmp_path):
    page = Page(render_report(session, tmp_path / "art", "demo", {"model": "tiny"}))
    assert [r[0].strip() for r in page.rows] == ["\u2717 FAIL", "ok"]  # failures first, marked
    verdict, gate, measured, interval, bound, n = (c.strip() for c in page.rows[0][:6])
    assert gate.startswith("test_region_coverage[synthetic-object-africa]")
    assert (measured, interval, bound, n) == ("0.2500", "[0.1250, 0.3750]", "min 0.5000", "12")


def test_sections_and_artifacts_are_inline_and_nothing_is_external(session, tmp_path):
    text = render_report(session, tmp_path / "art", "demo", {"model": "tiny"})
    assert "<h3>DIG In Region Indicator: synthetic / object</h3>" in text
    assert '<pre class="section">africa  precision 0.750</pre>' in text
    assert f'src="data:image/png;base64,{base64.b64encode(_png()).decode()}"' in text
    assert "regions.json" in text and "&quot;coverage&quot;: 0.25" in text
    page = Page(text)
    # the failed gate's image twice: beside its verdict (its evidence) and among its test's artifacts
    assert len(page.images) == 2 and all(h.startswith("#") for h in page.hrefs)
    assert not re.search(r"""(src|href)=["'](?!data:|#)""", text), "a reference leaves the file"
    assert not re.search(r"https?://|<link\b|@import|url\(", text)
    assert 'href="#test-fairness_tests-test_x-py-test_region_coverage-synthetic-object-africa"' in text


def test_a_failed_gate_shows_its_evidence_images_beside_its_verdict(session, tmp_path):
    """Its evidence_*.png grids when it has them (not its other plots); a failed gate without an image says so;
    a passed gate shows none."""
    folder = tmp_path / "art" / "test_region_coverage[synthetic-object-africa]"
    grid = _png((10, 200, 10), (40, 30))
    (folder / "evidence_real_not_reached.png").write_bytes(grid)
    (folder / "evidence.json").write_text("{}")
    for name in ("evidence_real_not_reached.png", "evidence.json"):
        session.add_artifact({"nodeid": "fairness_tests/test_x.py::test_region_coverage[synthetic-object-africa]",
                              "path": f"{folder.name}/{name}"})
    session.add(_record("test_region_precision[synthetic-object-europe]", "fail", 0.25, 0.5, [0.1, 0.4]))
    text = render_report(session, tmp_path / "art", "demo", {"model": "tiny"})
    rows = re.findall(r'<tr class="gate .*?</tr>', text, flags=re.S)
    by_gate = {re.search(r'data-search="(\S+)', r).group(1): r for r in rows}
    failed = by_gate["test_region_coverage[synthetic-object-africa]"]
    evidence = failed.split('<div class="evidence"', 1)[1].split("<details>", 1)[0]
    assert base64.b64encode(grid).decode() in evidence and base64.b64encode(_png()).decode() not in evidence
    assert "evidence_real_not_reached.png" in evidence
    none = by_gate["test_region_precision[synthetic-object-europe]"]
    assert "evidence: no image (this test attached none)" in none and "<img" not in none
    passed = by_gate["test_region_precision[synthetic-object-africa]"]
    assert 'class="evidence' not in passed


def test_baseline_table_only_with_baseline_details(session, tmp_path):
    assert 'id="baseline"' not in render_report(session, tmp_path, "t", {})
    base = {"model": "tiny", "value": 0.8, "delta": -0.05, "interval": [-0.1, -0.01], "allowed": 0.02, "failed": True}
    session.add(_record("test_clgc[hin_deva]", "fail", 0.75, 0.5, details={"baseline": base}))
    session.add(_record("test_clgc[hin_deva]", "baseline", 0.8, None))  # the baseline's own run: no gate row
    text = render_report(session, tmp_path, "t", {})
    table = text.split('id="baseline-table"')[1].split("</table>")[0]
    for cell in ("test_clgc[hin_deva]", "0.8000", "0.7500", "-0.0500", "[-0.1000, -0.0100]", "drop 0.0200", "REGRESSED"):
        assert cell in table
    assert len(Page(text).rows) == 3


def test_banners_for_the_smoke_model_and_a_synthetic_reference(session):
    header, banners = header_for(T2IOptions(), session)
    assert banners == [SMOKE_BANNER, SYNTHETIC_BANNER] and header["model"] == "tiny"
    empty = GateSession(Path("t.yaml"))
    assert header_for(T2IOptions(), empty)[1] == [SMOKE_BANNER]  # no gate measured against the synthetic set
    real = T2IOptions(model="org/model", references=(("geode", "/data/geode"),))
    assert header_for(real, session)[1] == []
    assert "random weights" in render_report(session, Path("."), "t", header, banners)


def test_write_report_is_one_file(session, tmp_path):
    path = write_report(tmp_path / "out", session, tmp_path / "art", "demo", {})
    assert path == tmp_path / "out" / "index.html" and [p.name for p in path.parent.iterdir()] == ["index.html"]


def test_labels_from_names_with_the_families_vocabulary():
    from t2i_fairness.families import FAMILIES
    from t2i_fairness.report.labels import Vocabulary
    from t2i_fairness.spine.options import resolve_options

    options = resolve_options(lambda flag: [] if flag == "--t2i-reference" else None, families=FAMILIES)
    vocab = Vocabulary.from_tokens(f.labels(options, options.family(f.name)) for f in FAMILIES if f.labels)
    lab = gate_labels("fairness_tests/test_dig_in_region.py::test_object_region_coverage[mini-object_in_country-stove-africa]",
                      vocabulary=vocab)
    assert (lab.family, lab.template, lab.regions, lab.other) == ("object_region_coverage", "object_in_country", ("africa",), ("mini", "stove"))
    assert gate_labels("test_scal_with_english[tam_taml]", vocabulary=vocab).tags == ["language:tam_Taml"]
    assert gate_labels("test_x[a]", {"template": "object", "region": "europe"}, vocab).tags == ["region:europe"]
    assert gate_labels("test_object_consistency[object]", vocabulary=vocab).template == "object"
    assert gate_labels("test_scal_with_english[tam_taml]").tags == []  # the report knows no vocabulary of its own
    assert gate_labels("test_scal_matrix").title == "Scal matrix"


# -- end to end through pytester, on a fake generator ------------------------------------------------

FAKEGEN = '''
import numpy as np
from PIL import Image

class Fake:
    fingerprint = "fake:1"
    def generate(self, prompts, seeds):
        return [Image.fromarray(np.random.default_rng([s, len(p)]).integers(0, 255, (16, 16, 3), dtype=np.uint8))
                for p, s in zip(prompts, seeds)]

def make():
    return Fake()
'''

SUITE = '''
"""Toy indicators: a grid of generated images, a summary, and gates that pass and fail."""
import io
import pytest
from PIL import Image

def grid(refs):
    out = Image.new("RGB", (16 * len(refs), 16))
    for i, r in enumerate(refs):
        out.paste(r.load(), (16 * i, 0))
    buf = io.BytesIO()
    out.save(buf, format="PNG")
    return buf.getvalue()

@pytest.mark.parametrize("template, region", [("object_in_region", "africa"), ("object_in_region", "europe")])
def test_toy_precision(template, region, t2i, gate, t2i_report):
    refs = t2i.images([f"bag in {region}"], 3)[0]
    t2i_report.png("lowest_scoring", grid(refs))
    t2i_report.json("scores", {"region": region, "images": len(refs)})
    t2i_report.section("Toy table", [f"{region} precision"])
    gate(0.25 if region == "africa" else 0.75, n=len(refs), interval=(0.125, 0.375) if region == "africa" else None)
'''

THRESHOLDS = """gates:
  test_toy_precision[object_in_region-africa]:
    min: 0.5
  test_toy_precision[object_in_region-europe]:
    min: 0.5
"""


def _run(pytester, *extra):
    pytester.makepyfile(html_fakegen=FAKEGEN, test_toy=SUITE)  # not "fakegen": tests/fakegen.py comes first on the path
    (pytester.path / "thr.yaml").write_text(THRESHOLDS)
    return pytester.runpytest_inprocess(
        "test_toy.py", "-p", "no:cacheprovider", "--t2i-model", "python:html_fakegen:make", "--t2i-thresholds", "thr.yaml",
        "--t2i-cache-dir", "cache", "--t2i-artifacts", "art", "--t2i-report", "report", "--t2i-no-progress", *extra,
    )


def test_report_end_to_end_under_xdist_with_allure(pytester):
    """Workers write the artifacts, the controller writes one report; Allure gets labels and the measurement."""
    result = _run(pytester, "-n", "2", "--alluredir", "allure")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*test_toy_precision[[]object_in_region-africa[]]*0.2500 [[]0.1250, 0.3750[]] (n=3)*min 0.5*",
        f"HTML report: {pytester.path / 'report' / 'index.html'}",
    ])
    text = (pytester.path / "report" / "index.html").read_text()
    page = Page(text)
    assert [r[0].strip() for r in page.rows] == ["\u2717 FAIL", "ok"]
    assert [c.strip() for c in page.rows[0][2:6]] == ["0.2500", "[0.1250, 0.3750]", "min 0.5000", "3"]
    # each test's grid, and the failed gate's again beside its verdict (its evidence: it has no evidence_*.png)
    assert len(page.images) == 3 and all(i["src"].startswith("data:image/png;base64,") for i in page.images)
    assert "<h3>Toy table</h3>" in text and SMOKE_BANNER not in text  # a real (here: fake) model, no smoke banner

    results = [json.loads(p.read_text()) for p in (pytester.path / "allure").glob("*-result.json")]
    africa = next(r for r in results if "africa" in r["name"] or "africa" in r["fullName"] + str(r["parameters"]))
    labels = {(lab["name"], lab["value"]) for lab in africa["labels"]}
    assert {("feature", "Toy precision"), ("story", "Toy precision"), ("tag", "region:africa"), ("tag", "template:object_in_region"),
            ("epic", "Toy indicators: a grid of generated images, a summary, and gates that pass and fail")} <= labels
    assert africa["name"] == "Toy precision [object_in_region-africa]: 0.2500 [0.1250, 0.3750] vs min 0.5000"
    params = {p["name"]: p for p in africa["parameters"]}
    assert params["seed"].get("excluded") and not params["model"].get("excluded") and not params["region"].get("excluded")
    assert (params["region"]["value"], params["template"]["value"], params["model"]["value"]) == (
        "africa", "object_in_region", "python:html_fakegen:make")  # unquoted; the model is part of the history id
    names = {a["name"] for a in africa["attachments"]}
    assert {"measurement.json", "lowest_scoring.png", "scores.json"} <= names


CIS_LIKE = '''
"""A module named like a family's suite module: its tests belong to that paper family."""
import pytest

@pytest.mark.parametrize("k", [1, 2])
def test_cis(k, gate):
    gate(0.75, n=4)

def test_cis_drop_per_component(gate):
    gate(0.1, n=4, higher_is_better=False)
'''


def test_allure_feature_is_the_paper_family_and_the_model_keeps_its_own_history(pytester):
    pytester.makepyfile(html_fakegen=FAKEGEN + "\nmake2 = make\n", test_cis=CIS_LIKE)
    (pytester.path / "thr.yaml").write_text("gates:\n  test_cis[1]: {min: 0.5}\n  test_cis[2]: {min: 0.5}\n"
                                             "  test_cis_drop_per_component: {max: 0.5}\n")
    history = {}
    for model, seed in [("python:html_fakegen:make", "0"), ("python:html_fakegen:make2", "0"), ("python:html_fakegen:make", "7")]:
        out = f"allure-{model[-5:]}-{seed}"
        # smoke: a model given as python:... defaults to the paper preset, and generation first would make the
        # 656,000 images of the paper's CIS study for this module named like the family's
        result = pytester.runpytest_inprocess("test_cis.py", "-p", "no:cacheprovider", "--t2i-model", model, "--t2i-seed", seed,
                                               "--t2i-preset", "smoke",
                                               "--t2i-thresholds", "thr.yaml", "--t2i-cache-dir", "cache", "--alluredir", out)
        result.assert_outcomes(passed=3)
        results = [json.loads(p.read_text()) for p in (pytester.path / out).glob("*-result.json")]
        features = {lab["value"] for r in results for lab in r["labels"] if lab["name"] == "feature"}
        stories = {lab["value"] for r in results for lab in r["labels"] if lab["name"] == "story"}
        assert features == {"Components Inclusion Score"} and stories == {"CIS", "Cis drop per component"}
        k1 = next(r for r in results if r["name"].startswith("CIS [1]"))
        assert {p["name"]: p["value"] for p in k1["parameters"]}["k"] == "1"
        history[(model, seed)] = k1["historyId"]
    assert history[("python:html_fakegen:make", "0")] != history[("python:html_fakegen:make2", "0")]  # another model
    assert history[("python:html_fakegen:make", "0")] == history[("python:html_fakegen:make", "7")]  # another seed: same history


# -- in a browser ------------------------------------------------------------------------------------

def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def open_in_chromium(html_file: Path, profile: Path) -> tuple[Page, list[str]]:
    """Load the file in headless Chromium; the DOM after load (scripts run) and the console messages."""
    if _chromium() is None:  # only reached with CI set: .ci/run installs Chromium, so its absence is a CI bug
        pytest.fail("CI is set but chromium is not installed: .ci/run should have installed it (apt-get install chromium)")
    cmd = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000",
           "--dump-dom", html_file.resolve().as_uri()]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    return Page(done.stdout), console


needs_chromium = pytest.mark.skipif(
    _chromium() is None and not os.environ.get("CI"),
    reason="headless Chromium not installed (Debian: apt-get install chromium; .ci/run installs it in CI)",
)


@needs_chromium
def test_report_in_headless_chromium(pytester, tmp_path):
    result = _run(pytester)
    result.assert_outcomes(passed=1, failed=1)
    page, console = open_in_chromium(pytester.path / "report" / "index.html", tmp_path / "profile")
    assert page.root.get("data-ready") == "1", "the page's load handler did not run"
    assert console == [] and json.loads(page.root["data-errors"]) == []
    rows = [[c.strip() for c in r] for r in page.rows]
    assert [r[0] for r in rows] == ["\u2717 FAIL", "ok"]
    assert rows[0][1].startswith("test_toy_precision[object_in_region-africa]")
    assert rows[0][2:6] == ["0.2500", "[0.1250, 0.3750]", "min 0.5000", "3"]
    assert rows[1][1].startswith("test_toy_precision[object_in_region-europe]") and rows[1][2] == "0.7500"
    # each test's grid, and the failed gate's beside its verdict: all three decoded
    assert page.root["data-images"] == page.root["data-images-loaded"] == str(len(page.images)) == "3"


@needs_chromium
def test_the_browser_check_sees_broken_images_and_script_errors(session, tmp_path):
    """The checks above are not vacuous: a broken image and a script error show up."""
    path = write_report(tmp_path / "out", session, tmp_path / "art", "demo", {})
    broken = '<img src="data:image/png;base64,AAAA" alt="broken"><script>notDefined();</script></body>'
    path.write_text(path.read_text().replace("</body>", broken))
    page, console = open_in_chromium(path, tmp_path / "profile")
    errors = json.loads(page.root["data-errors"])
    assert any("notDefined" in e for e in errors) and any("broken" in e for e in errors)
    assert any("notDefined" in line for line in console)
    # the fixture's image twice (the failed gate's evidence, its test's artifacts) and the broken one
    assert (page.root["data-images"], page.root["data-images-loaded"]) == ("3", "2")


def test_image_grid_outlines_masks_and_checks_lengths():
    import numpy as np

    from t2i_fairness.report.grids import OUTLINE, image_grid

    mask = np.zeros((32, 32), bool)
    mask[8:24, 8:24] = True
    png = image_grid([Image.new("RGB", (32, 32), "white")] * 2, ["a", "b"], masks=[mask, None], thumb=32)
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
    outlined = (pixels == OUTLINE).all(axis=2)
    assert outlined[:32, :32].any() and not outlined[:32, 32:].any()  # only the masked image is outlined
    with pytest.raises(ValueError, match="captions must have one entry per image: 1 captions for 2 images"):
        image_grid([Image.new("RGB", (8, 8))] * 2, ["a"])


def test_a_group_whose_images_the_dedupe_left_out_shows_them():
    """collapse_region:africa makes every Africa image the same: DIG In's dedupe drops every copy, precision has
    no image left (undefined, a failure) and its evidence grid used to be empty; the images left out are the
    evidence of that miss."""
    import numpy as np

    from t2i_fairness.report.evidence import GeneratedImage, GroupEvidence, RealImage, evidence_grids

    same = lambda: Image.new("RGB", (8, 8), (90, 90, 90))  # noqa: E731
    dropped = [GeneratedImage("bag in Africa", s, same) for s in range(6)]
    ev = GroupEvidence("africa", [], [RealImage("a.png", "bag", "africa", same)], np.zeros((0, 2)), np.zeros((1, 2)),
                       np.ones(1), space="Inception", dropped=dropped)
    out = evidence_grids(ev, "precision")
    assert sorted(out) == ["evidence.json", "evidence_generated_left_out.png"]
    assert out["evidence.json"]["generated"] == 0 and out["evidence.json"]["generated_left_out"] == 6
    assert Image.open(io.BytesIO(out["evidence_generated_left_out.png"])).size[0] > 8 * 4
    kept = GroupEvidence("africa", dropped[:4], ev.real, np.ones((4, 2)), np.zeros((1, 2)), np.ones(1), dropped=dropped[4:])
    assert "evidence_generated_left_out.png" not in evidence_grids(kept, "precision")  # a few left out: not the miss
