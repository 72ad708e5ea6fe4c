"""The plugin end to end through pytester, with a fast fake generator (``python:fakegen:make``).

Each run is a real pytest session over a small gate file parametrized by region; only the last
test drives the repository's own gate with the tiny diffusion model.
"""

from __future__ import annotations

import csv
import os
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from PIL import Image

from t2i_fairness.gating.verdicts import Bound, ThresholdFile, proposed_path
from t2i_fairness.vocab.geode import GEODE_REGIONS

from demo_gates import DemoProject

REPO = Path(__file__).resolve().parents[1]
REGIONS = [r.slug for r in GEODE_REGIONS]


def esc(text: str) -> str:
    """``text`` as a literal inside an fnmatch pattern (brackets are character classes there)."""
    return re.sub(r"([\[\]])", r"[\1]", text)


IDS = [f"test_brightness[object_in_region-{r}]" for r in REGIONS]
N_IMAGES = len(REGIONS) * 2 * 3  # regions x objects (bag, car) x images per prompt



class Project(DemoProject):
    """A pytester folder with the gate file, the fake generator, a cache and a thresholds file."""

    def __init__(self, pytester: pytest.Pytester):
        super().__init__(pytester, "--t2i-model", "python:fakegen:make", "--t2i-objects", "bag,car",
                         "--t2i-images-per-prompt", "3")

    def run_subprocess(self, *extra: str) -> pytest.RunResult:
        """A run in a child Python: xdist's controller run in this process leaves its state behind."""
        return self.pytester.runpytest_subprocess(*self.args, *extra, timeout=300)

    def gates(self) -> dict[str, Bound]:
        return ThresholdFile.load(self.thresholds).gates

    def set_bound(self, gate: str, value: float) -> None:
        t = ThresholdFile.load(self.thresholds)
        t.gates[gate] = Bound(t.gates[gate].direction, value, t.gates[gate].provenance)
        t.save()

    def pngs(self) -> list[Path]:
        return sorted((self.cache / "images").rglob("*.png"))

    def updated(self) -> dict[str, Bound]:
        """Bring the thresholds file up to date with the measured values."""
        result = self.run("--t2i-update-thresholds")
        result.assert_outcomes(passed=6)
        return self.gates()


@pytest.fixture(scope="session", autouse=True)
def heavy_imports_outside_pytester():
    """pytester drops modules first imported inside it, and torch cannot be imported twice in a process
    (a segfault in the garbage collector); so what in-process runs import is loaded before them."""
    import diffusers  # noqa: F401
    import torch  # noqa: F401

    import t2i_fairness.generators.diffusers_pipe  # noqa: F401
    import t2i_fairness.spine.workbench  # noqa: F401


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch) -> Project:
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    monkeypatch.setenv("FAKEGEN_BATCH", "4")
    return Project(pytester)


# ------------------------------------------------------------------------------- the gate lifecycle


def test_missing_gates_fail_and_are_proposed_then_update_then_pass(project):
    first = project.run()
    first.assert_outcomes(failed=6)
    assert first.ret == pytest.ExitCode.TESTS_FAILED
    first.stdout.fnmatch_lines([
        "*test_brightness?object_in_region-africa?: no gate in *t.yaml; measured 0.* (n=6). "
        "Proposed `min: 0.*` (margin * at level 0.99) in *t.proposed.yaml: review it and copy it over, or run with --t2i-update-thresholds.",
        "*= t2i-fairness gates =*",
        "gate * measured * bound * n * verdict",
        "test_brightness?object_in_region-africa? * 0.* - * 6 * MISSING",
        "6 gates, 6 failed (*t.yaml)",
        f"images: {N_IMAGES} generated, 0 from cache",
        "6 gate(s) missing; proposed bounds written to *t.proposed.yaml",
    ])
    assert not project.thresholds.exists()  # a proposal is never applied silently
    proposal = ThresholdFile.load(proposed_path(project.thresholds))
    assert sorted(proposal.gates) == sorted(IDS)
    assert all(b.direction == "min" and b.provenance in proposal.provenances for b in proposal.gates.values())
    (prov,) = proposal.provenances.values()
    assert prov["model"] == "fakegen:v1" and prov["objects"] == "bag,car" and prov["images_per_prompt"] == 3

    update = project.run("--t2i-update-thresholds")
    update.assert_outcomes(passed=6)
    update.stdout.fnmatch_lines([
        "test_brightness?object_in_region-africa? * - * 6 * written",
        f"images: 0 generated, {N_IMAGES} from cache",
        f"updated 6 gate(s) in {project.thresholds}:",
        "  test_brightness?object_in_region-africa?: new -> min 0.*",
    ])
    assert project.gates() == proposal.gates  # exactly the proposed values

    plain = project.run()
    plain.assert_outcomes(passed=6)
    assert plain.ret == pytest.ExitCode.OK
    plain.stdout.fnmatch_lines([
        "gate * measured * bound * n * verdict",
        "-* -* -* -* -*",
        "test_brightness?object_in_region-africa? * 0.* min 0.* 6 * ok",
        "6 gates, 0 failed (*t.yaml)",
        f"images: 0 generated, {N_IMAGES} from cache",
    ])
    plain.stdout.no_fnmatch_line("*updated*")
    plain.stdout.no_fnmatch_line("*not used by any test*")


def test_a_truncated_png_is_regenerated_alone(project):
    project.updated()
    pngs = project.pngs()
    assert len(pngs) == N_IMAGES
    victim = pngs[7]
    data = victim.read_bytes()
    victim.write_bytes(data[:-10])
    result = project.run()
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines([
        # the truncated image's canonical batch (3 images) is made again whole; the 2 intact copies are kept
        f"images: 3 generated, {N_IMAGES - 1} from cache (2 of the generated were still cached*",
        "1 corrupt image regenerated (its bytes matched no index entry and did not decode):",
        f"  {victim}",
    ])
    assert victim.read_bytes() == data


def test_removing_a_gate_fails_that_test_with_a_proposal(project):
    bounds = project.updated()
    t = ThresholdFile.load(project.thresholds)
    del t.gates[IDS[0]]
    t.save()
    result = project.run()
    result.assert_outcomes(passed=5, failed=1)
    result.stdout.fnmatch_lines([
        "1 gate(s) missing; proposed bounds written to *t.proposed.yaml",
        f"FAILED *{esc(IDS[0])}*",
    ])
    assert ThresholdFile.load(proposed_path(project.thresholds)).gates == {IDS[0]: bounds[IDS[0]]}
    assert IDS[0] not in project.gates()  # still not applied


def test_update_refuses_to_loosen_and_allow_loosen_allows(project):
    bounds = project.updated()
    measured = bounds[IDS[0]].value
    project.set_bound(IDS[0], measured + 0.1)  # someone tightened it beyond what the model does

    # the demo gate's value has no interval: a miss is inconclusive (no certainty from a sample), which
    # --t2i-inconclusive fail turns into a failure
    plain = project.run("--t2i-inconclusive", "fail")
    plain.assert_outcomes(passed=5, failed=1)
    plain.stdout.fnmatch_lines([f"*{esc(IDS[0])}: measured * bound min {measured + 0.1:g}*INCONCLUSIVE*"])

    refused = project.run("--t2i-update-thresholds", "--t2i-inconclusive", "fail")
    refused.assert_outcomes(passed=5, failed=1)
    refused.stdout.fnmatch_lines([
        f"*{esc(IDS[0])}: measured * refusing to loosen the gate to {measured:g} without --t2i-allow-loosen*",
        f"{esc(IDS[0])} * min * REFUSED",
        "refused to loosen 1 gate(s) (use --t2i-allow-loosen after review):",
        f"  {esc(IDS[0])}: min {measured + 0.1:g} -> *",
    ])
    assert project.gates()[IDS[0]].value == measured + 0.1  # untouched

    allowed = project.run("--t2i-update-thresholds", "--t2i-allow-loosen")
    allowed.assert_outcomes(passed=6)
    allowed.stdout.fnmatch_lines(["updated 1 gate(s) in *", f"  {esc(IDS[0])}: min {measured + 0.1:g} -> min {measured:g}"])
    assert project.gates() == bounds


def test_update_tightens_without_allow_loosen(project):
    bounds = project.updated()
    project.set_bound(IDS[1], bounds[IDS[1]].value - 0.2)
    result = project.run("--t2i-update-thresholds")
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["updated 1 gate(s) in *", f"  {esc(IDS[1])}: min * -> min {bounds[IDS[1]].value:g}"])
    assert project.gates() == bounds


def test_k_africa_runs_only_africas_gates(project):
    project.updated()
    result = project.run("-k", "africa")
    result.assert_outcomes(passed=1, deselected=5)
    result.stdout.fnmatch_lines(["1 gates, 0 failed (*)", "images: 0 generated, 6 from cache"])
    table = [line for line in result.outlines if line.startswith("test_brightness[")]
    assert table == [line for line in table if "africa" in line] and len(table) == 1
    result.stdout.no_fnmatch_line("*not used by any test*")  # a partial run cannot judge that


def test_a_partial_update_touches_only_the_selected_gates(project):
    bounds = project.updated()
    for gate in IDS:
        project.set_bound(gate, bounds[gate].value - 0.25)
    result = project.run("-k", "africa or europe", "--t2i-update-thresholds")
    result.assert_outcomes(passed=2, deselected=4)
    result.stdout.fnmatch_lines(["updated 2 gate(s) in *"])
    now = project.gates()
    assert {g: now[g].value for g in IDS} == {
        g: bounds[g].value if ("africa" in g or "europe" in g) else bounds[g].value - 0.25 for g in IDS}


def test_gates_no_test_used_are_reported(project):
    project.updated()
    t = ThresholdFile.load(project.thresholds)
    t.gates["test_retired[object-bag]"] = Bound("min", 0.5)
    t.save()
    result = project.run()
    result.assert_outcomes(passed=6)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([f"1 gate(s) in {project.thresholds} were not used by any test:", "  test_retired[[]object-bag[]]"])


@pytest.mark.parametrize("args", [["-x"], ["--maxfail", "1"], ["--t2i-model", "./no-such-model"]], ids=["x", "maxfail", "fatal"])
def test_a_run_cut_short_does_not_call_gates_unused(project, args):
    project.updated()
    t = ThresholdFile.load(project.thresholds)
    del t.gates[IDS[0]]  # the first test fails
    t.save()
    result = project.run(*args)
    assert result.ret in (pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.USAGE_ERROR)
    result.stdout.no_fnmatch_line("*not used by any test*")


def test_provenance_mismatch_is_said_once_per_run_in_every_output(project):
    """Bounds written under another environment: one block at the top of the summary (which settings
    differ, for how many gates and bound groups, what it means), the same facts in HTML, JUnit and
    run.json, and no warning per gate. A run whose settings match says nothing about provenance."""
    import xml.etree.ElementTree as ET

    project.updated()
    t = ThresholdFile.load(project.thresholds)
    for prov in t.provenances.values():
        prov.update(device="cuda", torch="0.0")
    t.save()
    (group,) = ThresholdFile.load(project.thresholds).provenances  # the bounds were written under one setting
    outputs = ("--junitxml", "junit.xml", "--t2i-report", "report", "--t2i-artifacts", "art")
    result = project.run(*outputs)
    result.assert_outcomes(passed=6, warnings=0)  # no T2IProvenanceWarning per gate
    out = result.stdout.str()
    assert "T2IProvenanceWarning" not in out and out.count("set under other settings") == 1
    result.stdout.fnmatch_lines([
        "WARNING: 6 gate(s) were set under other settings:",
        "  device: cuda -> cpu",
        "  torch: 0.0 -> *",
        f"  bounds: 6 of 6 gates, 1 provenance group: {group} (6) in {project.thresholds}",
        "  meaning: the same model and sample in another environment (device, torch): the bounds are comparable, "
        "but the values may have moved*",
    ])
    lines = out.splitlines()
    assert lines.index("WARNING: 6 gate(s) were set under other settings:") < next(
        i for i, line in enumerate(lines) if line.startswith("gate "))  # at the top, before the gate table
    run = json.loads((project.pytester.path / "art" / "run.json").read_text())
    assert run["provenance"]["gates"] == 6 and run["provenance"]["kind"] == "environment"
    assert {(c["field"], c["old"]) for c in run["provenance"]["changes"]} == {("device", "cuda"), ("torch", "0.0")}
    assert run["provenance"]["groups"] == {group: 6}
    suite = ET.parse(project.pytester.path / "junit.xml").getroot().find("testsuite")
    props = {p.get("name"): p.get("value") for p in suite.findall("properties/property")}
    junit = json.loads(props["t2i_provenance"])
    assert (junit["gates"], junit["kind"], junit["groups"]) == (6, "environment", {group: 6})
    page = (project.pytester.path / "report" / "index.html").read_text()
    assert page.count('id="provenance"') == 1 and 'data-kind="environment"' in page and "What it means" in page

    # an update that leaves a bound's value as it was keeps the provenance it was measured under:
    # a small or other run never restamps bounds it did not change (so the block stays)
    project.run("--t2i-update-thresholds").assert_outcomes(passed=6)
    again = project.run()
    again.assert_outcomes(passed=6)
    assert again.stdout.str().count("set under other settings") == 1
    assert all(p.get("device") == "cuda" for p in ThresholdFile.load(project.thresholds).provenances.values())

    # bounds written under this run's settings: no provenance line at all, and null / absent elsewhere
    t = ThresholdFile.load(project.thresholds)
    for prov in t.provenances.values():
        prov.update(device="cpu", torch=str(__import__("torch").__version__))
    t.save()
    matching = project.run(*outputs)
    matching.assert_outcomes(passed=6)
    assert "other settings" not in matching.stdout.str() and "provenance group" not in matching.stdout.str()
    assert "meaning:" not in matching.stdout.str()
    assert json.loads((project.pytester.path / "art" / "run.json").read_text())["provenance"] is None
    suite = ET.parse(project.pytester.path / "junit.xml").getroot().find("testsuite")
    assert "t2i_provenance" not in {p.get("name") for p in suite.findall("properties/property")}
    assert 'id="provenance"' not in (project.pytester.path / "report" / "index.html").read_text()


def test_report_header_names_the_model_and_settings(project):
    result = project.run("--co")
    result.stdout.fnmatch_lines(["t2i-fairness: model python:fakegen:make; preset paper; scorers tiny; 2 objects, 3 images/prompt, seed 0; thresholds *t.yaml",
                                 "t2i-fairness: design sequential (the paper preset's default; --t2i-fixed-n decides every gate at N)"])
    # the design and why, whichever way it was chosen
    for extra, line in ((("--t2i-fixed-n",), "fixed N (--t2i-fixed-n)"),
                        (("--t2i-update-thresholds",), "fixed N: --t2i-update-thresholds (bounds are written from fixed-N measurements)"),
                        (("--t2i-preset", "smoke"), "fixed N (the smoke preset's design; --t2i-sequential decides in rounds)"),
                        (("--t2i-preset", "smoke", "--t2i-sequential"), "sequential (--t2i-sequential)")):
        project.run("--co", *extra).stdout.fnmatch_lines([f"t2i-fairness: design {line}"])


def test_the_two_designs_refuse_each_other_and_an_explicit_sequential_refuses_what_needs_fixed_n(project):
    both = project.run("--co", "--t2i-sequential", "--t2i-fixed-n")
    assert both.ret == pytest.ExitCode.USAGE_ERROR
    assert "--t2i-fixed-n: cannot be combined with --t2i-sequential; choose one design" in both.stderr.str()
    update = project.run("--co", "--t2i-sequential", "--t2i-update-thresholds")
    assert update.ret == pytest.ExitCode.USAGE_ERROR
    assert "--t2i-sequential: cannot be combined with --t2i-update-thresholds" in update.stderr.str()
    point = project.run("--co", "--t2i-gate", "point")  # the paper preset's default yields, and says why
    assert point.ret == pytest.ExitCode.OK
    point.stdout.fnmatch_lines(["t2i-fairness: design fixed N: --t2i-gate point (a point verdict has no error rate *"])


# ------------------------------------------------------------------------------- --t2i-model forms


def test_images_manifest_serves_the_gate(project):
    folder = project.pytester.path / "dalle"
    folder.mkdir()
    rows = []
    for obj in ("bag",):
        for i in range(2):
            name = f"{obj}-{i}.png"
            Image.new("RGB", (8, 8), (200, 100 + i, 0)).save(folder / name)
            rows.append({"prompt": f"{obj} in Africa", "index": i, "path": name})
    with open(folder / "manifest.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["prompt", "index", "path"])
        w.writeheader()
        w.writerows(rows)
    args = ["--t2i-model", f"images:{folder}", "--t2i-objects", "bag", "--t2i-images-per-prompt", "2"]
    result = project.run(*args, "-k", "africa", "--t2i-update-thresholds")
    result.assert_outcomes(passed=1, deselected=5)
    result.stdout.fnmatch_lines(["t2i-fairness: model images:*dalle*", "images: 2 generated, 0 from cache"])
    expected = (200 + 100 + 0 + 200 + 101 + 0) / 6 / 255
    bound = project.gates()[IDS[0]]  # written below the measurement by its margin (no interval: the float margin)
    assert bound.value + bound.margin == pytest.approx(expected, abs=1e-6) and bound.margin == pytest.approx(1e-4, rel=0.02)

    missing = project.run(*args, "-k", "europe")
    missing.assert_outcomes(failed=1, deselected=5)
    missing.stdout.fnmatch_lines(["*manifest.csv lacks images for 1 prompt(s) the suite asks for: 'bag in Europe'*"])


def test_a_failing_python_factory_ends_the_session_with_its_error(project):
    project.pytester.makepyfile(brokengen="def make():\n    raise RuntimeError('weights not mounted')\n")
    result = project.run("--t2i-model", "python:brokengen:make")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines([
        "*t2i-fairness: --t2i-model 'python:brokengen:make': the factory raised RuntimeError: weights not mounted*"])
    result.assert_outcomes()  # the session ended before any test ran


@pytest.mark.parametrize("spec, message", [
    ("./no-such-model", "--t2i-model './no-such-model': no diffusers pipeline at */no-such-model (model_index.json not found)*"),
    ("nobody-t2i/no-such-model", "--t2i-model 'nobody-t2i/no-such-model' could not be loaded (*). Check the id or path;*"),
], ids=["local-path", "hub-id"])
def test_a_missing_model_fails_in_seconds_with_a_clear_message(project, monkeypatch, spec, message):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.monotonic()
    result = project.run("--t2i-model", spec, "-k", "africa")
    elapsed = time.monotonic() - start
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines([f"*t2i-fairness: {message}"])
    assert elapsed < 30, f"took {elapsed:.1f}s to report a missing model"


# ------------------------------------------------------------------------------- option validation


@pytest.mark.parametrize("args, message", [
    (["--t2i-objects", "bag,spaceship"], "ERROR: --t2i-objects: unknown object(s) [[]'spaceship'[]]; choose from bag, bicycle, * or 'all'"),
    (["--t2i-images-per-prompt", "0"], "ERROR: --t2i-images-per-prompt: must be >= 1, got 0"),
    (["--t2i-batch-size", "0"], "ERROR: --t2i-batch-size: must be >= 1, got 0"),
    (["--t2i-steps", "-1"], "ERROR: --t2i-steps: must be >= 1, got -1"),
    (["--t2i-height", "0"], "ERROR: --t2i-height: must be >= 1, got 0"),
    (["--t2i-width", "0"], "ERROR: --t2i-width: must be >= 1, got 0"),
    (["--t2i-allow-loosen"], "ERROR: --t2i-allow-loosen: only makes sense with --t2i-update-thresholds"),
    (["--t2i-device", "tpu"], "ERROR: --t2i-device: 'tpu': choose cpu, cuda, cuda:N, mps or auto"),
    (["--t2i-reference", "geode"], "ERROR: --t2i-reference: 'geode': expected NAME=PATH, e.g. geode=/data/geode"),
    (["--t2i-scorers", "huge"], "*argument --t2i-scorers: invalid choice: 'huge' (choose from *tiny*, *paper*)"),
    (["--t2i-images-per-prompt", "many"], "*argument --t2i-images-per-prompt: invalid int value: 'many'"),
], ids=lambda v: v[0] if isinstance(v, list) else None)
def test_bad_options_are_usage_errors_naming_the_option(project, args, message):
    result = project.run(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_malformed_thresholds_file_is_a_usage_error_with_file_and_line(project):
    project.thresholds.write_text("gates:\n  ok: {min: 0.1}\n  bad: {min: high}\n")
    result = project.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --t2i-thresholds: {project.thresholds}:3: gate 'bad': min must be a number, got 'high'"])


def test_unwritable_cache_dir_ends_the_session_with_the_option_named(project):
    blocker = project.pytester.path / "not-a-dir"
    blocker.write_text("")
    result = project.run("--t2i-cache-dir", str(blocker), "-k", "africa")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines([f"*t2i-fairness: --t2i-cache-dir '{blocker}' is not writable*"])


# ------------------------------------------------------------------------------- pytest-xdist

SAVE_LOGGER = """
import os

import t2i_fairness.gating.verdicts as gates

_save = gates.ThresholdFile.save


def logged_save(self, path=None):
    with open(os.environ["T2I_SAVE_LOG"], "a") as fh:
        fh.write(f"{os.environ.get('PYTEST_XDIST_WORKER', 'controller')} {path or self.path}\\n")
    _save(self, path)


gates.ThresholdFile.save = logged_save
"""


def test_under_xdist_only_the_controller_writes(project, monkeypatch):
    """Two workers measure; the controller alone writes the file, once, with every gate and all image counts."""
    log = project.pytester.path / "saves.log"
    monkeypatch.setenv("T2I_SAVE_LOG", str(log))
    for var in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(var, raising=False)  # when this test itself runs under xdist, the inner controller is not a worker
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(project.pytester.path), os.environ.get("PYTHONPATH", "")]))
    project.pytester.makeconftest(SAVE_LOGGER)

    result = project.run_subprocess("-p", "xdist", "-n", "2", "--t2i-update-thresholds")
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*2 workers*", f"images: {N_IMAGES} generated, 0 from cache", f"updated 6 gate(s) in {project.thresholds}:"])
    assert log.read_text().split() == ["controller", str(project.thresholds)]
    assert sorted(project.gates()) == sorted(IDS)


# ------------------------------------------------------------------------------- the real suite, tiny model


def test_repository_gate_with_the_tiny_default(tmp_path):
    """The repo's own gate file on the built-in tiny model: generates images, scores them and proposes the gate."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO / "plugin"), os.environ.get("PYTHONPATH", "")])}
    env.pop("PYTEST_ADDOPTS", None)
    cmd = [sys.executable, "-m", "pytest", "fairness_tests/test_dig_in_consistency.py", "-k", "object_in_region-africa",
           "--t2i-objects", "bag", "--t2i-images-per-prompt", "2", "--t2i-thresholds", str(tmp_path / "tiny.yaml"),
           "--t2i-cache-dir", str(tmp_path / "cache"), "--t2i-artifacts", str(tmp_path / "artifacts"),
           "--t2i-no-progress", "-p", "no:cacheprovider", "-p", "no:unraisableexception", "-q"]
    first = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 1, first.stdout + first.stderr
    out = first.stdout
    assert re.search(r"^1 failed, \d+ deselected", out, re.M), out
    assert "test_object_consistency[object_in_region-africa]: no gate in" in out
    generated = int(re.search(r"^images: (\d+) generated, 0 from cache$", out, re.M).group(1))
    pngs = list((tmp_path / "cache" / "images").rglob("*.png"))
    assert generated == len(pngs) >= 2  # at least Africa's 2 images, each generated once
    from t2i_fairness.references.library import load_references

    real = sum(len(r.records) for r in load_references((), ("bag",)).values())  # CLIP's recognition of them, reported
    assert f"features:open_clip: {generated + real} computed, 0 from cache" in out
    proposal = ThresholdFile.load(tmp_path / "tiny.proposed.yaml")
    assert list(proposal.gates) == ["test_object_consistency[object_in_region-africa]"]
    (prov,) = proposal.provenances.values()
    assert prov["model"].startswith("diffusers:tiny-sd-") and prov["objects"] == "bag" and prov["images_per_prompt"] == 2



def test_baseline_model_runs_the_same_prompts_and_reports_paired_differences(pytester):
    project = Project(pytester)
    project.run("--t2i-update-thresholds").assert_outcomes(passed=len(REGIONS))
    # The same model and seed as baseline: every difference is exactly zero and nothing regresses.
    same = project.run("--t2i-baseline-model", "python:fakegen:make")
    same.assert_outcomes(passed=2 * len(REGIONS))  # one baseline and one candidate test per gate
    same.stdout.fnmatch_lines(["*candidate vs baseline python:fakegen:make*",
                               f"{esc(IDS[0])}: +0.0000 (candidate *, baseline *)"])
    assert set(project.gates()) == set(IDS)  # gate ids do not carry the baseline/candidate role
    # Another seed for the baseline: brightness differs; with no allowed drop some gates regress.
    other = project.run("--t2i-baseline-model", "python:fakegen:make", "--t2i-baseline-seed", "7")
    assert "REGRESSED" in other.stdout.str()
    assert other.parseoutcomes().get("failed", 0) >= 1
    lenient = project.run("--t2i-baseline-model", "python:fakegen:make", "--t2i-baseline-seed", "7",
                          "--t2i-baseline-delta", "1")
    lenient.assert_outcomes(passed=2 * len(REGIONS))


def test_sharding_changes_neither_scores_nor_images(pytester):
    """-n 0 and -n 2 (separate caches) give the same bounds and byte-identical images, each made once."""
    import filecmp

    project = Project(pytester)
    serial = project.run("--t2i-update-thresholds")
    serial.assert_outcomes(passed=len(REGIONS))
    serial_gates = {k: b.value for k, b in project.gates().items()}
    serial_cache = project.cache
    project.thresholds = pytester.path / "t2.yaml"
    project.cache = pytester.path / "cache2"
    project.args[project.args.index("--t2i-thresholds") + 1] = str(project.thresholds)
    project.args[project.args.index("--t2i-cache-dir") + 1] = str(project.cache)
    sharded = project.run_subprocess("-p", "xdist", "-n", "2", "--t2i-update-thresholds")
    sharded.assert_outcomes(passed=len(REGIONS))
    sharded.stdout.fnmatch_lines([f"images: {N_IMAGES} generated, 0 from cache"])
    assert {k: b.value for k, b in project.gates().items()} == serial_gates
    a = sorted(p.relative_to(serial_cache / "images") for p in (serial_cache / "images").rglob("*.png"))
    b = sorted(p.relative_to(project.cache / "images") for p in (project.cache / "images").rglob("*.png"))
    assert a == b and len(a) == N_IMAGES
    assert all(filecmp.cmp(serial_cache / "images" / p, project.cache / "images" / p, shallow=False) for p in a)


def test_cache_dir_as_fsspec_url_shares_images_across_machines(pytester):
    """A file:// store behind the local mirror: with the mirror gone (another machine), nothing is made again."""
    import shutil

    project = Project(pytester)
    shared = f"file://{pytester.path / 'shared-store'}"
    project.args[project.args.index("--t2i-cache-dir") + 1] = shared
    first = project.run("--t2i-update-thresholds")
    first.assert_outcomes(passed=len(REGIONS))
    first.stdout.fnmatch_lines([f"images: {N_IMAGES} generated, 0 from cache"])
    assert len(list((pytester.path / "shared-store" / "images").rglob("*.png"))) == N_IMAGES
    shutil.rmtree(pytester.path / ".t2i-cache-mirror")
    second = project.run()
    second.assert_outcomes(passed=len(REGIONS))
    second.stdout.fnmatch_lines([f"images: 0 generated, {N_IMAGES} from cache"])
