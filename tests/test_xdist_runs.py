"""Runs under pytest-xdist read and count like runs without it: the same computed / reused counts
for ``-n 0`` and ``-n 2``, the same one message and exit code 4 for a session-ending error, and
``-n auto`` on one GPU runs one worker and says so."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from demo_gates import RUN_FLAGS

FAKEGEN = (Path(__file__).resolve().parent / "fakegen.py").read_text()

# Four gates, each encoding its region's images and one shared reference set (read by every gate,
# as the DIG In reference features are), plus a per-image memo (as masks are).
COUNT_GATES = """
import numpy as np
import pytest

from t2i_fairness.base.memo import namespace_of


class MeanColour:
    fingerprint = "mean-colour:v1"
    kind = "MeanColour"

    def encode_images(self, images):
        return np.stack([np.asarray(im, np.float32).reshape(-1, 3).mean(0) for im in images])


REGIONS = ["africa", "europe", "east_asia", "west_asia"]


@pytest.mark.parametrize("region", REGIONS)
def test_region(region, t2i, gate):
    refs = [r for row in t2i.images([f"a bag in {region}"], 4) for r in row]
    reference = [r for row in t2i.images(["a reference photo"], 6) for r in row]
    feats = t2i.features(MeanColour(), refs + reference, batch_size=3)
    memo = t2i.memo("masks", namespace_of(segmenter="thirds:v1"), ".txt", lambda v: str(v).encode(), lambda b: float(b))
    third = memo.get_many([r.key for r in refs], lambda idx: [float(feats[i].mean()) / 3 for i in idx])
    gate(float(np.mean(third)) / 255, n=len(third))
"""

SUMMARY = re.compile(r"^(images: \d+ generated, \d+ from cache|\S+: \d+ computed, \d+ from cache)$", re.M)


def _project(pytester: pytest.Pytester, monkeypatch, gates: str = COUNT_GATES) -> list[str]:
    pytester.makepyfile(test_counts=gates, fakegen=FAKEGEN)
    for var in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(var, raising=False)  # when this test itself runs under xdist
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(pytester.path), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return ["-p", "xdist", "--t2i-model", "python:fakegen:make", "--t2i-device", "cpu", "--t2i-no-progress",
            "--t2i-thresholds", str(pytester.path / "t.yaml"), *RUN_FLAGS]


def test_computed_and_reused_counts_are_the_same_with_and_without_xdist(pytester, monkeypatch):
    args = _project(pytester, monkeypatch)
    counts = {}
    for n in ("0", "2"):
        result = pytester.runpytest_subprocess(*args, "-n", n, "--t2i-update-thresholds",
                                               "--t2i-cache-dir", str(pytester.path / f"cache{n}"), timeout=300)
        result.assert_outcomes(passed=4)
        out = result.stdout.str()
        assert "INTERNALERROR" not in out
        counts[n] = sorted(SUMMARY.findall(out))
    # 4 regions x 4 images + 6 reference images; each image's features once, each region's memo once. The
    # counts are of distinct entries: the reference set every gate reads was made in this run, so it is
    # computed (once), not "from cache", whether one process read it back four times or two workers did
    assert "images: 22 generated, 0 from cache" in counts["0"]
    assert "features:MeanColour: 22 computed, 0 from cache" in counts["0"]
    assert "masks: 16 computed, 0 from cache" in counts["0"]
    assert counts["2"] == counts["0"]
    # warm: everything was made by an earlier run
    for n in ("0", "2"):
        result = pytester.runpytest_subprocess(*args, "-n", n, "--t2i-cache-dir", str(pytester.path / f"cache{n}"),
                                               timeout=300)
        result.assert_outcomes(passed=4)
        counts[n] = sorted(SUMMARY.findall(result.stdout.str()))
    assert counts["0"] == ["features:MeanColour: 0 computed, 22 from cache", "images: 0 generated, 22 from cache",
                           "masks: 0 computed, 16 from cache"]
    assert counts["2"] == counts["0"]


MISSING_PACKAGE_GATE = """
def test_scored(t2i, gate):
    from t2i_fairness.errors import ModelLoadError

    def build(profile, run):
        try:
            import no_such_scorer_package  # noqa: F401
        except ImportError as err:
            raise ModelLoadError("the scorer 'ghost' needs the 'no-such-scorer-package' package; install it with: "
                                 "pip install no-such-scorer-package") from err
    t2i.scorer("ghost", build)
    gate(0.5, n=1)


def test_other(t2i, gate):
    gate(0.5, n=1)
"""

CASES = {
    "missing model": ([], ["--t2i-model", "/no/such/model"], "t2i-fairness: --t2i-model '/no/such/model': no diffusers pipeline"),
    "missing package": (["MISSING_PACKAGE"], [], "t2i-fairness: the scorer 'ghost' needs the 'no-such-scorer-package' package"),
    "bad option": ([], ["--t2i-objects", "teapot"], "--t2i-objects: unknown object(s) ['teapot']"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_session_ending_error_reads_the_same_under_xdist(pytester, monkeypatch, case):
    gate_file, extra, message = CASES[case]
    args = _project(pytester, monkeypatch, MISSING_PACKAGE_GATE if gate_file else COUNT_GATES)
    outputs = {}
    for n in ("0", "2"):
        result = pytester.runpytest_subprocess(*args, *extra, "-n", n, "--t2i-cache-dir", str(pytester.path / "cache"),
                                               timeout=300)
        text = result.stdout.str() + result.stderr.str()
        assert result.ret == pytest.ExitCode.USAGE_ERROR, (n, text[-3000:])
        assert "INTERNALERROR" not in text and "Traceback" not in text, (n, text[-3000:])
        lines = [line for line in text.splitlines() if message in line]
        assert lines, (n, text[-3000:])
        # the message itself, without what frames it (pytest's "ERROR:", "! Exit: ... !", the verdict line's
        # "after 1 of 2 tests": under xdist the other worker may finish the test it was running)
        outputs[n] = {re.sub(r" after \d+ of \d+ tests.*$", "", line[line.index(message):]).rstrip(" !") for line in lines}
    assert outputs["2"] == outputs["0"]


def test_n_auto_on_one_gpu_runs_one_worker_and_says_so(pytester, monkeypatch):
    args = _project(pytester, monkeypatch)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # one accelerator, as devices.accelerator_count sees it
    result = pytester.runpytest_subprocess(*args, "-n", "auto", "--t2i-cache-dir", str(pytester.path / "cache"),
                                           "-k", "africa", timeout=300)
    out = result.stdout.str()
    assert "t2i-fairness: -n auto: 1 GPU, so 1 worker" in out, out[-3000:]
    assert re.search(r"\b1 worker \[", out) or "created: 1/1 worker" in out, out[-3000:]
